// Native block-FP8 (W8A8) linears on CUDA: weights kept as e4m3 + fp32 128x128 block scales on the device
// (padded to multiples of 128 at prepare time), activations quantized per token per 128 channels, then the
// small-M tensor-core kernel (decode) or cuBLASLt's block-scaled FP8 GEMM (VEC128_32F activations,
// BLK128x128_32F weights) for large M. bf16 output. Semantics: ops/fp8.h linear_w8a8_reference.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/tensor.h"
#include "kernels/fp8_gemm.h"
#include "kernels/fp8_gemm_wgmma.h"
#include "ops/fp8.h"
#include "ops/fp8_tuning.h"
#include "ops/linear_weight.h"

namespace ds {

struct Fp8Weight {
  Tensor w;     // F8_E4M3 [Np, Kp] on the device, zero padding
  Tensor sw;    // F32 [Np / 128, Kp / 128] (row-major, K blocks fastest)
  Tensor sw_t;  // F32 [Kp / 128, Np / 128] (the transposed scale grid, for the cuBLASLt layout probe)
  Tensor sw_lt; // F32 [Np / 128, round_up(Kp / 128, 4)]: cuBLASLt's BLK128x128 grid (rows padded to 4 floats)
  int64_t N = 0, K = 0, Np = 0, Kp = 0;
  kernels::Fp8WeightMap map;  // w's tensor map for the split-K wgmma GEMM (attach_fp8_weight_map)
  bool defined() const { return w.defined(); }
};

// Fills w.map from w.w (prepare_fp8_weight does; benchmarks that build an Fp8Weight by hand call it). Without a
// valid map the split-K wgmma path is not taken.
void attach_fp8_weight_map(Fp8Weight& w);

// ops/fp8.h fp8_scales_are_pow2 for a scale grid on either device.
bool fp8_device_scales_are_pow2(const Tensor& scales);

// Uploads a host block-FP8 weight (block 128x128) with padding. Ragged edges keep their own scale block, so
// the scale grid is unchanged by padding.
Fp8Weight prepare_fp8_weight(const LinearWeight& host);

// kWgmma: the split-K wgmma GEMM (kernels/fp8_gemm_wgmma.h), M <= 64; where kAuto takes it: wgmma_auto.
enum class Fp8Path { kAuto, kSmallM, kCublasLt, kWgmma };

class Fp8Gemm {
 public:
  Fp8Gemm();
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // y[M, N] bf16 = W8A8(x, w); x bf16 (or f32) [M, K] on the device, contiguous rows.
  Tensor linear(const Tensor& x, const Fp8Weight& w, bool ue8m0, Fp8Path path = Fp8Path::kAuto);
  // linear() into y ([M, N] bf16, contiguous rows) whose buffer holds y_rows >= M rows (see linear_into).
  void linear_to(const Tensor& x, const Fp8Weight& w, bool ue8m0, Fp8Path path, Tensor& y, int64_t y_rows);

  // CudaOps' hooks. prepare: uploads `host` (block-FP8) and returns a LinearWeight whose weight is a
  // [N, K] F8_E4M3 view of the padded device copy (row stride Kp: only this class may read it) and whose
  // scale_inv is the device scale grid; the padded weight is kept in a registry keyed by its data pointer.
  // Activation scales are ue8m0 when every weight scale is a power of two (checkpoints with scale_fmt ue8m0
  // and --quantization fp8 under ue8m0; the op interface carries no config).
  LinearWeight prepare(const LinearWeight& host);
  bool owns(const LinearWeight& w) const;
  // In-place weight update (Ops::update_prepared): dst's registered copies (padded weight, scale layouts, ue8m0)
  // take src's values, dst's memory kept; src leaves the registry. Errors: either not prepared here, other sizes.
  Status update(const LinearWeight& dst, const LinearWeight& src, cudaStream_t stream);
  // Whether a prepared weight's activations take ue8m0 scales (see prepare).
  bool ue8m0_of(const LinearWeight& prepared) const;
  // Whether kAuto runs `prepared` at M tokens on the wgmma GEMM (which reads a producer's token-major quantization:
  // linear_quantized_small_m, linear_pair's xq).
  bool wgmma_takes(const LinearWeight& prepared, int64_t M);
  Tensor linear(const Tensor& x, const LinearWeight& prepared);
  // linear() into out[0, M) of a bf16 row-major buffer with row stride N that has `out_rows` >= M rows: with
  // out_rows >= M rounded up to kLtRowMultiple the cuBLASLt path writes its padded rows straight there (rows past
  // M get pad-row results: the caller's to overwrite or ignore), otherwise through a temporary. The per-expert
  // prefill GEMMs lay their segments back to back, so each writes in place.
  void linear_into(const Tensor& x, const LinearWeight& prepared, void* out, int64_t out_rows);

  // Two prepared weights on the same activations (q and kv_a of a layer): when both take the small-M kernel, or both
  // the wgmma GEMM, at this M, with the same K and activation scale kind, x is quantized once for both and *y1, *y2
  // are set; else false, nothing launched. xq / xs (optional): x's quantization made already (q [M, Kp] e4m3,
  // token-major scales [M, Kp / 128], xq_ue8m0 as made), used instead of quantizing x where it fits both weights.
  bool linear_pair(const Tensor& x, const LinearWeight& p1, const LinearWeight& p2, Tensor* y1, Tensor* y2,
                   const Tensor* xq = nullptr, const Tensor* xs = nullptr, bool xq_ue8m0 = false);

  // [gate; up] stacked as one prepared weight [2 I, K] (I % 128 == 0, as prepare_mlp pads): y = silu(x gate^T) *
  // (x up^T) [M, I] from the small-M kernel's fused epilogue (one rounding), when the fused small-M path is on
  // (fused_small_m) and this M takes the small-M kernel; else false, nothing launched.
  // xq / xs / xq_ue8m0: as for linear_pair.
  bool linear_silu(const Tensor& x, const LinearWeight& gate_up, Tensor* y, const Tensor* xq = nullptr,
                   const Tensor* xs = nullptr, bool xq_ue8m0 = false);

  // The fused small-M paths, three parts: q - at M <= 8 the small-M kernel quantizes x itself (no quant_act
  // launch; the same bits); p - linear_pair runs both GEMMs in one launch; s - linear_silu applies the SiLU in
  // the GEMM's epilogue. Default p and s (q measured slower at batch 1); DSERVE_FP8_FUSED_SMALL_M: "1" all three,
  // "0" none, else a string of the letters wanted. Tests switch them per object.
  bool fused_quant() const { return fused_quant_; }
  bool fused_pair() const { return fused_pair_; }
  bool fused_silu() const { return fused_silu_; }
  void set_fused_small_m(bool on) { fused_quant_ = fused_pair_ = fused_silu_ = on; }
  void set_fused_small_m(bool quant, bool pair, bool silu) {
    fused_quant_ = quant;
    fused_pair_ = pair;
    fused_silu_ = silu;
  }

  // linear() on x's quantization made already (q [M, Kp] e4m3, token-major scales sx [M, Kp / 128], ue8m0 as made):
  // the small-M kernel or the wgmma GEMM (both read this layout) where kAuto takes them, so false (nothing launched)
  // where kAuto would run cuBLASLt, or where the weight's K or activation scale kind differ.
  bool linear_quantized_small_m(const Tensor& q, const Tensor& sx, bool ue8m0, const LinearWeight& prepared, Tensor* y);

  // The cuBLASLt GEMM of a prepared weight (N a multiple of 128, unpadded K = Kp) on activations already quantized
  // in cuBLASLt's layout: q [M, K] e4m3, sx as lt_scales_m_major() says with row stride lt_scale_ld(M); M a
  // multiple of kLtRowMultiple that lt_supported_for takes. out [M, N] bf16, contiguous rows. The per-expert
  // GEMMs of a prefill-sized MoE layer, whose rows are quantized once for all experts.
  void linear_quantized(const void* q, const float* sx, const LinearWeight& prepared, int64_t M, void* out);
  bool lt_supported_for(const LinearWeight& prepared, int64_t M);
  bool lt_scales_m_major() const { return (lt_layout_ & 1) != 0; }

  // The split-K wgmma path: under kAuto from 33 to 64 tokens (DSERVE_FP8_WGMMA=0: the small-M kernel up to the
  // table's M, then cuBLASLt; DSERVE_FP8_WGMMA_MIN_M / _MAX_M or set_wgmma_range move the range), and its K splits
  // for (M, Np, Kp): enough CTAs for a target of DSERVE_FP8_WGMMA_CTAS (default 1: the fewest splits, ranges of at
  // most kFp8WgmmaMaxBlocks; 0: one wave), each range at least DSERVE_FP8_WGMMA_MIN_BLOCKS blocks (default 2), within
  // the partials buffer. Measured (H200, session 52, BENCHMARKS): every split policy lost to one range on V2-Lite's
  // shapes (the split sum's fence and second pass cost more than the parallelism gains); in the model (V2-Lite FP8)
  // it wins at 48 / 64 tokens (batch 48 -5%, 64 -4%) and loses at 32 (+2%, where it took the shared and dense
  // gate|up from cuBLASLt).
  void set_wgmma_range(int64_t min_m, int64_t max_m) {
    wgmma_min_m_ = min_m;
    wgmma_max_m_ = max_m;
  }
  int64_t wgmma_min_m() const { return wgmma_min_m_; }
  void set_wgmma_enabled(bool on) { wgmma_on_ = on; }
  // linear_pair on the wgmma GEMM in one launch for both products where each takes one K range
  // (kernels::launch_fp8_gemm_wgmma_pair; V2-Lite's q / kv_a pair). The default since session 55 (H200, V2-Lite FP8
  // batch 48 / 64, two rounds alternating: 5.55-5.56 / 5.71-5.73 ms vs 5.69-5.73 / 5.87-5.91 with two launches,
  // -2.7%); DSERVE_FP8_WGMMA_PAIR=0: two launches (A/B runs).
  void set_wgmma_pair(bool on) { wgmma_pair_ = on; }
  // Tests: the CTA target (0: one wave, 1: the fewest splits) and the fewest K blocks a range.
  void set_wgmma_split_policy(int64_t ctas, int64_t min_blocks) {
    wgmma_ctas_ = ctas;
    wgmma_min_blocks_ = min_blocks < 1 ? 1 : min_blocks;
  }
  // K ranges a launch at (M, Np, Kp) runs: the cluster size where wgmma_cluster takes one, else the policy above.
  int wgmma_splits(int64_t M, int64_t Np, int64_t Kp) const;
  // The K split summed inside thread-block clusters (kernels' Fp8GemmWgmmaParams::cluster): no partials buffer,
  // fence or ticket, the ranges' sums meet in distributed shared memory. Opt-in, DSERVE_FP8_WGMMA_CLUSTER=2|4|8 (the
  // largest cluster; 0 off, the default): written in session 54 without device time (not yet run). The largest
  // cluster whose ranges are non-empty, at most kFp8WgmmaMaxBlocks and at least the policy's fewest blocks, and whose
  // CTAs fit one wave of that cluster size; past one range (K > kFp8WgmmaMaxBlocks blocks) with none inside a wave,
  // the smallest cluster that covers K and can run. 1: none. `waves` (DSERVE_FP8_WGMMA_CLUSTER_WAVES, default 1) allows that many waves of CTAs
  // instead (an A/B knob for the weights of hundreds of tiles, V3's q_b: 1.45 waves unsplit).
  void set_wgmma_cluster(int max_size, int waves = 1) {
    wgmma_cluster_ = max_size;
    wgmma_cluster_waves_ = waves < 1 ? 1 : waves;
  }
  int wgmma_cluster(int64_t M, int64_t Np, int64_t Kp) const;
  // Clusters only where one K range cannot cover the weight (K > kFp8WgmmaMaxBlocks blocks: V3's 56-144-block
  // weights, which kAuto otherwise leaves to cuBLASLt) and only at min_m..max_m tokens; clusters of at most max_size
  // (0: off, the default). Session 55's kernel bench (H200, 32 tokens): q_a_kv_a 10.4 vs cuBLASLt 15.2 us, o_proj
  // 37.5 vs 41.1, dense gate|up 75.9 vs 80.9, while at 64 tokens cuBLASLt wins all but q_a_kv_a; V2-Lite's one-range
  // weights lost with clusters, and this leaves them alone. These weights skip DSERVE_FP8_WGMMA_MAX_MB. Env
  // DSERVE_FP8_WGMMA_COVER=2|4|8, DSERVE_FP8_WGMMA_COVER_MIN_M / _MAX_M (default 17 / 32). Written in session 56.
  void set_wgmma_cover(int max_size, int64_t min_m = 17, int64_t max_m = 32) {
    wgmma_cover_ = max_size;
    wgmma_cover_min_m_ = min_m;
    wgmma_cover_max_m_ = max_m;
  }
  // Whether (M, Kp) is in the cover mode's reach: K past one range and M inside its token range.
  bool wgmma_covers(int64_t M, int64_t Kp) const {
    return wgmma_cover_ >= 2 && Kp > 128 * kernels::kFp8WgmmaMaxBlocks && M >= wgmma_cover_min_m_ &&
           M <= wgmma_cover_max_m_;
  }
  // CTAs that fit at once in clusters of 2, 4 and 8 (kernels::fp8_gemm_wgmma_cluster_ctas: whole clusters inside
  // GPCs) times the waves allowed; 0 where that size cannot run.
  using ClusterWaves = std::array<int64_t, 3>;
  // wgmma_cluster's choice for `tiles` 64-row tiles (Np / 64) of `kb` K blocks, clusters of at most max_size whose
  // CTAs fit `wave`, ranges of at least min_blocks: a pure function of its arguments (checked without a GPU,
  // fp8_policy_test.cpp).
  static int choose_wgmma_cluster(int64_t tiles, int64_t kb, const ClusterWaves& wave, int max_size,
                                  int64_t min_blocks);

  // Largest M the small-M kernel takes under kAuto for shapes without a tuning entry (env
  // DSERVE_FP8_SMALL_M_MAX, which then also overrides the table; default 16, at most 64).
  int64_t small_m_max() const { return small_m_max_; }
  // The per-shape table from `dserve tune-gemm` (ops/fp8_tuning.h); kAuto then picks per (Np, Kp).
  void set_tuning(Fp8GemmTuning t) {
    tuning_ = std::move(t);
    has_tuning_ = true;
  }
  int64_t small_m_max_for(int64_t Np, int64_t Kp) const {
    return has_tuning_ && !small_m_forced_ ? tuning_.lookup(Np, Kp) : small_m_max_;
  }

  // cuBLASLt scale-tensor layouts (a probe for the first device run; 0 is the documented default):
  // bit 0: activation scales K-block-major [Kp/128][M4] (set, default) vs token-major [M][Kp/128];
  // bit 1: weight scales transposed [Kp/128][Np/128] vs [Np/128][Kp/128] (default); bit 2: K-block-major
  // activation scales with row stride M instead of round_up(M, 4).
  void set_lt_layout(int layout) { lt_layout_ = layout & 7; }
  int lt_layout() const { return lt_layout_; }

  // The cuBLASLt block-scaled GEMM on already quantized operands (benchmarks): q [M, Kp] e4m3, sx as
  // described by lt_layout (ld = round_up(M, 4) when K-block-major), d bf16 [M, Np]. M must be a multiple of
  // kLtRowMultiple (linear() pads: cuBLASLt refuses or miscomputes other M on Hopper, seen on the H100).
  void run_cublaslt(const void* q, const float* sx, const Fp8Weight& w, int64_t M, void* d, cudaStream_t stream);

  // Whether cuBLASLt has a block-scaled algorithm for this shape (no abort; the plan is cached). When it has
  // none, linear() runs the small-M kernel over 64-token chunks instead (correct, slower).
  bool lt_supported(int64_t M, int64_t Np, int64_t Kp);
  static constexpr int64_t kLtRowMultiple = 16;

  // Row stride of the K-block-major activation scales for cuBLASLt at this M (bit 2 of the layout: M itself).
  int64_t lt_scale_ld(int64_t M) const { return (lt_layout_ & 4) ? M : (M + 3) / 4 * 4; }

 private:
  struct Plan;
  Plan* try_plan(int64_t M, int64_t Np, int64_t Kp);  // null when cuBLASLt has no algorithm
  Plan& plan_for(int64_t M, int64_t Np, int64_t Kp);
  void quantize_small_m(const Tensor& x, const Fp8Weight& w, bool ue8m0, Tensor* q, Tensor* sx);
  void small_m_chunks(const Tensor& q, const Tensor& sx, const Fp8Weight& w, int64_t M, Tensor& y);
  // The split-K wgmma GEMM's launch for w on x's small-M quantization (q [M, Kp], token-major sx) into y ([M, N]
  // bf16 rows): its parameters (splits and this stream's partials / tickets set), then the launch.
  kernels::Fp8GemmWgmmaParams wgmma_params(const Tensor& q, const Tensor& sx, const Fp8Weight& w, int64_t M,
                                           Tensor& y) const;
  void run_wgmma(const kernels::Fp8GemmWgmmaParams& p, const Fp8Weight& w);
  bool wgmma_fits(const Fp8Weight& w, int64_t M) const;
  // Whether kAuto (and the pair / prequantized paths) take the wgmma GEMM at M: inside its token range, ahead of
  // both other paths, only where one K range covers the weight (Kp <= 128 * kFp8WgmmaMaxBlocks: split ranges lost to
  // cuBLASLt in every measurement, V3-shaped FP8 batch 64 +2%; or where a cluster covers it) and the weight is at
  // most DSERVE_FP8_WGMMA_MAX_MB MiB (default 12: V2-Lite's attention and shared-expert weights gain, V3's 15-38 MB q_b / shared down lost 0.8% at
  // batch 48; the small weights are mostly in flight before the PDL wait). Session 52.
  // With the cover mode (set_wgmma_cover) also the K-split weights in its token range, clustered, of any size.
  bool wgmma_auto(const Fp8Weight& w, int64_t M) const {
    if (wgmma_on_ && wgmma_covers(M, w.Kp)) return wgmma_cluster(M, w.Np, w.Kp) > 1 && wgmma_fits(w, M);
    return wgmma_on_ && M >= wgmma_min_m_ && M <= wgmma_max_m_ &&
           (w.Kp <= 128 * kernels::kFp8WgmmaMaxBlocks || wgmma_cluster(M, w.Np, w.Kp) > 1) &&
           w.Np * w.Kp <= (wgmma_max_mb_ << 20) && wgmma_fits(w, M);
  }
  // Whether M runs the small-M kernel for w: up to the tuning table's M, outside the wgmma range.
  bool takes_small_m(const Fp8Weight& w, int64_t M) const {
    return M <= small_m_max_for(w.Np, w.Kp) && !wgmma_auto(w, M);
  }
  // The small-M kernel's parameters for w writing y ([M, ldd] bf16), activations not set.
  static kernels::Fp8GemmSmallMParams small_m_params(const Fp8Weight& w, int64_t M, void* y, int64_t ldd);
  // Sets p to quantize x (bf16 [M, K] contiguous) in the kernel when the fused path is on and the kernel takes
  // it at this M; false otherwise (p unchanged).
  bool use_fused_quant(const Tensor& x, const Fp8Weight& w, bool ue8m0, kernels::Fp8GemmSmallMParams* p) const;

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;       // compute stream
  void* side_workspace_ = nullptr;  // side stream (concurrent GEMMs must not share one)
  size_t workspace_bytes_ = 0;
  // The split-K partials and tickets, one pair a stream (main, side), tickets zero between launches.
  static constexpr int64_t kSplitKFloats = int64_t{2} << 20, kSplitKTickets = 4096;
  float* splitk_partial_[2] = {nullptr, nullptr};
  int* splitk_tickets_[2] = {nullptr, nullptr};
  bool wgmma_on_ = true;
  bool wgmma_pair_ = true;  // DSERVE_FP8_WGMMA_PAIR (set_wgmma_pair)
  int64_t wgmma_ctas_ = 1, wgmma_min_blocks_ = 2, wgmma_min_m_ = 33, wgmma_max_m_ = kernels::kFp8WgmmaMaxM;
  int64_t wgmma_max_mb_ = 12;
  int wgmma_cluster_ = 0, wgmma_cluster_waves_ = 1;  // DSERVE_FP8_WGMMA_CLUSTER(_WAVES) (set_wgmma_cluster)
  int wgmma_cover_ = 0;  // DSERVE_FP8_WGMMA_COVER (set_wgmma_cover)
  int64_t wgmma_cover_min_m_ = 17, wgmma_cover_max_m_ = 32;
  // Measured on the H100 (dserve_fp8_gemm_bench, 2026-11-23): the small-M kernel wins up to M = 8-16 on V3 shapes,
  // cuBLASLt block-FP8 from there (2-3x faster at M = 64). DSERVE_FP8_SMALL_M_MAX overrides.
  int64_t small_m_max_ = 16;
  bool small_m_forced_ = false;  // DSERVE_FP8_SMALL_M_MAX set
  bool fused_quant_ = false, fused_pair_ = false, fused_silu_ = false;  // DSERVE_FP8_FUSED_SMALL_M
  Fp8GemmTuning tuning_;
  bool has_tuning_ = false;
  int lt_layout_ = 1;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  struct Registered {
    Fp8Weight w;
    bool ue8m0 = false;
  };
  const Registered& registered(const LinearWeight& prepared);
  mutable std::mutex reg_mu_;
  std::map<const void*, Registered> registry_;
};

}  // namespace ds
