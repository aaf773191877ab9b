// The CUDA backend: every op of ops/ops.h on one GPU with bf16 activations and fp32 math, on one stream,
// with stream-ordered allocation (cuda_runtime.h). Weights are prepared as bf16 (block-FP8 dequantised at
// prepare time); F32 params (e.g. the V3 correction bias) stay F32. Semantics are CpuOps' (the oracle).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>

#include "core/env.h"
#include "core/logging.h"
#include "kernels/basic.h"
#include "kernels/fp8_gemm.h"
#include "kernels/indexer.h"
#include "kernels/kv_fp8.h"
#include "kernels/mla_fused.h"
#include "kernels/moe.h"
#include "kernels/gemm_m64.h"
#include "kernels/gemm_small_m.h"
#include "kernels/moe_fp8.h"
#include "kernels/moe_fp8_prefill.h"
#include "kernels/pdl.cuh"
#include "kernels/moe_gemm.h"
#include "kernels/rms_norm.h"
#include "kernels/rope_cache.h"
#include "kernels/sampling.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/cublaslt_gemm.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/fallback_attention.h"
#include "ops/cuda/tuning_file.h"
#include "ops/ops.h"

namespace ds {
namespace {

using kernels::ElemType;

ElemType elem_type(DType t) {
  switch (t) {
    case DType::kF32: return ElemType::kF32;
    case DType::kBF16: return ElemType::kBF16;
    case DType::kF16: return ElemType::kF16;
    case DType::kF8E4M3: return ElemType::kF8E4M3;
    case DType::kF8E5M2: return ElemType::kF8E5M2;
    case DType::kI32: return ElemType::kI32;
    default: DS_CHECK(false, "no kernel element type for ", dtype_name(t));
  }
  return ElemType::kF32;
}

void check_cuda(const Tensor& t, const char* what) {
  DS_CHECK(t.defined() && t.device() == Device::kCuda, what, ": expected a cuda tensor, got ",
           t.defined() ? t.describe() : std::string("undefined"));
}
void check_dtype(const Tensor& t, DType d, const char* what) {
  check_cuda(t, what);
  DS_CHECK(t.dtype() == d, what, ": expected ", dtype_name(d), ", got ", t.describe());
}
const int32_t* i32(const Tensor& t, const char* what) {
  check_dtype(t, DType::kI32, what);
  return t.data_as<int32_t>();
}

// The stored format of a latent cache tensor (empty_latent_cache), checked against the KV dtype in use.
int latent_format(const Tensor& cache, KvCacheDtype dtype) {
  check_cuda(cache, "latent cache");
  DS_CHECK(cache.dtype() == (dtype == KvCacheDtype::kFp8E4M3   ? DType::kF8E4M3
                             : dtype == KvCacheDtype::kFp8E5M2 ? DType::kF8E5M2
                                                               : DType::kBF16),
           "latent cache ", cache.describe(), " does not hold the KV cache dtype in use (empty_latent_cache makes it)");
  return latent_cache_format(cache);
}
// Rope dims of a packed latent cache whose latent is `nope` wide.
int64_t latent_rope(const Tensor& cache, int format, int64_t nope) {
  const int64_t rope = kernels::kv_rope_of(format, nope, cache.dim(1) * static_cast<int64_t>(dtype_size(cache.dtype())));
  DS_CHECK(rope >= 0, "latent cache ", cache.describe(), " rows do not fit a latent of ", nope);
  return rope;
}

// Ops::sample_async's result on its way: the ids and logprobs land in a pinned slot behind an event.
struct CudaPendingSample final : PendingSample {
  PinnedSlot slot;
  bool recorded = false;
  int64_t B = 0, n = 0;           // rows; top-logprob columns copied back (0: none)
  int64_t num_ids = 0;            // requested ids' logprobs copied back after them
  std::vector<int32_t> top_n;     // per row, entries wanted
  ~CudaPendingSample() override {
    if (recorded) (void)cudaEventSynchronize(slot.done);  // the copy must land before the slot is reused
    release_pinned(slot);
  }
  // The launch's output block (kernels::sample_outputs' [4, rows] words, then [2, rows, top_columns] top logprobs
  // when top_columns > 0, then the ids' logprobs [ids]) copied into a pinned slot behind the event, on `stream`.
  void copy_back(const int32_t* words, int64_t rows, int64_t top_columns, cudaStream_t stream, int64_t ids = 0) {
    const size_t bytes = static_cast<size_t>(4 * rows + 2 * rows * top_columns + ids) * 4;
    slot = acquire_pinned(bytes);
    DS_CUDA_CHECK(cudaMemcpyAsync(slot.host, words, bytes, cudaMemcpyDeviceToHost, stream));
    DS_CUDA_CHECK(cudaEventRecord(slot.done, stream));
    recorded = true;
    B = rows;
    n = top_columns;
    num_ids = ids;
  }
  SampleResult wait() override {
    SampleResult res;
    if (B == 0) return res;
    DS_CUDA_CHECK(cudaEventSynchronize(slot.done));
    recorded = false;
    const int32_t* w = static_cast<const int32_t*>(slot.host);
    auto f32 = [](const int32_t* p) { return reinterpret_cast<const float*>(p); };
    res.tokens.assign(w, w + B);
    res.bad_id.assign(w + B, w + 2 * B);
    res.logprobs.assign(f32(w + 2 * B), f32(w + 2 * B) + B);
    res.bad_value.assign(f32(w + 3 * B), f32(w + 3 * B) + B);
    res.top.resize(B);
    for (int64_t b = 0; b < B && n > 0; ++b) {
      if (res.bad_id[b] >= 0) continue;
      for (int64_t i = 0; i < top_n[b]; ++i)
        res.top[b].emplace_back(f32(w + 4 * B + B * n)[b * n + i], w[4 * B + b * n + i]);
    }
    res.id_logprobs.assign(f32(w + 4 * B + 2 * B * n), f32(w + 4 * B + 2 * B * n) + num_ids);
    return res;
  }
};

class CudaOps final : public Ops {
 public:
  explicit CudaOps(int device_index) : device_(device_index) {
    init_cuda_device(device_index);
    gemm_ = std::make_unique<CublasLtGemm>();
    ticket_ = empty({1}, DType::kI32);  // moe_gate_route's grid counter: made here, never inside a graph capture
    DS_CUDA_CHECK(cudaMemsetAsync(ticket_.data(), 0, sizeof(int32_t), stream()));
    // Block-FP8 linears, MLPs and experts (not kv_b) stay e4m3 on the device and run W8A8 (ops/cuda/fp8_linear.h,
    // kernels/moe_fp8.h), as SGLang runs FP8 checkpoints; DSERVE_FP8_NATIVE=0 dequantizes them to bf16 at prepare
    // time instead (the transformers reference's semantics; the fixture tests against it pin that).
    if (env_flag("DSERVE_FP8_NATIVE", true)) {
      fp8_ = std::make_unique<Fp8Gemm>();
      // The per-GPU dispatch tables written by `dserve tune-gemm` / `dserve tune-moe`.
      if (const std::string path = tuning_path("DSERVE_FP8_GEMM_CONFIG", "fp8_gemm", device_index); !path.empty())
        fp8_->set_tuning(load_tuning(path, parse_fp8_gemm_tuning, "FP8 GEMM"));
      if (const std::string path = tuning_path("DSERVE_MOE_FP8_CONFIG", "moe_fp8", device_index); !path.empty())
        moe_fp8_tuning_ = load_tuning(path, parse_moe_fp8_tuning, "FP8 MoE");
    }
    // Debugging switch: DSERVE_CUDA_ATTENTION=fallback runs attention on the simple fallback kernel.
    const char* attn = env_text("DSERVE_CUDA_ATTENTION");
    fallback_attention_ = attn && std::string(attn) == "fallback";
    // Debugging switch: DSERVE_MOE_GROUPED=0 runs the experts as per-expert cuBLASLt GEMMs (host sync; no
    // CUDA graphs then).
    grouped_moe_ = env_flag("DSERVE_MOE_GROUPED", true);
    // Prefill-sized FP8 MoE layers quantize their routed rows once per layer (moe_fp8_segmented) instead of
    // around every expert's GEMM: the same bits, V2-Lite 64 x 512 prefill 1.04x (H100, 2026-11-26).
    // DSERVE_MOE_FP8_SEGMENTED=0: the per-expert chain.
    moe_fp8_segmented_ = env_flag("DSERVE_MOE_FP8_SEGMENTED", true);
    // Decode-sized norms also write their output's FP8 quantization for the FP8 linears and experts that read it
    // (rms_norm_q): the q / kv_a pair, the shared gate|up and the routed experts then take no quant_act launch
    // (three a V2-Lite layer). Slower alone every time measured (H100 sessions 24-25; H200 session 28: 1.95 vs
    // 1.81 ms at batch 1): the shared gate|up, no longer behind a quant_act, starts its weight stream beside the
    // router and the routing and slows them. With the model forking the shared MLP after the routing when x's
    // quantization exists (ModelOptions::SharedFork::kAuto), faster (session 29, BENCHMARKS.md).
    // DSERVE_FP8_FUSED_NORM=0: quant_act launches instead (and the shared MLP forks before the routing).
    fused_norm_ = env_flag("DSERVE_FP8_FUSED_NORM", true);
    // DSERVE_MLA_VC_QUANT=0: o_proj's input quantized by a quant_act launch instead of the fused combine's tail.
    vc_quant_ = env_flag("DSERVE_MLA_VC_QUANT", true);
    // Past kFusedNormMaxRows where the consumer runs on the wgmma FP8 GEMM (wgmma_reads_xq).
    // DSERVE_FP8_FUSED_NORM_WGMMA=0: quant_act launches there instead.
    fused_norm_wgmma_ = env_flag("DSERVE_FP8_FUSED_NORM_WGMMA", true);
    // DSERVE_FP8_SILU_QUANT=1: the gated MLPs' SiLU-mul makes the down's FP8 input there too (linear_silu_q_for).
    silu_quant_ = env_flag("DSERVE_FP8_SILU_QUANT", false);
    // Decode MoE layers add the shared expert inside the routed combine (one launch and one bf16 rounding fewer:
    // moe_experts_shared_q). No gain in session 13's layout (see above); with the pre-wait kernels, together with
    // the fused routing and grouping, V2-Lite batch 1 2.94 / 2.99 vs 3.01 / 3.01 ms, FP8 2.61 / 2.62 vs 2.70 / 2.68
    // (H100, 2026-11-27, BENCHMARKS.md). DSERVE_MOE_FUSED_SHARED=0: joined and added apart.
    fused_shared_ = env_flag("DSERVE_MOE_FUSED_SHARED", true);
    // Decode MoE layers leave their combine to the next layer's input norm, which sums the routed rows and the
    // shared expert's output in its own kernel (moe_experts_open / rms_norm_q_open: one launch fewer per layer).
    // DSERVE_MOE_NORM_FUSED=0: combined apart.
    open_moe_ = env_flag("DSERVE_MOE_NORM_FUSED", true);
    // Greedy-only sampling batches (no penalties, logprobs or top logprobs) take one launch with the row parameters
    // by value (launch_sample_greedy) instead of a parameter upload and three launches. DSERVE_SAMPLE_GREEDY_FAST=0:
    // the general path for every batch.
    greedy_fast_ = env_flag("DSERVE_SAMPLE_GREEDY_FAST", true);
    // Decode-sized FP8 expert products (<= 16 rows an expert, K <= 7168) on the wgmma walk (kernels/moe_wgmma.cu:
    // native e4m3 tensor cores; the mma.sync kernels' e4m3 is emulated on Hopper), with per-expert tensor maps built
    // with the expert table. Default since session 39 (s39f, H200, --quantization fp8, two rounds: V2-Lite batch 1 /
    // 8 / 16 1.61 / 3.47 / 4.78 ms vs 1.60-1.61 / 3.77-3.80 / 6.21-6.30; V3-shaped 5 layers 1.52 / 3.70 / 6.29 vs 1.57
    // / 4.04 / 6.88); DSERVE_MOE_FP8_WGMMA=0: the mma.sync kernels.
    wgmma_walk_ = env_flag("DSERVE_MOE_FP8_WGMMA", true);
    // The bf16 experts' decode products on the same walk over bf16 bytes (wgmma k16, no scales) instead of the
    // mma.sync kernels, from DSERVE_MOE_BF16_WGMMA=n tokens on (0: off). Default n = 1 since session 40 (s40b, H200,
    // V2-Lite bf16, the walk at its ring depths (kernels/moe_wgmma.cu walk_stages) vs off: see BENCHMARKS.md).
    bf16_wgmma_min_tokens_ = env_int("DSERVE_MOE_BF16_WGMMA", 1);
    // DSERVE_MOE_WGMMA_STAGES=4|6|8: both walks' ring depth for A/B runs (unset: walk_stages's choice by dtype and
    // token columns).
    wgmma_stages_ = static_cast<int>(env_int("DSERVE_MOE_WGMMA_STAGES", 0));
    // The walks' CTAs take tiles from a counter (one a stream, zero between launches) after their first, instead of
    // b, b + grid, ...: CTAs that start late, where the side stream's shared MLP holds SMs, take fewer tiles. H200,
    // session 53 (V2-Lite, two rounds alternating, ms; s53c) FP8 batch 48 / 64 / 128 5.72 / 5.92 / 7.12 vs 5.82 /
    // 6.01 / 7.32, bf16 batch 64 9.47 vs 9.50; (s53d) FP8 batch 32 5.34-5.35 vs 5.52-5.55, batch 8 3.37-3.39 vs
    // 3.40-3.41, batch 1 1.54 vs 1.52-1.53 (a CTA has about one tile there: the counter only costs). Alone (no side
    // stream) it costs 0.1-1 us on V2-Lite's walks and gains 0.5-1.5 on V3's. Hence from kWalkDynamicMinTokens
    // tokens on; DSERVE_MOE_WALK_DYNAMIC=1 always, 0 never.
    walk_dynamic_ = static_cast<int>(env_int("DSERVE_MOE_WALK_DYNAMIC", -1));
    walk_counters_ = empty({4}, DType::kI32);
    DS_CUDA_CHECK(cudaMemsetAsync(walk_counters_.data(), 0, walk_counters_.nbytes(), stream()));
    // The FP8 walk's weight boxes with an L2 evict-first policy (as the mma.sync FP8 streams since session 37: a step
    // reads each expert once, ~80 MB a V2-Lite layer through the L2, and the activations a few launches later should
    // stay). s40b / s40c (H200, three rounds): FP8 V2-Lite batch 1 1.56-1.57 vs 1.61-1.63 ms, batch 8 3.43-3.50 vs
    // 3.46-3.51, batch 16 4.66-4.67 vs 4.64-4.68; V3-shaped 5 layers b1 / b8 1.52 / 3.71 either way; bf16 a tie
    // (2.02 / 5.40 vs 2.01 / 5.37), so off there. DSERVE_MOE_WGMMA_EVICT_FIRST=1: both walks, 0: neither.
    const int64_t evict_first = env_int("DSERVE_MOE_WGMMA_EVICT_FIRST", -1);
    fp8_walk_evict_first_ = evict_first != 0;
    bf16_walk_evict_first_ = evict_first == 1;
    // Both walks past 16 tokens, up to DSERVE_MOE_WALK_MAX_TOKENS (default 256; 16: never past 16), where the routed
    // rows average at most the dtype's bound below an expert (8 for both when these figures were taken; an expert past
    // 16 rows takes a pass over its weights per 16); the pipelined mma.sync tiles otherwise (V3's MoE layer at 32-256
    // tokens: 0.73-0.76 of its weight roofline alone, s40a).
    // s40e (H200, one round, graphs, 256 / 32, ms): V3-shaped FP8 5 layers b32 / b64 / b128 9.21 / 11.91 / 13.77 vs
    // 10.72 / 13.88 / 16.04; V2-Lite FP8 b32 / b64 5.62 / 6.63 vs 7.11 / 7.83, bf16 8.92 / 9.40 vs 9.41 / 9.65.
    // s41a (two rounds): V3-shaped b256 (8 rows an expert on average) 15.18 / 15.22 at 256 vs 17.70 / 17.82 at 128,
    // b32-b128 the same (9.21-9.24 / 11.91-11.96 / 13.78-13.81).
    walk_max_tokens_ = std::max<int64_t>(env_int("DSERVE_MOE_WALK_MAX_TOKENS", 256), 16);
    // The mean rows an expert up to which the walks take a step past 16 tokens (an expert past 16 rows takes a pass
    // over its tiles per 16): FP8 32, bf16 8; DSERVE_MOE_WALK_ROWS_PER_EXPERT=n sets both (A/B runs). s51h (H200,
    // V2-Lite, 256 / 32, graphs, two rounds alternating, ms): FP8 b128 (12 rows an expert) 7.45-7.50 at 16 or 32 vs
    // 8.68-8.72 at 8, b256 (24) 11.16-11.18 at 32 vs 11.80-11.88 (the pipelined tile's mma.sync e4m3 is emulated
    // on Hopper: FP8 b256 had decoded no faster than bf16); bf16 b128 10.72 at 16 vs 10.05-10.08, b256 17.05 at 32
    // vs 11.53: bf16's mma.sync is native, so its tile stays.
    if (const int64_t n = env_int("DSERVE_MOE_WALK_ROWS_PER_EXPERT", 0); n > 0)
      fp8_walk_rows_per_expert_ = bf16_walk_rows_per_expert_ = n;
    // The first kernel after a stream waits on the other (side_begin on the side stream, side_join on the main one)
    // is launched with PDL like every other; Pdl.JoinedStreamWaitsForBoth checks that the event wait still orders it
    // after the other stream's work. It does not start before its own stream's previous kernel ends, though, eagerly
    // or in a graph (that test's PDLJOIN lines, H200: 1.3-2.8 us after it): hence the flag join below.
    // DSERVE_PDL_JOIN_FENCE=1 makes it a plain launch (pdl_fence; the default until session 30, which measured FP8
    // batch 1 1.74-1.75 ms without the fence vs 1.78-1.79 with it, batch 8 and bf16 the same).
    join_fence_ = env_flag("DSERVE_PDL_JOIN_FENCE", false);
    // The shared expert's output reaches the norm that sums the MoE output through a flag instead of an event join
    // (combine(), kernels::launch_moe_addend_signal), so that norm starts during the down walk instead of after it.
    // H200, session 45 (bench-one-batch, two rounds each, tok/s): bf16 batch 1 +1.0-1.6%, batch 8 +0.1-0.8%, batch 32
    // -0.9-1.0%; FP8 batch 1 -1.7-2.1%, batch 8 -0.9-1.2%, batch 32 -0.8-0%. So by default (=2) where the MoE input is
    // not FP8-quantized and at most DSERVE_SIDE_FLAG_JOIN_MAX_TOKENS tokens (default 8, at most 64); =1 everywhere up
    // to that bound, =0 never.
    flag_join_ = static_cast<int>(env_int("DSERVE_SIDE_FLAG_JOIN", 2));
    flag_join_max_tokens_ =
        std::clamp<int64_t>(env_int("DSERVE_SIDE_FLAG_JOIN_MAX_TOKENS", 8), int64_t{1}, kFlagJoinMaxTokens);
    side_ready_ = empty({2 * kReadySlots}, DType::kI32);
    DS_CUDA_CHECK(cudaMemsetAsync(side_ready_.data(), 0, side_ready_.nbytes(), stream()));
    arrivals_ = empty({kGreedyMaxRows}, DType::kI32);  // the greedy launch's per-row counters
    DS_CUDA_CHECK(cudaMemsetAsync(arrivals_.data(), 0, arrivals_.nbytes(), stream()));
    // DSERVE_SMALL_M_GEMM=0 sends every bf16 GEMM to cuBLASLt (A/B runs); =N caps the small-M kernels' M.
    small_m_max_ = env_int("DSERVE_SMALL_M_GEMM", small_m_max_);
  }

  Device device() const override { return Device::kCuda; }
  void bind_thread() override { bind_cuda_device(device_); }
  DType activation_dtype() const override { return DType::kBF16; }

  // ---- weights ----
  Tensor prepare_param(const Tensor& host) override {
    if (host.dtype() == DType::kF32) return host.device() == Device::kCuda ? host : cuda_upload(host);
    return to_bf16(host, nullptr, 128, 128);
  }
  LinearWeight prepare_linear(const LinearWeight& host) override {
    if (fp8_ && host.is_block_fp8() && host.block_n == 128 && host.block_k == 128) return fp8_->prepare(host);
    return prepare_linear_bf16(host);
  }
  LinearWeight prepare_linear_bf16(const LinearWeight& host) {
    LinearWeight w;
    w.weight = to_bf16(host.weight, host.is_block_fp8() ? &host.scale_inv : nullptr, host.block_n, host.block_k);
    return w;
  }
  PreparedMlp prepare_mlp(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down) override {
    DS_CHECK(gate.out_features() == up.out_features() && gate.in_features() == up.in_features(), "gate ",
             gate.weight.describe(), " vs up ", up.weight.describe());
    // Native FP8: [gate; up] and down stay e4m3 (the CPU decides with the same predicate).
    if (fp8_ && fp8_mlp_is_native(gate, up, down)) {
      Fp8Mlp m = stack_mlp_fp8(gate, up, down);
      return {fp8_->prepare(m.gate_up), fp8_->prepare(m.down)};
    }
    Tensor g = prepare_linear_bf16(gate).weight, u = prepare_linear_bf16(up).weight;
    Tensor gu = empty({2 * gate.out_features(), gate.in_features()}, DType::kBF16);
    DS_CUDA_CHECK(cudaMemcpyAsync(gu.data(), g.data(), g.nbytes(), cudaMemcpyDeviceToDevice, cuda_stream()));
    DS_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(gu.data()) + g.nbytes(), u.data(), u.nbytes(),
                                  cudaMemcpyDeviceToDevice, cuda_stream()));
    PreparedMlp m;
    m.gate_up.weight = gu;
    m.down = prepare_linear_bf16(down);
    return m;
  }
  void prepare_absorbed(const LinearWeight& kv_b, int heads, int64_t nope, int64_t v, Tensor* w_kc,
                        Tensor* w_vc) override {
    Tensor w = prepare_linear_bf16(kv_b).weight;  // [H * (nope + v), lora] bf16
    const int64_t lora = w.dim(1);
    DS_CHECK(w.dim(0) == heads * (nope + v), "kv_b_proj rows ", w.dim(0));
    *w_kc = empty({heads, nope, lora}, DType::kBF16);
    *w_vc = empty({heads, lora, v}, DType::kBF16);
    DS_CUDA_CHECK(kernels::launch_absorb_split({w.data(), w_kc->data(), w_vc->data(), heads, nope, v, lora}, stream()));
  }
  bool prepare_absorbed_fp8(const LinearWeight& kv_b, int heads, int64_t nope, int64_t v, HeadsFp8* w_kc,
                            HeadsFp8* w_vc) override {
    // Opt-in (DSERVE_FP8_BMM=1): slower than the bf16 batched GEMM at every measured shape (BENCHMARKS.md, FP8
    // absorbed products): w_kc's K of 128 is one K block, which leaves all but one warp of the small-M kernel idle.
    if (!fp8_ || !fp8_bmm_opted_in()) return false;
    HeadsFp8 kc, vc;
    if (!split_absorbed_fp8(kv_b, heads, nope, v, &kc, &vc)) return false;
    for (HeadsFp8* h : {&kc, &vc}) {
      h->w = cuda_upload(h->w);
      h->scale = cuda_upload(h->scale);
    }
    *w_kc = std::move(kc);
    *w_vc = std::move(vc);
    return true;
  }

  // ---- memory ----
  Tensor empty(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype, Device::kCuda); }
  Tensor upload(const Tensor& host) override { return host.device() == Device::kCuda ? host : cuda_upload(host); }
  Tensor to_host(const Tensor& t) override { return t.device() == Device::kCpu ? t : cuda_download(t); }
  void fill(Tensor& t, float value) override {
    check_cuda(t, "fill");
    if (t.dtype() == DType::kF32)
      DS_CUDA_CHECK(kernels::launch_fill_f32(t.data(), t.numel(), value, stream()));
    else if (t.dtype() == DType::kBF16)
      DS_CUDA_CHECK(kernels::launch_fill_bf16(t.data(), t.numel(), value, stream()));
    else
      DS_CHECK(false, "fill of ", t.describe());
  }

  void zero_(Tensor& t) override {
    check_cuda(t, "zero_");
    DS_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), stream()));
  }
  void copy_(Tensor& dst, const Tensor& src) override {
    check_cuda(dst, "copy_ destination");
    check_cuda(src, "copy_ source");
    DS_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "copy_ of ", src.describe(), " into ",
             dst.describe());
    DS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
  }
  // Native FP8 weights live in Fp8Gemm's registry with their padded copy and scale layouts: all of them follow.
  Status update_prepared(LinearWeight& dst, const LinearWeight& src) override {
    if (fp8_ && (fp8_->owns(dst) || fp8_->owns(src))) return fp8_->update(dst, src, stream());
    return Ops::update_prepared(dst, src);
  }

  // ---- elementwise / norms ----
  Tensor embedding(const Tensor& table, const Tensor& ids) override {
    DS_CHECK_SHAPE(table, {-1, -1});
    check_cuda(table, "embedding table");
    const int64_t n = ids.numel(), d = table.dim(1);
    Tensor out = empty({n, d}, DType::kBF16);
    DS_CUDA_CHECK(kernels::launch_embedding(
        {table.data(), elem_type(table.dtype()), i32(ids, "embedding ids"), out.data(), n, table.dim(0), d}, stream()));
    return out;
  }
  Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) override { return norm(nullptr, x, w, eps, nullptr, false); }
  Tensor add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps) override {
    return norm(&residual, x, w, eps, nullptr, false);
  }
  // FP8 activations from the norm kernel (DSERVE_FP8_FUSED_NORM) for decode-sized batches, where the quant_act
  // launch each FP8 linear would make costs more than its bytes. Up to 8 rows: with the shared MLP forked after
  // the routing (which the norm's quantization brings), V2-Lite FP8 decode at batch 1 / 8 / 16 / 32 / 64 is -2.2 /
  // -3.0 / +1.5 / +0.1 / +0.5% against quant_act launches and the early fork (H200, session 29, BENCHMARKS.md).
  static constexpr int64_t kFusedNormMaxRows = 8;
  // Past those rows, where the consumer runs on the wgmma FP8 GEMM, which reads the producer's quantization (no
  // quant_act launch; 3 a V2-Lite layer, and the MoE layers take the norm's FP8 input too): V2-Lite FP8 decode batch
  // 48 / 64 5.84 / 6.02 vs 5.97 / 6.28 ms, the V3-shaped 3-layer model ties (H200, session 53, BENCHMARKS.md).
  // DSERVE_FP8_FUSED_NORM_WGMMA=0 turns it off. The caller checked fp8_ and that it owns consumer.
  bool wgmma_reads_xq(const LinearWeight& consumer, int64_t rows) const {
    return fused_norm_wgmma_ && fp8_->wgmma_takes(consumer, rows);
  }
  Tensor rms_norm_q(Tensor* residual, const Tensor& x, const Tensor& w, float eps, const LinearWeight& consumer,
                    Fp8Act* xq) override {
    return norm_q(residual, x, nullptr, w, eps, consumer, xq);
  }
  // An unreduced MoE output (moe_experts_open) is summed inside the norm's kernel.
  Tensor rms_norm_q_open(Tensor& residual, const MlpOut& x, const Tensor& w, float eps, const LinearWeight& consumer,
                         Fp8Act* xq) override {
    if (!x.parts) return rms_norm_q(&residual, x.value, w, eps, consumer, xq);
    const kernels::MoeCombineParams p = take_combine(x);
    return norm_q(&residual, Tensor(), &p, w, eps, consumer, xq);
  }
  Tensor reduce(const MlpOut& x) override {
    if (!x.parts) return Ops::reduce(x);
    kernels::MoeCombineParams p = take_combine(x);
    Tensor out = empty({p.tokens, p.dim}, DType::kBF16);
    p.out = out.data();
    DS_CUDA_CHECK(kernels::launch_moe_combine(p, stream()));
    return out;
  }
  // x, or (x undefined) the MoE sum `moe` (then with a residual).
  Tensor norm_q(Tensor* residual, const Tensor& x, const kernels::MoeCombineParams* moe, const Tensor& w, float eps,
                const LinearWeight& consumer, Fp8Act* xq) {
    *xq = Fp8Act{};
    const int64_t rows = moe ? moe->tokens : x.ndim() == 2 ? x.dim(0) : -1;
    const bool fuse = fused_norm_ && fp8_ && consumer.is_block_fp8() && fp8_->owns(consumer) && rows >= 0 &&
                      (rows <= kFusedNormMaxRows || wgmma_reads_xq(consumer, rows));
    return norm(residual, x, w, eps, fuse ? xq : nullptr, fuse && fp8_->ue8m0_of(consumer), moe);
  }
  Tensor norm(Tensor* residual, const Tensor& x, const Tensor& w, float eps, Fp8Act* xq, bool ue8m0,
              const kernels::MoeCombineParams* moe = nullptr) {
    if (residual) {
      DS_CHECK_SHAPE(*residual, {-1, w.dim(0)});
      check_dtype(*residual, DType::kBF16, "add_rms_norm residual");
      if (moe) {
        DS_CHECK(moe->tokens == residual->dim(0) && moe->dim == residual->dim(1), residual->describe(),
                 " += MoE output [", moe->tokens, ", ", moe->dim, "]");
      } else {
        DS_CHECK(x.numel() == residual->numel(), residual->describe(), " += ", x.describe());
        check_dtype(x, DType::kBF16, "add_rms_norm x");
      }
    } else {
      DS_CHECK(!moe, "rms_norm of an MoE output without a residual");
      DS_CHECK_SHAPE(x, {-1, w.dim(0)});
      check_dtype(x, DType::kBF16, "rms_norm x");
    }
    const Tensor& shape_of = residual ? *residual : x;
    Tensor out = empty({shape_of.dim(0), shape_of.dim(1)}, DType::kBF16);
    launch_rms(x, residual, w, out, eps, xq, ue8m0, moe);
    return out;
  }
  void linear_pair_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w1, const LinearWeight& w2, Tensor* y1,
                     Tensor* y2) override {
    // The fused small-M path runs the pair in one launch, from the norm's xq where made (no quant_act launch).
    if (fp8_ && fp8_->fused_pair()) return linear_pair_xq(x, w1, w2, y1, y2, &xq);
    Tensor a, b;
    const bool q1 = prequantized(xq, w1, &a), q2 = prequantized(xq, w2, &b);
    if (!q1 && !q2) return linear_pair(x, w1, w2, y1, y2);
    *y1 = q1 ? a : linear(x, w1);
    *y2 = q2 ? b : linear(x, w2);
  }
  Tensor linear_silu_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& gate_up) override {
    Tensor gu;
    // The fused small-M path (one launch: the GEMM applies the SiLU, on the norm's xq where made, else after a
    // quant_act launch or quantizing x itself) before the norm's xq through a plain GEMM and silu_mul (two).
    if (fp8_ && fp8_->fused_silu() && gate_up.is_block_fp8() && fp8_->owns(gate_up) &&
        fp8_->linear_silu(x, gate_up, &gu, xq.defined() ? &xq.q : nullptr, &xq.scales, xq.ue8m0))
      return gu;
    if (prequantized(xq, gate_up, &gu)) return silu_mul(gu);
    return linear_silu(x, gate_up);
  }
  Tensor linear_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w) override {
    Tensor y;
    return prequantized(xq, w, &y) ? y : linear(x, w);
  }
  Tensor linear_partial_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w) override {
    Tensor y;
    return prequantized(xq, w, &y) ? y : linear_partial(x, w);
  }
  // DSERVE_FP8_SILU_QUANT=1 (opt-in, written in session 54 without device time): where the down runs on the wgmma
  // GEMM at these rows (33-64 tokens) and reads a producer's quantization, the SiLU-mul after the gate|up GEMM is
  // quant_act's SiLU mode: silu_mul's bf16 output and the down's FP8 input in one launch instead of two (silu_mul,
  // then the down's quant_act). The same bits either way. Elsewhere linear_silu_q as it is.
  Tensor linear_silu_q_for(const Tensor& x, const Fp8Act& xq, const LinearWeight& gate_up,
                           const LinearWeight& consumer, Fp8Act* hq) override {
    *hq = Fp8Act{};
    const int64_t rows = x.ndim() == 2 ? x.dim(0) : -1;
    Tensor gu;  // [T, 2 * inter]
    // gate_up on the wgmma GEMM too: linear_silu_q's small-M fused SiLU (one fp32 rounding) is not taken there.
    if (!silu_quant_ || !fp8_ || !consumer.is_block_fp8() || !fp8_->owns(consumer) || !gate_up.is_block_fp8() ||
        !fp8_->owns(gate_up) || rows < 1 || !wgmma_reads_xq(consumer, rows) || !wgmma_reads_xq(gate_up, rows) ||
        !prequantized(xq, gate_up, &gu))
      return linear_silu_q(x, xq, gate_up);
    return silu_mul_quant(gu, fp8_->ue8m0_of(consumer), hq);
  }
  // silu_mul(gate_up) and, where quant_act's SiLU mode takes it, its token-major FP8 quantization into *hq.
  Tensor silu_mul_quant(const Tensor& gate_up, bool ue8m0, Fp8Act* hq) {
    check_dtype(gate_up, DType::kBF16, "silu_mul_quant");
    const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
    // The layout checked before anything is allocated (the outputs are fresh, so aligned).
    kernels::Fp8QuantParams p = kernels::fp8_silu_quant_params(gate_up.data(), gate_up.dim(1), rows, inter, nullptr,
                                                               nullptr, ue8m0, nullptr);
    if (gate_up.dim(1) != 2 * inter || !kernels::fp8_quant_act_silu_supported(p)) return silu_mul(gate_up);
    Tensor out = empty({rows, inter}, DType::kBF16);                                               // [T, inter]
    Tensor q = empty({rows, inter}, DType::kF8E4M3), s = empty({rows, inter / 128}, DType::kF32);  // token-major
    p.q = q.data_as<uint8_t>();
    p.s = s.data_as<float>();
    p.silu_out = out.data();
    DS_CUDA_CHECK(kernels::launch_fp8_quant_act(p, stream()));
    *hq = Fp8Act{q, s, ue8m0};
    return out;
  }
  // *y = linear(x, w) from x's quantization xq, where made for w's scales and w takes the small-M kernel at x's rows.
  bool prequantized(const Fp8Act& xq, const LinearWeight& w, Tensor* y) {
    return xq.defined() && fp8_ && w.is_block_fp8() && fp8_->owns(w) &&
           fp8_->linear_quantized_small_m(xq.q, xq.scales, xq.ue8m0, w, y);
  }
  Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) override {
    DS_CHECK_SHAPE(x, {-1, w.dim(0)});
    check_dtype(x, DType::kBF16, "layer_norm x");
    DS_CHECK(w.dtype() == b.dtype() && (w.dtype() == DType::kBF16 || w.dtype() == DType::kF32), "layer_norm params ",
             w.describe(), " ", b.describe());
    Tensor out = empty({x.dim(0), x.dim(1)}, DType::kBF16);
    DS_CUDA_CHECK(kernels::launch_layer_norm(
        {x.data(), w.data(), b.data(), elem_type(w.dtype()), out.data(), x.dim(0), x.dim(1), eps}, stream()));
    return out;
  }
  void add_(Tensor& acc, const Tensor& x) override {
    const bool mixed = acc.dtype() == DType::kBF16 && x.dtype() == DType::kF32;  // linear_partial's fp32 product
    DS_CHECK(acc.numel() == x.numel() && (acc.dtype() == x.dtype() || mixed) &&
                 (acc.dtype() == DType::kBF16 || acc.dtype() == DType::kF32),
             acc.describe(), " += ", x.describe());
    check_cuda(acc, "add_ acc");
    check_cuda(x, "add_ x");
    if (mixed) {
      DS_CUDA_CHECK(kernels::launch_add_f32_to_bf16(acc.data(), x.data_as<float>(), acc.numel(), stream()));
      return;
    }
    DS_CUDA_CHECK(kernels::launch_add_inplace(acc.data(), x.data(), elem_type(acc.dtype()), acc.numel(), stream()));
  }
  Tensor silu_mul(const Tensor& gate_up) override {
    check_dtype(gate_up, DType::kBF16, "silu_mul");
    const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
    DS_CHECK(gate_up.ndim() == 2 && gate_up.dim(1) == 2 * inter, "silu_mul of ", gate_up.describe());
    Tensor out = empty({rows, inter}, DType::kBF16);
    DS_CUDA_CHECK(kernels::launch_silu_mul(gate_up.data(), out.data(), rows, inter, stream()));
    return out;
  }
  Tensor concat_cols(const Tensor& a, const Tensor& b) override {
    DS_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.dim(0) == b.dim(0) && a.dtype() == b.dtype(), a.describe(), " | ",
             b.describe());
    check_cuda(a, "concat_cols a");
    check_cuda(b, "concat_cols b");
    const int64_t rows = a.dim(0), n = a.dim(1), m = b.dim(1);
    Tensor out = empty({rows, n + m}, a.dtype());
    const int eb = static_cast<int>(dtype_size(a.dtype()));
    DS_CUDA_CHECK(kernels::launch_copy_cols({a.data(), out.data(), rows, n, n, n + m, 0, 0, eb}, stream()));
    DS_CUDA_CHECK(kernels::launch_copy_cols({b.data(), out.data(), rows, m, m, n + m, 0, n, eb}, stream()));
    return out;
  }
  Tensor slice_cols(const Tensor& x, int64_t begin, int64_t end) override {
    DS_CHECK(x.ndim() == 2 && 0 <= begin && begin <= end && end <= x.dim(1), "slice_cols ", begin, ":", end, " of ",
             x.describe());
    check_cuda(x, "slice_cols");
    const int64_t rows = x.dim(0), w = end - begin;
    Tensor out = empty({rows, w}, x.dtype());
    DS_CUDA_CHECK(kernels::launch_copy_cols(
        {x.data(), out.data(), rows, w, x.dim(1), w, begin, 0, static_cast<int>(dtype_size(x.dtype()))}, stream()));
    return out;
  }
  Tensor select_rows(const Tensor& x, const std::vector<int64_t>& rows) override {
    check_cuda(x, "select_rows");
    DS_CHECK(x.ndim() >= 1, "select_rows of ", x.describe());
    Shape shape = x.shape();
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor out = empty(shape, x.dtype());
    const size_t row_bytes = x.dim(0) ? x.nbytes() / x.dim(0) : 0;
    // One device copy per run of consecutive rows (no index upload; capturable).
    for (size_t i = 0; i < rows.size();) {
      DS_CHECK(rows[i] >= 0 && rows[i] < x.dim(0), "row ", rows[i], " of ", x.describe());
      size_t j = i + 1;
      while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
      DS_CHECK(rows[j - 1] < x.dim(0), "row ", rows[j - 1], " of ", x.describe());
      DS_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out.data()) + i * row_bytes,
                                    static_cast<const char*>(x.data()) + rows[i] * row_bytes, (j - i) * row_bytes,
                                    cudaMemcpyDeviceToDevice, stream()));
      i = j;
    }
    return out;
  }

  // ---- matmuls ----
  Tensor linear(const Tensor& x, const LinearWeight& w) override {
    if (fp8_ && w.is_block_fp8() && fp8_->owns(w)) {
      check_dtype(x, DType::kBF16, "fp8 linear x");
      return fp8_->linear(x, w);
    }
    DS_CHECK(!w.is_block_fp8(), "cuda linear expects a prepared (bf16) weight");
    DS_CHECK(x.ndim() == 2 && w.weight.ndim() == 2 && x.dim(1) == w.weight.dim(1), "linear ", x.describe(), " x ",
             w.weight.describe());
    check_dtype(x, DType::kBF16, "linear x");
    check_dtype(w.weight, DType::kBF16, "linear weight");
    Tensor out = empty({x.dim(0), w.weight.dim(0)}, DType::kBF16);
    gemm_nk(x, w.weight, out);
    return out;
  }
  Tensor linear_silu(const Tensor& x, const LinearWeight& gate_up) override {
    if (fp8_ && gate_up.is_block_fp8() && fp8_->owns(gate_up)) {
      Tensor y;  // [T, I]
      if (fp8_->linear_silu(x, gate_up, &y)) return y;
    }
    if (!gate_up.is_block_fp8() && x.ndim() == 2 && gate_up.weight.ndim() == 2 && gate_up.weight.dim(0) % 2 == 0) {
      check_cuda(x, "linear_silu x");
      Tensor out = empty({x.dim(0), gate_up.weight.dim(0) / 2}, DType::kBF16);  // [T, I]
      if (small_m_fused(x, gate_up.weight, out.dim(1), out, /*silu=*/true, /*accumulate=*/false)) return out;
    }
    return Ops::linear_silu(x, gate_up);
  }
  void linear_add_(Tensor& acc, const Tensor& x, const LinearWeight& w) override {
    if (!w.is_block_fp8() && acc.defined() && acc.ndim() == 2) {
      check_cuda(acc, "linear_add_ acc");
      check_cuda(x, "linear_add_ x");
      if (small_m_fused(x, w.weight, acc.dim(1), acc, /*silu=*/false, /*accumulate=*/true)) return;
    }
    Ops::linear_add_(acc, x, w);
  }
  Tensor linear_partial(const Tensor& x, const LinearWeight& w) override {
    // Decode sizes: the small-M kernel's fp32 product, so the later add_ rounds once, exactly as linear_add_'s
    // fused accumulate does (the CPU-vs-CUDA greedy fixtures notice a second rounding).
    if (!w.is_block_fp8() && x.defined() && x.ndim() == 2 && w.weight.ndim() == 2) {
      check_cuda(x, "linear_partial x");
      Tensor d = empty({x.dim(0), w.weight.dim(0)}, DType::kF32);
      if (small_m_fused(x, w.weight, w.weight.dim(0), d, /*silu=*/false, /*accumulate=*/false)) return d;
    }
    return linear(x, w);
  }
  void side_begin() override {
    DS_CHECK(side_state_ == 0, "side_begin inside a side section");
    side_state_ = 1;
    if (!side_stream_enabled()) return;
    ensure_side_events();
    DS_CUDA_CHECK(cudaEventRecord(side_fork_, cuda_main_stream()));
    DS_CUDA_CHECK(cudaStreamWaitEvent(cuda_side_stream(), side_fork_, 0));
    if (join_fence_) kernels::pdl_fence(cuda_side_stream());
    set_current_cuda_stream(cuda_side_stream());
  }
  void side_end() override {
    DS_CHECK(side_state_ == 1, "side_end without side_begin");
    side_state_ = 2;
    if (!side_stream_enabled()) return;
    DS_CUDA_CHECK(cudaEventRecord(side_done_, cuda_side_stream()));
    set_current_cuda_stream(nullptr);
  }
  void side_join() override {
    DS_CHECK(side_state_ == 2, "side_join without side_end");
    side_state_ = 0;
    side_unjoined_ = false;  // side_done_ follows every earlier side kernel too
    if (side_stream_enabled()) main_waits_for_side_done();
  }
  // After flag joins (combine()) the side stream's last kernels have no edge to the main stream: one event join here
  // (a graph capture must end joined). Its cost falls on the next main launch only.
  void side_flush() override {
    DS_CHECK(side_state_ == 0, "side_flush inside a side section");
    if (!side_unjoined_) return;
    side_unjoined_ = false;
    if (!side_stream_enabled()) return;
    DS_CUDA_CHECK(cudaEventRecord(side_done_, cuda_side_stream()));
    main_waits_for_side_done();
  }
  void linear_pair(const Tensor& x, const LinearWeight& w1, const LinearWeight& w2, Tensor* y1, Tensor* y2) override {
    linear_pair_xq(x, w1, w2, y1, y2, nullptr);
  }
  // linear_pair, the FP8 pair reading x's quantization xq where given and made for both weights.
  void linear_pair_xq(const Tensor& x, const LinearWeight& w1, const LinearWeight& w2, Tensor* y1, Tensor* y2,
                      const Fp8Act* xq) {
    kernels::GemmSmallMParams a, b;
    Tensor d1, d2;
    if (x.defined() && x.device() == Device::kCuda && small_m_params(x, w1, d1, &a) && small_m_params(x, w2, d2, &b)) {
      DS_CUDA_CHECK(kernels::launch_gemm_small_m_pair(a, b, stream()));
      *y1 = d1;
      *y2 = d2;
      return;
    }
    // FP8 decode: one activation quantization for both (saves a launch per layer).
    const bool made = xq && xq->defined();
    if (fp8_ && w1.is_block_fp8() && w2.is_block_fp8() && fp8_->owns(w1) && fp8_->owns(w2) &&
        x.dtype() == DType::kBF16 &&
        fp8_->linear_pair(x, w1, w2, y1, y2, made ? &xq->q : nullptr, made ? &xq->scales : nullptr, made && xq->ue8m0))
      return;
    Ops::linear_pair(x, w1, w2, y1, y2);
  }
  Tensor linear_f32(const Tensor& x, const Tensor& w) override {
    DS_CHECK(x.ndim() == 2 && w.ndim() == 2, "linear ", x.describe(), " x ", w.describe());
    Tensor out = empty({x.dim(0), w.dim(0)}, DType::kF32);
    linear_f32_into(x, w, out);
    return out;
  }
  void linear_f32_into(const Tensor& x, const Tensor& w, Tensor& out) override {
    DS_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1), "linear ", x.describe(), " x ", w.describe());
    check_cuda(x, "linear_f32 x");
    check_cuda(w, "linear_f32 w");
    check_cuda(out, "linear_f32 out");
    DS_CHECK(out.dtype() == DType::kF32 && out.ndim() == 2 && out.dim(0) == x.dim(0) && out.dim(1) == w.dim(0),
             "linear_f32 output ", out.describe(), " for ", x.describe(), " x ", w.describe());
    if (w.dtype() == DType::kBF16 && x.dtype() == DType::kBF16) {
      if (gemm_m64(x, w, out)) return;
      gemm_nk(x, w, out);  // bf16 products are exact in fp32; fp32 accumulation and output
    } else {
      DS_CHECK(w.dtype() == DType::kF32, "linear_f32 weight ", w.describe());
      gemm_nk(as_f32(x), w, out);
    }
  }
  // 17-64 rows (past the small-M kernel's) against a weight of at most 8 MB (the MoE router at batch 17-64 decode) on
  // kernels::launch_gemm_m64
  // instead of cuBLASLt, whose call took ~5 us in the batch-64 chain (session 53's trace). Default since session 56
  // (H200, V2-Lite FP8, three rounds alternating: batch 24 / 48 / 64 -1.2 / -1.2 / -1.4%; the V3-shaped 3-layer
  // model ties); DSERVE_GEMM_M64=0 (read per call): cuBLASLt. False where it does not take the shapes.
  bool gemm_m64(const Tensor& x, const Tensor& w, Tensor& out) {
    const int64_t M = x.dim(0);
    if (M > kernels::kGemmSmallMMax && M <= kernels::kGemmM64Max && w.numel() * 2 <= (int64_t{8} << 20) &&
        env_flag("DSERVE_GEMM_M64", true)) {
      kernels::GemmM64Params p;
      p.x = x.data();
      p.ldx = x.dim(1);
      p.w = w.data();
      p.ldw = w.dim(1);
      p.d = out.data_as<float>();
      p.ldd = out.dim(1);
      p.M = M;
      p.N = w.dim(0);
      p.K = x.dim(1);
      if (kernels::gemm_m64_supported(p)) {
        DS_CUDA_CHECK(kernels::launch_gemm_m64(p, stream()));
        return true;
      }
    }
    return false;
  }
  Tensor bmm_heads(const Tensor& x, const Tensor& w) override {
    DS_CHECK(x.ndim() == 3 && w.ndim() == 3 && x.dim(1) == w.dim(0) && x.dim(2) == w.dim(1) && x.dtype() == w.dtype() &&
                 (x.dtype() == DType::kBF16 || x.dtype() == DType::kF32),
             "bmm_heads ", x.describe(), " x ", w.describe());
    check_cuda(x, "bmm_heads x");
    check_cuda(w, "bmm_heads w");
    const int64_t T = x.dim(0), H = x.dim(1), K = x.dim(2), N = w.dim(2);
    Tensor out = empty({T, H, N}, x.dtype());
    GemmArgs g;
    g.x = x.data();
    g.ldx = H * K;
    g.w = w.data();
    g.ldw = N;
    g.w_nk = false;
    g.d = out.data();
    g.ldd = H * N;
    g.in_type = g.out_type = x.dtype();
    g.M = T;
    g.N = N;
    g.K = K;
    g.batch = static_cast<int>(H);
    g.stride_x = K;
    g.stride_w = K * N;
    g.stride_d = N;
    run_gemm(g);
    return out;
  }

  Tensor bmm_heads_fp8(const Tensor& x, const HeadsFp8& w) override {
    DS_CHECK(x.ndim() == 3 && x.dim(1) == w.heads() && x.dim(2) == w.in_features(), "bmm_heads_fp8 ", x.describe(),
             " x ", w.w.describe());
    check_dtype(x, DType::kBF16, "bmm_heads_fp8 x");
    const int64_t T = x.dim(0), H = x.dim(1), K = x.dim(2), N = w.out_features();
    Tensor out = empty({T, H, N}, DType::kBF16);
    heads_fp8_product(x.data(), T, K, w, out.data(), H * N, N);
    return out;
  }

  // ---- rotary ----
  void rope_(Tensor& x, int64_t off, int64_t dim, const Tensor& positions, const Tensor& inv_freq, float attn_factor,
             RopeStyle style) override {
    DS_CHECK(x.ndim() == 3 && off + dim <= x.dim(2) && inv_freq.numel() == dim / 2 && positions.numel() == x.dim(0),
             "rope on ", x.describe());
    check_dtype(x, DType::kBF16, "rope x");
    check_dtype(inv_freq, DType::kF32, "rope inv_freq");
    DS_CUDA_CHECK(kernels::launch_rope({x.data(), i32(positions, "rope positions"), inv_freq.data_as<float>(), x.dim(0),
                                        x.dim(1), x.dim(2), off, dim, attn_factor, style == RopeStyle::kInterleaved},
                                       stream()));
  }

  // ---- absorbed-MLA helpers (ops.h): one kernel each instead of the default slice/norm/rope/concat chain ----
  void mla_store_latent(const Tensor& kv_a, const Tensor& norm_w, float eps, const Tensor& positions,
                        const Tensor& inv_freq, float attn_factor, Tensor& cache, const Tensor& slot_mapping,
                        KvCacheDtype dtype) override {
    DS_CUDA_CHECK(kernels::launch_mla_store_latent(
        store_latent_params(kv_a, norm_w, eps, positions, inv_freq, attn_factor, cache, slot_mapping, dtype), stream()));
  }
  kernels::MlaStoreLatentParams store_latent_params(const Tensor& kv_a, const Tensor& norm_w, float eps,
                                                    const Tensor& positions, const Tensor& inv_freq, float attn_factor,
                                                    Tensor& cache, const Tensor& slot_mapping, KvCacheDtype dtype) {
    const int64_t lora = norm_w.dim(0);
    const int format = latent_format(cache, dtype);
    DS_CHECK(kv_a.ndim() == 2 && kv_a.dim(1) > lora && cache.ndim() == 2 &&
                 cache.dim(1) * static_cast<int64_t>(dtype_size(cache.dtype())) ==
                     kernels::kv_row_layout(format, lora, kv_a.dim(1) - lora).row_bytes &&
                 positions.numel() == kv_a.dim(0) && slot_mapping.numel() == kv_a.dim(0) &&
                 inv_freq.numel() == (kv_a.dim(1) - lora) / 2,
             "mla_store_latent ", kv_a.describe(), " norm ", norm_w.describe(), " into ", cache.describe());
    check_dtype(kv_a, DType::kBF16, "mla_store_latent kv_a");
    check_cuda(cache, "mla_store_latent cache");
    check_dtype(inv_freq, DType::kF32, "mla_store_latent inv_freq");
    DS_CHECK(norm_w.dtype() == DType::kBF16 || norm_w.dtype() == DType::kF32, "mla_store_latent norm ", norm_w.describe());
    kernels::MlaStoreLatentParams p;
    p.kv_a = kv_a.data();
    p.ld_kv = kv_a.dim(1);
    p.w = norm_w.data();
    p.w_f32 = norm_w.dtype() == DType::kF32;
    p.positions = i32(positions, "mla_store_latent positions");
    p.inv_freq = inv_freq.data_as<float>();
    p.attn_factor = attn_factor;
    p.eps = eps;
    p.cache = cache.data();
    p.slot_mapping = i32(slot_mapping, "slot_mapping");
    p.tokens = kv_a.dim(0);
    p.num_slots = cache.dim(0);
    p.lora = lora;
    p.rope = kv_a.dim(1) - lora;
    p.format = format;
    return p;
  }
  // Decode sizes with bf16 w_kc: the store, the product and the rope in one launch (kernels::launch_mla_absorb_prep);
  // otherwise the default (store on the side stream beside the product).
  Tensor mla_store_absorb_q(const Tensor& kv_a, const Tensor& norm_w, float eps, Tensor& cache,
                            const Tensor& slot_mapping, KvCacheDtype dtype, const Tensor& q, const Tensor& w_kc,
                            const Tensor& positions, const Tensor& inv_freq, float attn_factor) override {
    static const bool off = !env_flag("DSERVE_MLA_PREP", true);
    const bool fits = !off && q.ndim() == 3 && w_kc.ndim() == 3 && q.dtype() == DType::kBF16 &&
                      w_kc.dtype() == DType::kBF16 && q.dim(0) <= kernels::kMlaPrepMaxTokens &&
                      w_kc.dim(0) == q.dim(1) && w_kc.dim(1) <= kernels::kMlaPrepMaxNope && w_kc.dim(1) < q.dim(2) &&
                      w_kc.dim(2) % 8 == 0 && (reinterpret_cast<uintptr_t>(w_kc.data()) & 15) == 0 && kv_a.ndim() == 2 && kv_a.dim(0) == q.dim(0) &&
                      positions.numel() == q.dim(0) && inv_freq.numel() == (q.dim(2) - w_kc.dim(1)) / 2;
    if (!fits)
      return Ops::mla_store_absorb_q(kv_a, norm_w, eps, cache, slot_mapping, dtype, q, w_kc, positions, inv_freq,
                                     attn_factor);
    check_cuda(q, "mla_store_absorb_q q");
    check_cuda(w_kc, "mla_store_absorb_q w_kc");
    check_dtype(inv_freq, DType::kF32, "mla_store_absorb_q inv_freq");
    const int64_t T = q.dim(0), H = q.dim(1), dqk = q.dim(2), nope = w_kc.dim(1), lora = w_kc.dim(2);
    const int64_t rope = dqk - nope;
    Tensor out = empty({T, H, lora + rope}, DType::kBF16);
    kernels::MlaAbsorbPrepParams p;
    p.store = store_latent_params(kv_a, norm_w, eps, positions, inv_freq, attn_factor, cache, slot_mapping, dtype);
    p.w_kc = w_kc.data();
    p.nope = nope;
    p.lora = lora;
    p.rope = rope_copy_params(q, nope, out, lora, positions, inv_freq, attn_factor);
    if (T > 0) DS_CUDA_CHECK(kernels::launch_mla_absorb_prep(p, stream()));
    return out;
  }
  Tensor mla_absorb_q(const Tensor& q, const Tensor& w_kc, const Tensor& positions, const Tensor& inv_freq,
                      float attn_factor) override {
    DS_CHECK(q.ndim() == 3 && w_kc.ndim() == 3 && w_kc.dim(0) == q.dim(1) && w_kc.dim(1) < q.dim(2) &&
                 positions.numel() == q.dim(0) && inv_freq.numel() == (q.dim(2) - w_kc.dim(1)) / 2,
             "mla_absorb_q ", q.describe(), " x ", w_kc.describe());
    check_dtype(q, DType::kBF16, "mla_absorb_q q");
    check_dtype(w_kc, DType::kBF16, "mla_absorb_q w_kc");
    check_dtype(inv_freq, DType::kF32, "mla_absorb_q inv_freq");
    const int64_t T = q.dim(0), H = q.dim(1), dqk = q.dim(2), nope = w_kc.dim(1), lora = w_kc.dim(2);
    const int64_t rope = dqk - nope, dout = lora + rope;
    Tensor out = empty({T, H, dout}, DType::kBF16);
    if (T == 0) return out;
    // q_nope read in place (row stride H * dqk, head stride dqk); q_lat written into the first lora columns.
    GemmArgs g;
    g.x = q.data();
    g.ldx = H * dqk;
    g.w = w_kc.data();
    g.ldw = lora;
    g.w_nk = false;
    g.d = out.data();
    g.ldd = H * dout;
    g.in_type = g.out_type = DType::kBF16;
    g.M = T;
    g.N = lora;
    g.K = nope;
    g.batch = static_cast<int>(H);
    g.stride_x = dqk;
    g.stride_w = nope * lora;
    g.stride_d = dout;
    run_gemm(g);
    absorbed_rope_copy(q, nope, out, lora, positions, inv_freq, attn_factor);
    return out;
  }
  Tensor mla_absorb_q_fp8(const Tensor& q, const HeadsFp8& w_kc, const Tensor& positions, const Tensor& inv_freq,
                          float attn_factor) override {
    const int64_t nope = w_kc.in_features(), lora = w_kc.out_features();
    DS_CHECK(q.ndim() == 3 && w_kc.heads() == q.dim(1) && nope < q.dim(2) && positions.numel() == q.dim(0) &&
                 inv_freq.numel() == (q.dim(2) - nope) / 2,
             "mla_absorb_q_fp8 ", q.describe(), " x ", w_kc.w.describe());
    check_dtype(q, DType::kBF16, "mla_absorb_q_fp8 q");
    check_dtype(inv_freq, DType::kF32, "mla_absorb_q_fp8 inv_freq");
    const int64_t T = q.dim(0), H = q.dim(1), dqk = q.dim(2), dout = lora + dqk - nope;
    Tensor out = empty({T, H, dout}, DType::kBF16);  // [T, H, lora + rope]
    if (T == 0) return out;
    // q_nope read in place (head stride dqk); q_lat written into the first lora columns of each head.
    heads_fp8_product(q.data(), T, dqk, w_kc, out.data(), H * dout, dout);
    absorbed_rope_copy(q, nope, out, lora, positions, inv_freq, attn_factor);
    return out;
  }
  // out[:, h, lora:] = rope(q[:, h, nope:]) (the absorbed query's rope part, copied rotated).
  void absorbed_rope_copy(const Tensor& q, int64_t nope, Tensor& out, int64_t lora, const Tensor& positions,
                          const Tensor& inv_freq, float attn_factor) {
    DS_CUDA_CHECK(kernels::launch_rope_copy(rope_copy_params(q, nope, out, lora, positions, inv_freq, attn_factor),
                                            stream()));
  }
  kernels::RopeCopyParams rope_copy_params(const Tensor& q, int64_t nope, Tensor& out, int64_t lora,
                                           const Tensor& positions, const Tensor& inv_freq, float attn_factor) {
    kernels::RopeCopyParams r;
    r.src = q.data();
    r.dst = out.data();
    r.positions = i32(positions, "mla_absorb_q positions");
    r.inv_freq = inv_freq.data_as<float>();
    r.attn_factor = attn_factor;
    r.tokens = q.dim(0);
    r.heads = q.dim(1);
    r.src_head_dim = q.dim(2);
    r.src_off = nope;
    r.dst_head_dim = out.dim(2);
    r.dst_off = lora;
    r.rope = q.dim(2) - nope;
    return r;
  }
  // The per-head W8A8 products: for token t and head h, x row (t H + h) at x + (t H + h) x_head_stride elements
  // (bf16, K = w's in_features) times w[h]^T into out + t ld_out + h out_head_stride (bf16, N values). One
  // quantization of every (token, head) row, then the batched small-M kernel over 64-token chunks.
  void heads_fp8_product(const void* x, int64_t T, int64_t x_head_stride, const HeadsFp8& w, void* out, int64_t ld_out,
                         int64_t out_head_stride) {
    const int64_t H = w.heads(), N = w.out_features(), K = w.in_features(), kb = K / 128;
    DS_CHECK(w.w.device() == Device::kCuda && w.w.dtype() == DType::kF8E4M3 && N % 128 == 0 && K % 128 == 0,
             "heads_fp8_product weight ", w.w.describe());
    if (T == 0) return;
    Tensor q8 = empty({T * H, K}, DType::kF8E4M3);
    Tensor sx = empty({T * H, kb}, DType::kF32);
    DS_CUDA_CHECK(kernels::launch_fp8_quant_act(
        kernels::fp8_quant_rows_params(x, false, x_head_stride, T * H, K, K, q8.data_as<uint8_t>(), sx.data_as<float>(),
                                       w.ue8m0),
        stream()));
    for (int64_t m0 = 0; m0 < T; m0 += kernels::kFp8SmallMMax) {
      kernels::Fp8GemmSmallMParams p;
      p.M = std::min<int64_t>(kernels::kFp8SmallMMax, T - m0);
      p.N = p.Np = N;
      p.Kp = K;
      p.q = q8.data_as<uint8_t>() + m0 * H * K;
      p.ldq = H * K;
      p.batch_q = K;
      p.sx = sx.data_as<float>() + m0 * H * kb;
      p.sx_ld = H * kb;
      p.batch_sx = kb;
      p.w = w.w.data_as<uint8_t>();
      p.batch_w = N * K;
      p.sw = w.scale.data_as<float>();
      p.batch_sw = (N / 128) * kb;
      p.d = static_cast<uint16_t*>(out) + m0 * ld_out;
      p.ldd = ld_out;
      p.batch_d = out_head_stride;
      p.batch = static_cast<int>(H);
      DS_CUDA_CHECK(kernels::launch_fp8_gemm_small_m(p, stream()));
    }
  }

  // ---- KV cache ----
  void store_rows(Tensor& cache, const Tensor& rows, const Tensor& slot_mapping) override {
    DS_CHECK(cache.ndim() == 2 && rows.ndim() == 2 && cache.dim(1) == rows.dim(1) && cache.dtype() == rows.dtype() &&
                 slot_mapping.numel() == rows.dim(0),
             "store_rows ", rows.describe(), " into ", cache.describe());
    check_cuda(cache, "store_rows cache");
    check_cuda(rows, "store_rows rows");
    DS_CUDA_CHECK(kernels::launch_store_rows({cache.data(), rows.data(), i32(slot_mapping, "slot_mapping"), rows.dim(0),
                                              cache.dim(0), static_cast<int64_t>(rows.nbytes() / std::max<int64_t>(rows.dim(0), 1))},
                                             stream()));
  }
  // Rows of gather_context's output, sum(seq_lens): host-known from the metadata builder, else read back (a sync).
  int64_t context_rows(const AttnMetadata& m) {
    if (m.total_context >= 0) return m.total_context;
    Tensor lens = cuda_download(m.seq_lens);
    int64_t total = 0;
    for (int s = 0; s < m.num_seqs; ++s) total += lens.data_as<int32_t>()[s];
    return total;
  }
  // FP8 KV dtypes: packed rows (kernels/kv_fp8.h) in the cache made by empty_latent_cache.
  Tensor empty_latent_cache(int64_t slots, int64_t nope, int64_t rope, KvCacheDtype dtype) override {
    if (dtype == KvCacheDtype::kAuto || dtype == KvCacheDtype::kBf16) return Ops::empty_latent_cache(slots, nope, rope, dtype);
    // Said at startup (the cache is made then) rather than at the first request.
    DS_CHECK(!fallback_attention_, "DSERVE_CUDA_ATTENTION=fallback reads bf16 latent caches only: unset it or use "
                                   "--kv-cache-dtype auto");
    const int format = dtype == KvCacheDtype::kFp8E4M3 ? kernels::kKvE4M3 : kernels::kKvE5M2;
    Tensor t = empty({slots, kernels::kv_row_layout(format, nope, rope).row_bytes},
                     format == kernels::kKvE4M3 ? DType::kF8E4M3 : DType::kF8E5M2);
    // 0xff bytes: NaN as e4m3, e5m2, fp32 scale and bf16 alike (an unwritten slot that is read shows up).
    DS_CUDA_CHECK(cudaMemsetAsync(t.data(), 0xff, t.nbytes(), stream()));
    return t;
  }
  void store_latent_rows(Tensor& cache, const Tensor& rows, const Tensor& slot_mapping, int64_t nope,
                         KvCacheDtype dtype) override {
    const int format = latent_format(cache, dtype);
    if (format == kernels::kKvBf16) return store_rows(cache, rows, slot_mapping);
    DS_CHECK(cache.ndim() == 2 && rows.ndim() == 2 && slot_mapping.numel() == rows.dim(0) && nope >= 0 &&
                 nope <= rows.dim(1) &&
                 cache.dim(1) == kernels::kv_row_layout(format, nope, rows.dim(1) - nope).row_bytes,
             "store_latent_rows ", rows.describe(), " into ", cache.describe());
    check_cuda(cache, "store_latent_rows cache");
    check_dtype(rows, DType::kBF16, "store_latent_rows rows");
    kernels::KvPackStoreParams p;
    p.rows = rows.data();
    p.cache = cache.data();
    p.slot_mapping = i32(slot_mapping, "slot_mapping");
    p.tokens = rows.dim(0);
    p.num_slots = cache.dim(0);
    p.nope = nope;
    p.rope = rows.dim(1) - nope;
    p.format = format;
    DS_CUDA_CHECK(kernels::launch_kv_pack_store(p, stream()));
  }
  Tensor gather_latent_context(const Tensor& cache, const AttnMetadata& m, int64_t nope, KvCacheDtype dtype) override {
    const int format = latent_format(cache, dtype);
    if (format == kernels::kKvBf16) return gather_context(cache, m);
    DS_CHECK(cache.ndim() == 2, "gather_latent_context of ", cache.describe());
    const int64_t rope = latent_rope(cache, format, nope);
    Tensor out = empty({context_rows(m), nope + rope}, DType::kBF16);
    kernels::GatherLatentParams p;
    p.cache = cache.data();
    p.out = out.data();
    p.seq_lens = i32(m.seq_lens, "seq_lens");
    p.block_table = i32(m.block_table, "block_table");
    p.num_seqs = m.num_seqs;
    p.max_seq_len = m.max_seq_len;
    p.page_size = m.page_size;
    p.max_pages = m.block_table.dim(1);
    p.nope = nope;
    p.rope = rope;
    p.format = format;
    DS_CUDA_CHECK(kernels::launch_gather_latent(p, stream()));
    return out;
  }
  Tensor gather_context(const Tensor& cache, const AttnMetadata& m) override {
    check_cuda(cache, "gather_context cache");
    DS_CHECK(cache.ndim() == 2, "gather_context of ", cache.describe());
    Tensor out = empty({context_rows(m), cache.dim(1)}, cache.dtype());
    DS_CUDA_CHECK(kernels::launch_gather_context(
        {cache.data(), out.data(), i32(m.seq_lens, "seq_lens"), i32(m.block_table, "block_table"), m.num_seqs,
         m.max_seq_len, m.page_size, m.block_table.dim(1), static_cast<int64_t>(cache.dim(1) * dtype_size(cache.dtype()))},
        stream()));
    return out;
  }

  // ---- attention (src/ops/cuda/attention.h) ----
  Tensor mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                           const AttnMetadata& m, float scale, const Tensor* topk, Tensor* lse) override {
    if (fallback_attention_)
      return cuda_mla_attention_mha_fallback(q, kv, ctx, rope_offset, m, scale, topk, stream(), lse);
    return cuda_mla_attention_mha(q, kv, ctx, rope_offset, m, scale, topk, stream(), lse);
  }
  void merge_attention_parts_(Tensor& o, Tensor& lse, const Tensor& o_part, const Tensor& lse_part) override {
    cuda_merge_attention_parts(o, lse, o_part, lse_part, stream());
  }
  Tensor mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m, float scale,
                                const Tensor* topk) override {
    if (fallback_attention_) return cuda_mla_attention_absorbed_fallback(q, cache, v_dim, m, scale, topk, stream());
    return cuda_mla_attention_absorbed(q, cache, v_dim, m, scale, topk, stream());
  }
  Tensor mla_attention_absorbed_v(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                  float scale, const Tensor* topk, const Tensor& w_vc) override {
    return absorbed_then_vc(q, cache, v_dim, m, scale, topk, w_vc, nullptr, false);
  }
  // The fused combine + W_UV kernel quantizes its output for an FP8 o_proj (no quant_act launch between them;
  // DSERVE_MLA_VC_QUANT=0: the launch as before), at the sizes where the norms do (kFusedNormMaxRows).
  Tensor mla_attention_absorbed_v_q(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                    float scale, const Tensor* topk, const Tensor& w_vc, const LinearWeight& consumer,
                                    Fp8Act* xq) override {
    *xq = Fp8Act{};
    const bool want = vc_quant_ && fp8_ && consumer.is_block_fp8() && fp8_->owns(consumer) && q.ndim() == 3 &&
                      (q.dim(0) <= kFusedNormMaxRows || wgmma_reads_xq(consumer, q.dim(0)));
    return absorbed_then_vc(q, cache, v_dim, m, scale, topk, w_vc, want ? xq : nullptr,
                            want && fp8_->ue8m0_of(consumer));
  }
  // Both: the attention with the W_UV product fused into its split combine where that applies (with xq, the
  // output's quantization too, where the kernel makes it), else followed by bmm_heads.
  Tensor absorbed_then_vc(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m, float scale,
                          const Tensor* topk, const Tensor& w_vc, Fp8Act* xq, bool xq_ue8m0) {
    if (fallback_attention_) return Ops::mla_attention_absorbed_v(q, cache, v_dim, m, scale, topk, w_vc);
    bool fused = false;
    Tensor o = cuda_mla_attention_absorbed_vc(q, cache, v_dim, m, scale, topk, w_vc, &fused, stream(), xq, xq_ue8m0);
    return fused ? o : bmm_heads(o, w_vc);  // [T, H, v]
  }

  // ---- V3.2 indexer ----
  Tensor indexer_topk(const Tensor& q, const Tensor& w, const Tensor& k_cache, const AttnMetadata& m, int topk,
                      float q_scale, float w_scale) override {
    const int64_t T = q.dim(0), Hi = q.dim(1), D = q.dim(2);
    DS_CHECK(q.ndim() == 3 && w.ndim() == 2 && w.dim(0) == T && w.dim(1) == Hi && k_cache.dim(1) == D, "indexer q ",
             q.describe(), " w ", w.describe(), " k ", k_cache.describe());
    DS_CHECK(topk >= 1 && topk <= kernels::kIndexerMaxTopk, "index_topk ", topk, " not supported (max ",
             kernels::kIndexerMaxTopk, ")");
    check_dtype(q, DType::kBF16, "indexer q");
    check_dtype(k_cache, DType::kBF16, "indexer k_cache");
    check_cuda(w, "indexer w");
    DS_CHECK(w.dtype() == DType::kBF16 || w.dtype() == DType::kF32, "indexer w ", w.describe());
    Tensor out = empty({T, topk}, DType::kI32);
    if (T == 0) return out;
    // Scratch rows as long as the block table's capacity: a CUDA graph replays this launch with any context up to
    // it (the batch's own max_seq_len sizes only the attention's split plan there).
    const int64_t cols = std::max<int64_t>(m.block_table.dim(1) * m.page_size, 1);
    DS_CHECK(cols >= m.max_seq_len && cols <= INT32_MAX, "indexer block table ", m.block_table.describe(),
             " for contexts up to ", m.max_seq_len);
    // Scores go through a scratch buffer of at most 256 MiB: tokens in chunks.
    // DSERVE_INDEXER_CHUNK_ROWS=n (tests, read per call) caps the rows a launch: chunk boundaries inside the
    // multi-token kernel's row groups.
    const int64_t cap = env_int("DSERVE_INDEXER_CHUNK_ROWS", 0);
    const int64_t chunk = std::clamp<int64_t>((int64_t{64} << 20) / cols, 1, cap > 0 ? std::min(cap, T) : T);
    Tensor scratch = empty({chunk, cols}, DType::kF32);
    // DSERVE_INDEXER_MMA=0 (A/B runs, read per call): scores on CUDA cores.
    const bool mma = env_flag("DSERVE_INDEXER_MMA", true);
    // DSERVE_INDEXER_MT=0 (A/B runs): prefill rows scored one token a block, as decode rows are.
    const bool multi_token = env_flag("DSERVE_INDEXER_MT", true);
    // DSERVE_INDEXER_WGMMA=0 (A/B runs): those prefill rows on mma.sync instead of wgmma (where wgmma applies: heads
    // <= 64 of dim 128; H100, session 62: V3.2 scores 8K x 8K 2,222 -> 2,000 us, 4 layers 32K prefill -1..2%).
    const bool wgmma = env_flag("DSERVE_INDEXER_WGMMA", true);
    // The wgmma scores' key tiles from a TMA producer warp where the pages are 64 positions (H100, session 65: scores
    // 8K x 8K 2,017 -> 1,188 us, V3.2 4 layers 32K prefill 0.615 -> 0.564 s); DSERVE_INDEXER_TMA=0 (A/B runs) every
    // thread's cp.async with a block barrier a tile.
    const bool tma = env_flag("DSERVE_INDEXER_TMA", true);
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
      kernels::IndexerParams p{};
      p.q = q.data();
      p.w = w.data();
      p.w_f32 = w.dtype() == DType::kF32;
      p.k_cache = k_cache.data();
      p.positions = i32(m.positions, "positions");
      p.q_starts = i32(m.q_starts, "q_starts");
      p.block_table = i32(m.block_table, "block_table");
      p.out = out.data_as<int32_t>();
      p.scores = scratch.data_as<float>();
      p.token_begin = t0;
      p.token_count = std::min(chunk, T - t0);
      p.heads = Hi;
      p.dim = D;
      p.max_pages = m.block_table.dim(1);
      p.num_seqs = m.num_seqs;
      p.page_size = m.page_size;
      p.max_q_len = m.max_q_len;
      p.multi_token = multi_token;
      p.wgmma = wgmma;
      p.tma = tma;
      p.k_slots = k_cache.dim(0);
      p.score_cols = static_cast<int>(cols);
      p.topk = topk;
      p.num_sms = kernels::device_sm_count();
      p.q_scale = q_scale;
      p.w_scale = w_scale;
      DS_CUDA_CHECK(kernels::launch_indexer_topk(p, mma, stream()));
    }
    return out;
  }

  // ---- MoE ----
  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, Tensor* topk_ids,
                 Tensor* topk_weights) override {
    check_dtype(logits, DType::kF32, "router logits");
    const int64_t T = logits.dim(0);
    const Tensor bias32 = router_bias_f32(bias, logits.dim(1));
    fused_ids_ = nullptr;  // these ids come without a grouping (see permute) unless the fused launch makes one
    const int W = r.width(), EG = r.grouped_experts();
    *topk_weights = empty({T, W}, DType::kF32);
    // Decode sizes: routing and the grouping by expert in one launch (the grouping rides behind the ids for the
    // moe_experts op given them, as moe_gate_route's does): one launch boundary fewer on the routed chain.
    // DSERVE_MOE_ROUTE_PERMUTE=0 (read per call): two launches. Past 16 tokens one CTA lost (session 56, a 32-warp
    // variant up to 64 tokens: V2-Lite FP8 batch 48 / 64 +10%, removed).
    if (env_flag("DSERVE_MOE_ROUTE_PERMUTE", true) && T >= 1 && T <= kernels::kMoeRoutePermuteMaxTokens) {
      Routed routed;
      *topk_ids = ids_with_grouping(T, W, EG, &routed);
      const kernels::MoeRouteParams rp = route_params(r, logits, bias32, *topk_ids, *topk_weights);
      const kernels::MoePermuteParams pp = permute_params(*topk_ids, routed);
      if (kernels::moe_route_permute_supported(rp, pp)) {
        DS_CUDA_CHECK(kernels::launch_moe_route_permute(rp, pp, stream()));
        mark_grouping_behind(*topk_ids, EG);
        return;
      }
    }
    *topk_ids = empty({T, W}, DType::kI32);
    DS_CUDA_CHECK(kernels::launch_moe_route(route_params(r, logits, bias32, *topk_ids, *topk_weights), stream()));
  }
  void moe_count_experts(const Tensor& topk_ids, int num_experts, const Tensor& real_rows, Tensor& counts) override {
    DS_CHECK_SHAPE(topk_ids, {-1, -1});
    DS_CHECK_SHAPE(counts, {num_experts});
    check_cuda(counts, "expert counts");
    DS_CHECK(counts.dtype() == DType::kI32, "expert counts ", counts.describe());
    kernels::MoeCountParams p{};
    p.topk_ids = i32(topk_ids, "counted expert ids");
    p.real_rows = real_rows.defined() ? i32(real_rows, "real rows") : nullptr;
    p.counts = counts.data_as<int32_t>();
    p.tokens = topk_ids.dim(0);
    p.width = static_cast<int>(topk_ids.dim(1));
    p.experts = num_experts;
    DS_CUDA_CHECK(kernels::launch_moe_count_experts(p, stream()));
  }
  void moe_record_ids(const Tensor& topk_ids, int k, int64_t column, Tensor& out) override {
    DS_CHECK_SHAPE(topk_ids, {-1, -1});
    DS_CHECK_SHAPE(out, {-1, -1});
    check_cuda(out, "recorded expert ids");
    DS_CHECK(out.dtype() == DType::kI32 && topk_ids.dim(0) <= out.dim(0), "moe_record_ids into ", out.describe());
    kernels::MoeRecordParams p{};
    p.topk_ids = i32(topk_ids, "recorded expert ids");
    p.out = out.data_as<int32_t>();
    p.tokens = topk_ids.dim(0);
    p.out_stride = out.dim(1);
    p.column = column;
    p.width = static_cast<int>(topk_ids.dim(1));
    p.k = k;
    DS_CUDA_CHECK(kernels::launch_moe_record_ids(p, stream()));
  }
  // The correction bias (selection only) as the routing kernels read it: fp32 [E] on the device, or undefined.
  Tensor router_bias_f32(const Tensor& bias, int64_t E) {
    if (!bias.defined()) return Tensor();
    check_cuda(bias, "correction bias");
    DS_CHECK(bias.numel() == E, "correction bias ", bias.describe());
    return as_f32(bias);
  }
  // Checks the routing against the logits [T, E] (the one check of moe_route and moe_gate_route).
  static kernels::MoeRouteParams route_params(const MoeRouting& r, const Tensor& logits, const Tensor& bias32,
                                              const Tensor& ids, const Tensor& weights) {
    DS_CHECK(logits.dim(1) == r.num_experts && r.n_group >= 1 && r.num_experts % r.n_group == 0 && r.top_k >= 1 &&
                 r.top_k <= r.num_experts && r.shared_experts >= 0 && ids.ndim() == 2 && ids.dim(1) == r.width() &&
                 weights.numel() == ids.numel(),
             "router logits ", logits.describe(), " ids ", ids.describe());
    kernels::MoeRouteParams p{};
    p.logits = logits.data_as<float>();
    p.bias = bias32.defined() ? bias32.data_as<float>() : nullptr;
    p.topk_ids = ids.data_as<int32_t>();
    p.topk_weights = weights.data_as<float>();
    p.tokens = logits.dim(0);
    p.experts = r.num_experts;
    p.top_k = r.top_k;
    p.n_group = r.n_group;
    p.topk_group = r.topk_group;
    p.method = r.method == MoeRouting::Method::kGreedy               ? kernels::RouteMethod::kGreedy
               : r.method == MoeRouting::Method::kGroupLimitedGreedy ? kernels::RouteMethod::kGroupLimitedGreedy
                                                                     : kernels::RouteMethod::kNoauxTc;
    p.sigmoid = r.sigmoid;
    p.norm_topk_prob = r.norm_topk_prob;
    p.routed_scaling_factor = r.routed_scaling_factor;
    p.shared = r.shared_experts;
    return p;
  }

  // DSERVE_MOE_GATE_ROUTE=1 (read per call): decode sizes with a bf16 router take kernels::launch_moe_gate_route
  // (router GEMM, routing and the grouping by expert in one launch; the grouping rides behind the ids for the
  // moe_experts op given them: permute). Off by default: 9.3 vs 10.8 us for the three launches alone (V2-Lite,
  // batch 1), but in the model the routing chain hides under the shared expert's weight stream and the fused
  // kernel lost there (batch 1 3.10-3.37 vs 3.07 ms; H100, 2026-11-26, BENCHMARKS.md; FP8 1.94 vs 1.78, s30b).
  // A variant in one thread-block cluster (CTA 0 routing from the logits in distributed shared memory, no ticket)
  // did no better: FP8 batch 1 1.65 vs 1.64 ms, batch 8 4.02 vs 3.80, bf16 batch 1 2.10 vs 2.02 (s37a); removed.
  Tensor moe_gate_route(const Tensor& x, const Tensor& router, const Tensor& bias, const MoeRouting& r,
                        Tensor* topk_ids, Tensor* topk_weights) override {
    const bool on = env_flag("DSERVE_MOE_GATE_ROUTE", false);
    const int64_t T = x.dim(0), E = router.dim(0);
    if (!on || x.ndim() != 2 || router.ndim() != 2 || x.dtype() != DType::kBF16 || router.dtype() != DType::kBF16 ||
        x.device() != Device::kCuda || router.device() != Device::kCuda || x.dim(1) != router.dim(1) ||
        E != r.num_experts || T > kernels::kMoeGateRouteMaxTokens || T < 1)
      return Ops::moe_gate_route(x, router, bias, r, topk_ids, topk_weights);
    const Tensor bias32 = router_bias_f32(bias, E);
    Tensor logits = empty({T, E}, DType::kF32);
    Routed routed;
    const int EG = r.grouped_experts();
    Tensor ids = ids_with_grouping(T, r.width(), EG, &routed);
    Tensor weights = empty({T, r.width()}, DType::kF32);
    kernels::MoeGateRouteParams p{};
    p.x = x.data();
    p.w = router.data();
    p.logits = logits.data_as<float>();
    p.ticket = gate_route_ticket();
    p.dim = x.dim(1);
    p.route = route_params(r, logits, bias32, ids, weights);
    p.permute = permute_params(ids, routed);
    if (!kernels::moe_gate_route_supported(p)) return Ops::moe_gate_route(x, router, bias, r, topk_ids, topk_weights);
    DS_CUDA_CHECK(kernels::launch_moe_gate_route(p, stream()));
    mark_grouping_behind(ids, EG);
    *topk_ids = ids;
    *topk_weights = weights;
    return logits;
  }

  // Tokens grouped by expert on the device, then two grouped GEMMs (gate|up with SiLU fused, down) that read
  // the per-expert counts/offsets on the device, and the weighted un-permutation: no host sync, so a
  // decode step is graph-capturable. Shapes the grouped kernel cannot take, and prefill-sized batches, use
  // per-expert cuBLASLt GEMMs with the counts read back.
  static constexpr int64_t kGroupedMaxTokens = 1024;

 private:
  struct ExpertTable;

 public:
  int64_t max_async_tokens() const override { return grouped_moe_ ? kGroupedMaxTokens : 0; }

  Tensor moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                     const std::vector<PreparedMlp>& experts) override {
    return moe_experts_impl(x, nullptr, topk_ids, topk_weights, experts);
  }
  Tensor moe_experts_q(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids, const Tensor& topk_weights,
                       const std::vector<PreparedMlp>& experts) override {
    return moe_experts_impl(x, &xq, topk_ids, topk_weights, experts);
  }
  // The grouped (decode) paths add the shared expert inside their combine (DSERVE_MOE_FUSED_SHARED=0: apart).
  Tensor moe_experts_shared_q(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids, const Tensor& topk_weights,
                              const std::vector<PreparedMlp>& experts, const Tensor& shared) override {
    if (!shared_in_combine(x, shared)) return Ops::moe_experts_shared_q(x, xq, topk_ids, topk_weights, experts, shared);
    bool added = false;
    Tensor y = moe_experts_impl(x, &xq, topk_ids, topk_weights, experts, &shared, &added);
    if (!added) {
      side_join();
      add_(y, shared);
    }
    return y;
  }
  bool shared_in_combine(const Tensor& x, const Tensor& shared) const {
    return fused_shared_ && shared.defined() && shared.device() == Device::kCuda && shared.ndim() == 2 &&
           shared.dim(0) == x.dim(0) && shared.dim(1) == x.dim(1) &&
           (shared.dtype() == DType::kBF16 || shared.dtype() == DType::kF32);
  }
  // The grouped paths leave their combine to the next norm (rms_norm_q_open; DSERVE_MOE_NORM_FUSED=0: combined
  // here). Not where the shared expert is added apart: that add reads the combine's output.
  MlpOut moe_experts_open(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids, const Tensor& topk_weights,
                          const std::vector<PreparedMlp>& experts, const Tensor& shared) override {
    opening_ = open_moe_ && (!shared.defined() || shared_in_combine(x, shared));
    opening_fp8_ = xq.defined();
    opened_.reset();
    MlpOut o = Ops::moe_experts_open(x, xq, topk_ids, topk_weights, experts, shared);
    opening_ = false;
    if (opened_) o = MlpOut{Tensor(), std::move(opened_)};
    opened_.reset();
    return o;
  }
  // addend (optional): the shared expert's output, made on the side chain; the grouped paths join and add it in
  // their combine and set *added.
  Tensor moe_experts_impl(const Tensor& x, const Fp8Act* xq, const Tensor& topk_ids, const Tensor& topk_weights,
                          const std::vector<PreparedMlp>& experts, const Tensor* addend = nullptr,
                          bool* added = nullptr) {
    check_dtype(x, DType::kBF16, "moe x");
    check_dtype(topk_weights, DType::kF32, "topk_weights");
    DS_CHECK(x.ndim() == 2 && topk_ids.ndim() == 2 && topk_ids.dim(0) == x.dim(0) &&
                 topk_weights.numel() == topk_ids.numel(),
             "moe_experts x ", x.describe(), " ids ", topk_ids.describe());
    const int64_t T = x.dim(0), d = x.dim(1), K = topk_ids.dim(1), N = T * K;
    const int E = static_cast<int>(experts.size());
    // Whatever path runs, the mark of a fused grouping is used up here (a stale one must never meet new ids).
    const bool behind = grouping_behind(topk_ids, E);
    Tensor out = empty({T, d}, DType::kBF16);
    if (T == 0) return out;
    const int64_t inter = E ? experts[0].down.weight.dim(1) : 0;
    // Large prefill batches go to cuBLASLt (the grouped kernel's small token tiles are made for decode and
    // would be compute-bound there; a sync per layer costs little next to such a step). Never while a graph
    // is being captured.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    DS_CUDA_CHECK(cudaStreamIsCapturing(stream(), &capturing));
    const ExpertTable* table = nullptr;
    if (E > 0 && (reinterpret_cast<uintptr_t>(x.data()) & 15) == 0) {
      const ExpertTable* t = expert_table(experts, d, inter);
      // FP8 experts (native mode): prefill-sized batches through cuBLASLt's block-scaled GEMM per expert
      // (V2-Lite, 64 x 512 tokens: the grouped tile reached 39K tokens/s there, bf16 on cuBLASLt 98K); where
      // the per-GPU table (tune-moe) puts the switch, else above 1024 tokens.
      if (t && t->fp8) {
        int64_t grouped_max = moe_fp8_tuning_.lookup(E, d, inter);
        // `dserve tune-moe` times both paths through this switch (read per call).
        grouped_max = env_int("DSERVE_MOE_FP8_GROUPED_MAX", grouped_max);
        grouped_max = std::max<int64_t>(grouped_max, kernels::kMoeFp8SmallMMax);
        const bool synced = (!grouped_moe_ || T > grouped_max) && capturing == cudaStreamCaptureStatusNone;
        return synced ? moe_experts_synced(x, topk_ids, topk_weights, experts, out)
                      : moe_experts_fp8(x, xq, topk_ids, topk_weights, *t, inter, out, addend, added, behind);
      }
      if (t && grouped_moe_ && (T <= kGroupedMaxTokens || capturing != cudaStreamCaptureStatusNone) &&
          kernels::moe_grouped_gemm_supported(inter, d) && kernels::moe_grouped_gemm_supported(d, inter))
        table = t;
    }
    if (!table) return moe_experts_synced(x, topk_ids, topk_weights, experts, out);
    const Routed r = permute(topk_ids, E, behind);
    int32_t *counts = r.counts, *offsets = r.offsets, *active = r.active, *num_active = r.num_active,
            *row_of = r.row_of, *src_token = r.src_token;
    // Worst-case row counts (every entry valid); rows of out-of-range ids stay unwritten and unread.
    Tensor act = empty({N, inter}, DType::kBF16);
    kernels::MoeGroupedGemmParams g;
    g.weights = table->gate_up;
    g.x = x.data();
    g.src_rows = src_token;
    g.out = act.data();
    g.counts = counts;
    g.offsets = offsets;
    g.active = active;
    g.num_active = num_active;
    g.slots = r.slots;
    kernels::set_moe_bounds(g, N, E, T);
    g.wgmma_stages = wgmma_stages_;
    g.wgmma_evict_first = bf16_walk_evict_first_;
    g.walk_tile_counter = walk_counter(T);
    g.N = inter;
    g.K = d;
    g.silu = true;
    // The wgmma walk where it applies (walk_takes, moe_bf16_wgmma_walk_supported) from DSERVE_MOE_BF16_WGMMA's batch
    // on, else the mma.sync kernels.
    auto gemm = [&](const CUtensorMap* maps) {
      if (maps && T >= bf16_wgmma_min_tokens_ && walk_takes(T, N, E, false) && kernels::moe_bf16_wgmma_walk_supported(g))
        DS_CUDA_CHECK(kernels::launch_moe_bf16_wgmma_walk(g, maps, stream()));
      else
        DS_CUDA_CHECK(kernels::launch_moe_grouped_gemm(g, stream()));
    };
    gemm(table->gate_up_maps);
    Tensor y = empty({N, d}, DType::kBF16);
    g.weights = table->down;
    g.slots_settled = true;  // written by the routing or grouping launch before the gate|up one
    g.x = act.data();
    g.src_rows = nullptr;
    g.out = y.data();
    g.N = d;
    g.K = inter;
    g.silu = false;
    gemm(table->down_maps);
    combine({y.data(), row_of, topk_weights.data_as<float>(), out.data(), T, d, static_cast<int>(K)}, addend, added,
            {y, r.meta, topk_weights});
    return out;
  }

  // moe_combine, with the addend (made on the side chain: joined first) summed inside when given.
  // row_of and the weights come from the routing or the grouping, two launches or more before (the expert GEMMs).
  // Inside moe_experts_open (opening_), kept for the next norm instead (opened_), with `keep`: the tensors p
  // points into; then, with flag_join_, the side chain is not joined here: a signal kernel queued on the side stream
  // after the addend's writer sets a ready word that the consumer's CTAs wait for (MoeCombineParams::addend_ready),
  // so the consumer keeps its programmatic edge from the down product on the main stream.
  void combine(kernels::MoeCombineParams p, const Tensor* addend, bool* added, std::vector<Tensor> keep) {
    p.ids_settled = true;
    if (addend) {
      if (flag_join_applies(p.tokens)) {
        DS_CHECK(!unconsumed_ready_, "an MoE output whose shared expert was flag-joined was never consumed");
        uint32_t* ready =
            reinterpret_cast<uint32_t*>(side_ready_.data_as<int32_t>()) + 2 * (next_ready_slot_++ % kReadySlots);
        DS_CUDA_CHECK(kernels::launch_moe_addend_signal(ready, cuda_side_stream()));
        p.addend_ready = ready;
        unconsumed_ready_ = ready;
        side_state_ = 0;
        side_unjoined_ = true;
      } else {
        side_join();
      }
      p.addend = addend->data();
      p.addend_f32 = addend->dtype() == DType::kF32;
      *added = true;
      keep.push_back(*addend);
    }
    if (opening_) {
      p.out = nullptr;  // the caller's output stays unwritten (and dies); the norm or reduce() writes elsewhere
      opened_ = std::make_shared<MoeParts>(MoeParts{p, std::move(keep)});
      return;
    }
    DS_CUDA_CHECK(kernels::launch_moe_combine(p, stream()));
  }
  // Whether combine() hands a side-chain addend of `tokens` rows to its consumer by flag (flag_join_'s rule; only for
  // an output kept for the next norm, right after the shared expert's side section).
  bool flag_join_applies(int64_t tokens) const {
    return opening_ && (flag_join_ == 1 || (flag_join_ == 2 && !opening_fp8_)) && side_stream_enabled() &&
           side_state_ == 2 && tokens > 0 && tokens <= flag_join_max_tokens_;
  }
  // An MoE output left unreduced (MlpOut::parts): its combine and the tensors that combine reads.
  struct MoeParts {
    kernels::MoeCombineParams combine;  // out unset
    std::vector<Tensor> keep;
    mutable bool taken = false;  // a consumer launch has read combine
  };
  static const MoeParts& moe_parts(const MlpOut& x) { return *static_cast<const MoeParts*>(x.parts.get()); }
  // x's combine for a consumer launch. Only the first consumer waits for a flag-joined addend's signal (which the last
  // of its CTAs resets); a later one is ordered after that consumer on the main stream.
  kernels::MoeCombineParams take_combine(const MlpOut& x) {
    const MoeParts& m = moe_parts(x);
    kernels::MoeCombineParams p = m.combine;
    if (m.taken) p.addend_ready = nullptr;
    m.taken = true;
    if (p.addend_ready && p.addend_ready == unconsumed_ready_) unconsumed_ready_ = nullptr;
    return p;
  }

  // Routed entries grouped by expert on the device (moe_permute): pointers into `meta`, which the struct keeps.
  struct Routed {
    Tensor meta;
    int32_t *counts = nullptr, *offsets = nullptr, *cursor = nullptr, *active = nullptr, *num_active = nullptr,
            *row_of = nullptr, *src_token = nullptr, *slots = nullptr;
  };
  // Layout of a grouping of N entries over E experts (int32): counts[E], offsets[E], cursor[E], active[E],
  // num_active, row_of[N], src_token[N], then (from the next 16-byte boundary) min(E, N) slot records
  // (kernels::kMoeSlotInts each).
  static int64_t routed_len(int64_t N, int E) {
    return 4 * static_cast<int64_t>(E) + 1 + 2 * N + 3 + kernels::kMoeSlotInts * kernels::moe_slot_count(E, N);
  }
  // The grouping stored in `owner` from int32 element `at` on.
  static Routed routed_at(const Tensor& owner, int64_t at, int E, int64_t N) {
    Routed r;
    r.meta = owner;
    r.counts = owner.data_as<int32_t>() + at;
    r.offsets = r.counts + E;
    r.cursor = r.offsets + E;
    r.active = r.cursor + E;
    r.num_active = r.active + E;
    r.row_of = r.num_active + 1;
    r.src_token = r.row_of + N;
    r.slots = reinterpret_cast<int32_t*>((reinterpret_cast<uintptr_t>(r.src_token + N) + 15) & ~uintptr_t{15});
    return r;
  }
  static kernels::MoePermuteParams permute_params(const Tensor& topk_ids, const Routed& r) {
    const int E = static_cast<int>(r.offsets - r.counts);
    return {topk_ids.data_as<int32_t>(), r.counts, r.offsets, r.cursor, r.row_of, r.src_token, topk_ids.numel(),
            static_cast<int>(topk_ids.dim(1)), E, r.active, r.num_active, r.slots};
  }
  // Ids [T, width] and, behind them in the same allocation, room for their grouping (*routed): whoever holds the
  // ids keeps it alive. For the launches that route and group in one (moe_route, moe_gate_route).
  Tensor ids_with_grouping(int64_t T, int width, int E, Routed* routed) {
    const int64_t N = T * width;
    Tensor buf = empty({N + routed_len(N, E)}, DType::kI32);
    *routed = routed_at(buf, N, E, N);
    return buf.rows(0, N).reshape({T, width});
  }
  // After such a launch: the next moe_experts op given these very ids takes their grouping (grouping_behind).
  void mark_grouping_behind(const Tensor& ids, int E) {
    fused_ids_ = ids.data();
    fused_experts_ = E;
    fused_entries_ = ids.numel();
  }
  // Whether a fused routing launch stored the grouping of these very ids behind them (mark_grouping_behind); the
  // mark is cleared here and by the next moe_route / moe_gate_route.
  bool grouping_behind(const Tensor& topk_ids, int E) {
    const bool behind = fused_ids_ && fused_ids_ == topk_ids.data() && fused_experts_ == E &&
                        fused_entries_ == topk_ids.numel();
    fused_ids_ = nullptr;
    return behind;
  }
  // The grouping of topk_ids by expert: the one stored behind them (behind: grouping_behind's answer), else a
  // moe_permute launch.
  Routed permute(const Tensor& topk_ids, int E, bool behind) {
    if (behind) return routed_at(topk_ids, topk_ids.numel(), E, topk_ids.numel());
    check_dtype(topk_ids, DType::kI32, "topk_ids");
    const int64_t N = topk_ids.numel();
    Routed r = routed_at(empty({routed_len(N, E)}, DType::kI32), 0, E, N);
    DS_CUDA_CHECK(kernels::launch_moe_permute(permute_params(topk_ids, r), stream()));
    return r;
  }
  uint32_t* gate_route_ticket() { return static_cast<uint32_t*>(ticket_.data()); }

  // Block-FP8 experts (kernels/moe_fp8.h): the activations are quantized once (x per token, the SiLU output per
  // routed row), then the small-M kernels (up to 16 tokens) or the pipelined tile run. No host sync at any size.
  // xq: x's quantization from the norm (rms_norm_q), used when made for the gate_up weights' scales.
  Tensor moe_experts_fp8(const Tensor& x, const Fp8Act* xq, const Tensor& topk_ids, const Tensor& topk_weights,
                         const ExpertTable& t, int64_t inter, Tensor out, const Tensor* addend, bool* added,
                         bool behind) {
    const int64_t T = x.dim(0), d = x.dim(1), K = topk_ids.dim(1), N = T * K;
    const int E = static_cast<int>(t.host.size() / 2);
    const Routed r = permute(topk_ids, E, behind);
    kernels::MoeFp8GemmParams g;
    g.counts = r.counts;
    g.offsets = r.offsets;
    g.active = r.active;
    g.num_active = r.num_active;
    g.slots = r.slots;
    kernels::set_moe_bounds(g, N, E, T);
    // DSERVE_MOE_WGMMA_STAGES (A/B runs), else the per-GPU table's depth for this shape, else the kernels' choice.
    g.wgmma_stages = wgmma_stages_ ? wgmma_stages_ : moe_fp8_tuning_.walk_stages_for(E, d, inter);
    g.wgmma_evict_first = fp8_walk_evict_first_;
    g.walk_tile_counter = walk_counter(T);
    auto gemm = [&](const Tensor& in /*[rows, k] bf16*/, bool ue8m0, const Fp8Act* made, const CUtensorMap* maps) {
      const int64_t rows = in.dim(0), k = in.dim(1);
      Tensor q, sx;
      if (made && made->defined() && made->ue8m0 == ue8m0 && made->q.ndim() == 2 && made->q.dim(0) == rows &&
          made->q.dim(1) == k && made->scales.dim(1) == k / 128) {
        q = made->q;
        sx = made->scales;
      } else {
        q = empty({rows, k}, DType::kF8E4M3);
        sx = empty({rows, k / 128}, DType::kF32);
        DS_CUDA_CHECK(kernels::launch_fp8_quant_act(
            kernels::fp8_quant_rows_params(in.data(), false, k, rows, k, k, q.data_as<uint8_t>(),
                                           sx.data_as<float>(), ue8m0),
            stream()));
        // The grouping's launch is now two or more back: its slot records may be read before the PDL wait, and
        // with them the expert's first weight round loaded (kernels/moe_fp8.cu). DSERVE_MOE_FP8_SETTLED=0: only
        // the down GEMM's (A/B runs).
        static const bool settled = env_flag("DSERVE_MOE_FP8_SETTLED", true);
        if (settled) g.slots_settled = true;
      }
      g.q = q.data_as<uint8_t>();
      g.sx = sx.data_as<float>();
      if (maps && walk_takes(T, N, E, true) && kernels::moe_fp8_wgmma_walk_supported(g))
        DS_CUDA_CHECK(kernels::launch_moe_fp8_wgmma_walk(g, maps, stream()));
      else
        DS_CUDA_CHECK(T <= kernels::kMoeFp8SmallMMax ? kernels::launch_moe_fp8_small_m(g, stream())
                                                     : kernels::launch_moe_fp8_grouped(g, stream()));
    };
    Tensor act = empty({N, inter}, DType::kBF16);  // [routed rows, inter]: silu(gate) * up
    g.weights = t.gate_up;
    g.scales = t.gate_up_scales;
    g.src_rows = r.src_token;
    g.out = act.data();
    g.N = inter;
    g.K = d;
    g.silu = true;
    gemm(x, t.ue8m0_gate_up, xq, t.gate_up_maps);
    Tensor y = empty({N, d}, DType::kBF16);  // [routed rows, d]
    g.weights = t.down;
    g.scales = t.down_scales;
    g.slots_settled = true;  // written by the routing or grouping launch before the gate|up one
    g.src_rows = nullptr;
    g.out = y.data();
    g.N = d;
    g.K = inter;
    g.silu = false;
    gemm(act, t.ue8m0_down, nullptr, t.down_maps);  // rows of out-of-range ids hold garbage and are never read
    combine({y.data(), r.row_of, topk_weights.data_as<float>(), out.data(), T, d, static_cast<int>(K)}, addend, added,
            {y, r.meta, topk_weights});
    return out;
  }

  // ---- output ----
  Tensor log_softmax(const Tensor& logits) override {
    check_cuda(logits, "log_softmax");
    DS_CHECK(logits.ndim() == 2 && (logits.dtype() == DType::kF32 || logits.dtype() == DType::kBF16), "log_softmax of ",
             logits.describe());
    Tensor out = empty({logits.dim(0), logits.dim(1)}, DType::kF32);
    // The vocab split over blocks of 2048 logits (a decode row no longer runs on one SM); per-block partials.
    Tensor part = empty({std::max<int64_t>(kernels::log_softmax_scratch_floats(logits.dim(0), logits.dim(1)), 2)},
                        DType::kF32);
    DS_CUDA_CHECK(kernels::launch_log_softmax_split(logits.data(), elem_type(logits.dtype()), out.data_as<float>(),
                                                    part.data_as<float>(), logits.dim(0), logits.dim(1), stream()));
    return out;
  }

  std::unique_ptr<PendingSample> sample_async(const Tensor& logits, const SampleBatch& batch,
                                              const Tensor& token_store) override {
    check_cuda(logits, "sample");
    DS_CHECK(logits.ndim() == 2 && (logits.dtype() == DType::kF32 || logits.dtype() == DType::kBF16), "sample of ",
             logits.describe());
    const int64_t V = batch.vocab, B = static_cast<int64_t>(batch.rows.size());
    check_sample_batch(batch, logits.dim(0), logits.dim(1));
    auto pending = std::make_unique<CudaPendingSample>();
    if (B == 0) return pending;
    // Jobs (rows to sort) take the first work slots: draw rows, then raw copies for top logprobs.
    std::vector<kernels::SampleRowParams> rows(B);
    std::vector<int32_t> job_row, job_raw;
    int max_top_n = 1;
    for (int64_t b = 0; b < B; ++b) {
      const SampleRow& r = batch.rows[b];
      rows[b] = kernels::SampleRowParams{r.logits_row, r.temperature, r.top_k, r.top_p, r.min_p, r.frequency_penalty,
                                         r.presence_penalty, r.repetition_penalty, r.uniform, r.penalty_begin,
                                         r.penalty_end, std::max(0, r.top_logprobs), r.want_logprob ? 1 : 0, -1, -1,
                                         r.store_index, r.ids_begin, r.ids_end};
      if (r.store_index >= 0)
        DS_CHECK(token_store.defined() && token_store.device() == Device::kCuda && token_store.dtype() == DType::kI32 &&
                     r.store_index < token_store.numel(),
                 "token store index ", r.store_index, " outside ", token_store.describe());
      max_top_n = std::max(max_top_n, r.top_logprobs);
      if (r.temperature > 0.0f) {
        rows[b].slot = static_cast<int32_t>(job_row.size());
        job_row.push_back(static_cast<int32_t>(b));
        job_raw.push_back(0);
      }
    }
    for (int64_t b = 0; b < B; ++b)
      if (rows[b].top_n > 0) {
        rows[b].raw_slot = static_cast<int32_t>(job_row.size());
        job_row.push_back(static_cast<int32_t>(b));
        job_raw.push_back(1);
      }
    const bool greedy_only =
        greedy_fast_ && B <= kernels::kSampleGreedyMaxRows && std::all_of(rows.begin(), rows.end(), [](const auto& r) {
          return r.temperature <= 0.0f && r.top_n == 0 && !r.want_logprob && r.penalty_begin == r.penalty_end &&
                 r.ids_begin == r.ids_end;
        });
    if (greedy_only) return sample_greedy(logits, rows, V, token_store, std::move(pending));
    const int num_jobs = static_cast<int>(job_row.size());
    int32_t slots = num_jobs;
    for (auto& r : rows)
      if (r.slot < 0) r.slot = slots++;
    std::vector<kernels::SamplePenaltyParams> pens(batch.penalties.size());
    for (size_t i = 0; i < pens.size(); ++i) {
      const SamplePenalty& q = batch.penalties[i];
      pens[i] = kernels::SamplePenaltyParams{q.id, q.output_count, q.seen, q.banned, 0, 0, q.bias};
    }
    static_assert(sizeof(kernels::SampleRowParams) % 4 == 0 && sizeof(kernels::SamplePenaltyParams) % 4 == 0);
    auto words = [](size_t bytes) { return static_cast<int64_t>(std::max<size_t>((bytes + 3) / 4, 1)); };
    auto to_dev = [&](const void* src, size_t bytes) {
      Tensor t = empty({words(bytes)}, DType::kI32);
      if (bytes) DS_CUDA_CHECK(cudaMemcpyAsync(t.data(), src, bytes, cudaMemcpyHostToDevice, stream()));
      return t;
    };
    Tensor d_rows = to_dev(rows.data(), rows.size() * sizeof(rows[0]));
    Tensor d_pens = to_dev(pens.data(), pens.size() * sizeof(pens[0]));
    Tensor d_job_row = to_dev(job_row.data(), job_row.size() * 4), d_job_raw = to_dev(job_raw.data(), job_raw.size() * 4);
    Tensor work = empty({std::max<int64_t>(slots, 1), V}, DType::kF32);
    const int64_t chunk = num_jobs > 0 ? kernels::kSampleSortChunk : 0;
    Tensor keys_out = empty({std::max<int64_t>(chunk * V, 1)}, DType::kF32);
    Tensor vals_in = empty({std::max<int64_t>(chunk * V, 1)}, DType::kI32);
    Tensor vals_out = empty({std::max<int64_t>(chunk * V, 1)}, DType::kI32);
    Tensor offsets = empty({kernels::kSampleSortChunk + 1}, DType::kI32);
    size_t temp_bytes = 0;
    if (num_jobs > 0) DS_CUDA_CHECK(kernels::sample_sort_temp_bytes(V, &temp_bytes));
    Tensor temp = empty({words(temp_bytes)}, DType::kI32);
    // Everything that comes back lives in one device block, copied into pinned memory by one async copy:
    // tokens [B], bad_id [B], logprobs [B], bad_value [B], top_id [B, n], top_lp [B, n] (4-byte words).
    const int64_t n = max_top_n;
    const bool want_top = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.top_n > 0; });
    const int64_t num_ids = static_cast<int64_t>(batch.logprob_ids.size());
    Tensor back = empty({4 * B + 2 * B * n + num_ids}, DType::kI32);
    int32_t* wb = back.data_as<int32_t>();
    Tensor d_ids = to_dev(batch.logprob_ids.data(), batch.logprob_ids.size() * 4);
    Tensor lse = empty({B}, DType::kF32);
    Tensor part = scan_parts(B);
    kernels::SampleParams p{};
    p.part = static_cast<kernels::SampleScanPart*>(part.data());
    p.logits = logits.data();
    p.type = elem_type(logits.dtype());
    p.ld = logits.dim(1);
    p.vocab = V;
    p.num_rows = static_cast<int>(B);
    p.rows = static_cast<const kernels::SampleRowParams*>(d_rows.data());
    p.penalties = static_cast<const kernels::SamplePenaltyParams*>(d_pens.data());
    p.job_row = d_job_row.data_as<int32_t>();
    p.job_raw = d_job_raw.data_as<int32_t>();
    p.num_jobs = num_jobs;
    p.work = work.data_as<float>();
    p.keys_out = keys_out.data_as<float>();
    p.vals_in = vals_in.data_as<int32_t>();
    p.vals_out = vals_out.data_as<int32_t>();
    p.offsets = offsets.data_as<int32_t>();
    p.sort_temp = temp.data();
    p.sort_temp_bytes = temp_bytes;
    p.max_top_n = max_top_n;
    p.lse = lse.data_as<float>();
    p.out = kernels::sample_outputs(wb, B);
    p.top_id = wb + 4 * B;
    p.top_lp = reinterpret_cast<float*>(wb + 4 * B + B * n);
    p.token_store = token_store.defined() ? token_store.data_as<int32_t>() : nullptr;
    p.lp_ids = d_ids.data_as<int32_t>();
    // The ids' logprobs right after what comes back before them (the top arrays only where some row wants them:
    // otherwise nothing writes those).
    p.lp_ids_out = reinterpret_cast<float*>(wb + 4 * B + (want_top ? 2 * B * n : 0));
    DS_CUDA_CHECK(kernels::launch_sample(p, stream()));
    pending->copy_back(wb, B, want_top ? n : 0, stream(), num_ids);
    pending->top_n.resize(B);
    for (int64_t b = 0; b < B; ++b) pending->top_n[b] = static_cast<int32_t>(std::min<int64_t>(rows[b].top_n, V));
    return pending;
  }

  // sample_async for greedy-only rows: one launch, the outputs laid out as the general path's (tokens, bad_id,
  // logprobs, bad_value) and copied back the same way.
  std::unique_ptr<PendingSample> sample_greedy(const Tensor& logits, const std::vector<kernels::SampleRowParams>& rows,
                                               int64_t V, const Tensor& token_store,
                                               std::unique_ptr<CudaPendingSample> pending) {
    const int64_t B = static_cast<int64_t>(rows.size());
    Tensor back = empty({4 * B}, DType::kI32);
    int32_t* wb = back.data_as<int32_t>();
    Tensor part;
    kernels::SampleGreedyParams g = greedy_params(logits, V, B, &part);
    for (int64_t b = 0; b < B; ++b) {
      g.logits_row[b] = rows[b].logits_row;
      g.store_index[b] = rows[b].store_index;
    }
    g.out = kernels::sample_outputs(wb, B);
    g.token_store = token_store.defined() ? token_store.data_as<int32_t>() : nullptr;
    DS_CUDA_CHECK(kernels::launch_sample_greedy(g, stream()));
    pending->copy_back(wb, B, 0, stream());
    pending->top_n.assign(B, 0);
    return pending;
  }
  void greedy_to_store_(const Tensor& logits, int64_t vocab, Tensor& store) override {
    check_cuda(logits, "greedy_to_store_ logits");
    check_cuda(store, "greedy_to_store_ store");
    DS_CHECK(logits.ndim() == 2 && (logits.dtype() == DType::kF32 || logits.dtype() == DType::kBF16) &&
                 vocab >= 1 && vocab <= logits.dim(1) && vocab <= INT32_MAX,
             "greedy_to_store_ of ", logits.describe(), " over ", vocab, " columns");
    DS_CHECK(store.dtype() == DType::kI32 && store.ndim() == 1 && store.numel() == logits.dim(0) &&
                 store.numel() <= kGreedyMaxRows,
             "greedy_to_store_ into ", store.describe(), " for ", logits.describe(), " (at most ", kGreedyMaxRows,
             " rows)");
    Tensor part;
    kernels::SampleGreedyParams g = greedy_params(logits, vocab, logits.dim(0), &part);
    g.identity = 1;
    g.out = kernels::SampleOutputs{nullptr, nullptr, nullptr, nullptr};
    g.token_store = store.data_as<int32_t>();
    DS_CUDA_CHECK(kernels::launch_sample_greedy(g, stream()));
  }
  // What both greedy launches set alike: the logits, `rows` rows, one partial per row and chunk (in *part, which the
  // caller keeps until the launch is queued) and the shared arrival counters.
  kernels::SampleGreedyParams greedy_params(const Tensor& logits, int64_t vocab, int64_t rows, Tensor* part) {
    *part = empty({rows * kernels::sample_greedy_chunks(vocab) * static_cast<int64_t>(sizeof(kernels::SampleScanPart) / 4)},
                  DType::kI32);
    kernels::SampleGreedyParams g{};
    g.logits = logits.data();
    g.type = elem_type(logits.dtype());
    g.ld = logits.dim(1);
    g.vocab = vocab;
    g.num_rows = static_cast<int>(rows);
    g.part = static_cast<kernels::SampleScanPart*>(part->data());
    g.arrivals = static_cast<uint32_t*>(arrivals_.data());
    return g;
  }
  // Scratch of the general sampling launch: kSampleScanChunks partials per row.
  Tensor scan_parts(int64_t rows) {
    static_assert(sizeof(kernels::SampleScanPart) % 4 == 0);
    return empty({rows * kernels::kSampleScanChunks * static_cast<int64_t>(sizeof(kernels::SampleScanPart) / 4)},
                 DType::kI32);
  }

  void resolve_tokens_(Tensor& ids, const Tensor& store) override {
    check_cuda(ids, "resolve_tokens_");
    check_cuda(store, "resolve_tokens_");
    DS_CHECK(ids.dtype() == DType::kI32 && ids.ndim() == 1 && store.dtype() == DType::kI32, "resolve_tokens_ of ",
             ids.describe(), " from ", store.describe());
    DS_CUDA_CHECK(kernels::launch_resolve_tokens(ids.data_as<int32_t>(), store.data_as<int32_t>(), ids.numel(),
                                                 stream()));
  }

 private:
  static cudaStream_t stream() { return cuda_stream(); }

  // The main stream's next launch after every side kernel up to side_done_'s record (the event join).
  void main_waits_for_side_done() {
    DS_CUDA_CHECK(cudaStreamWaitEvent(cuda_main_stream(), side_done_, 0));
    if (join_fence_) kernels::pdl_fence(cuda_main_stream());
  }
  void ensure_side_events() {
    if (side_fork_) return;
    DS_CUDA_CHECK(cudaEventCreateWithFlags(&side_fork_, cudaEventDisableTiming));
    DS_CUDA_CHECK(cudaEventCreateWithFlags(&side_done_, cudaEventDisableTiming));
  }
  // DSERVE_SIDE_STREAM=0: side sections run in program order on the compute stream (A/B runs).
  static bool side_stream_enabled() {
    static const bool on = env_flag("DSERVE_SIDE_STREAM", true);
    return on;
  }
  cudaEvent_t side_fork_ = nullptr, side_done_ = nullptr;  // never destroyed: the ops object lives until exit
  int side_state_ = 0;  // 0 outside, 1 inside a section, 2 ended and not joined
  bool side_unjoined_ = false;  // side kernels queued since the last event join (flag joins): side_flush joins them
  int flag_join_ = 2;           // DSERVE_SIDE_FLAG_JOIN
  int64_t flag_join_max_tokens_ = 8;
  bool opening_fp8_ = false;    // inside moe_experts_open with an FP8-quantized input
  static constexpr int kReadySlots = 64;
  // Consumers of a flag join wait in their CTAs (one a token for the norm); a few dozen cannot keep the addend's
  // writer off the SMs, thousands could.
  static constexpr int64_t kFlagJoinMaxTokens = 64;
  Tensor side_ready_;  // [kReadySlots][2] I32 read as uint32: MoeCombineParams::addend_ready pairs, round robin
  int64_t next_ready_slot_ = 0;
  uint32_t* unconsumed_ready_ = nullptr;  // the last flag join's pair until a consumer launch takes it

  // Any float tensor (host or device; FP8 with optional block scales) -> a bf16 device tensor.
  Tensor to_bf16(const Tensor& t, const Tensor* scale, int block_n, int block_k) {
    if (t.device() == Device::kCuda && t.dtype() == DType::kBF16 && !scale) return t;
    Tensor src = t.device() == Device::kCuda ? t : cuda_upload(t);
    Tensor sc;
    if (scale) {
      DS_CHECK(t.ndim() == 2 && scale->ndim() == 2, "block scales ", scale->describe(), " for ", t.describe());
      sc = scale->dtype() == DType::kF32 ? upload(*scale) : as_f32(upload(*scale));
    }
    Tensor out = empty(t.shape(), DType::kBF16);
    const int64_t rows = t.ndim() ? t.dim(0) : 1;
    const int64_t cols = rows ? t.numel() / std::max<int64_t>(rows, 1) : 0;
    kernels::ConvertParams p{src.data(), elem_type(t.dtype()), out.data(), ElemType::kBF16,
                             sc.defined() ? sc.data_as<float>() : nullptr, rows, cols,
                             sc.defined() ? sc.dim(1) : 0, block_n, block_k};
    DS_CUDA_CHECK(kernels::launch_convert(p, stream()));
    return out;
  }

  // A float device tensor as F32 (a copy unless it already is).
  Tensor as_f32(const Tensor& t) {
    check_cuda(t, "as_f32");
    if (t.dtype() == DType::kF32) return t;
    Tensor out = empty(t.shape(), DType::kF32);
    kernels::ConvertParams p{t.data(), elem_type(t.dtype()), out.data(), ElemType::kF32, nullptr, 1, t.numel(), 0, 1, 1};
    DS_CUDA_CHECK(kernels::launch_convert(p, stream()));
    return out;
  }

  // Decode-sized bf16 GEMMs go to the small-M weight-stream kernels (cuBLASLt has a 5-9 us floor per call
  // there), the rest to cuBLASLt.
  void run_gemm(const GemmArgs& g) {
    // Only [N, K] weights: the [K, N] (per-head bmm) kernel was slower than cuBLASLt at V3 sizes and at M = 8
    // (dserve_kernel_bench bmm_heads rows, 2026-11-24).
    if (use_small_m(g.M, g.N * g.K * g.batch * 2, false) && g.w_nk && g.in_type == DType::kBF16 &&
        (g.out_type == DType::kBF16 || g.out_type == DType::kF32)) {
      kernels::GemmSmallMParams p;
      p.x = g.x;
      p.ldx = g.ldx;
      p.stride_x = g.stride_x;
      p.w = g.w;
      p.ldw = g.ldw;
      p.stride_w = g.stride_w;
      p.d = g.d;
      p.ldd = g.ldd;
      p.stride_d = g.stride_d;
      p.d_f32 = g.out_type == DType::kF32;
      p.M = g.M;
      p.N = g.N;
      p.K = g.K;
      p.batch = g.batch;
      if (kernels::gemm_small_m_supported(p)) {
        DS_CUDA_CHECK(kernels::launch_gemm_small_m(p, stream()));
        return;
      }
    }
    gemm_->run(g, stream());
  }
  // Where the small-M kernels beat cuBLASLt (dserve_kernel_bench linear rows, H100, 2026-11-24): every M <= 4
  // up to 64 MB of weights (past that cuBLASLt streams as well or better: V3 lm_head 648 vs 709 us), and up to
  // M = 16 for weights <= 12 MB (at M = 8 the kernel loses on big shapes: V3 o_proj 113 vs 90 us). A fused
  // epilogue (SiLU, accumulate) saves a launch, so those go up to M = 16 for any weight <= 64 MB.
  bool use_small_m(int64_t M, int64_t weight_bytes, bool fused) const {
    if (M < 1 || M > small_m_max_) return false;
    constexpr int64_t kMB = int64_t{1} << 20;
    if (weight_bytes > 64 * kMB) return fused ? M <= 4 : false;
    return M <= 4 || fused || weight_bytes <= 12 * kMB;
  }

  // x [M, K] · w [N, K]ᵀ -> d [M, N] (bf16) as small-M kernel parameters; false when the kernel does not take it.
  bool small_m_params(const Tensor& x, const LinearWeight& lw, Tensor& d, kernels::GemmSmallMParams* p) {
    const Tensor& w = lw.weight;
    if (lw.is_block_fp8() || x.ndim() != 2 || w.ndim() != 2 || !use_small_m(x.dim(0), w.numel() * 2, false) ||
        x.dtype() != DType::kBF16 || w.dtype() != DType::kBF16 || x.dim(1) != w.dim(1))
      return false;
    d = empty({x.dim(0), w.dim(0)}, DType::kBF16);
    p->x = x.data();
    p->ldx = x.dim(1);
    p->w = w.data();
    p->ldw = w.dim(1);
    p->d = d.data();
    p->ldd = w.dim(0);
    p->M = x.dim(0);
    p->N = w.dim(0);
    p->K = x.dim(1);
    return kernels::gemm_small_m_supported(*p);
  }

  // Decode-sized x [M, K] · w [N, K]ᵀ on the small-M kernel with a fused epilogue (silu: w is [2N, K];
  // accumulate: d += product), when the shapes allow; false: the caller takes the unfused path.
  bool small_m_fused(const Tensor& x, const Tensor& w, int64_t N, Tensor& d, bool silu, bool accumulate) {
    if (x.ndim() != 2 || w.ndim() != 2 || !use_small_m(x.dim(0), w.numel() * 2, true) || x.dtype() != DType::kBF16 ||
        w.dtype() != DType::kBF16 || (d.dtype() != DType::kBF16 && d.dtype() != DType::kF32) ||
        (silu && d.dtype() != DType::kBF16) || x.dim(1) != w.dim(1) || d.ndim() != 2 ||
        d.dim(0) != x.dim(0) || d.dim(1) != N || w.dim(0) != (silu ? 2 * N : N))
      return false;
    kernels::GemmSmallMParams p;
    p.x = x.data();
    p.ldx = x.dim(1);
    p.w = w.data();
    p.ldw = w.dim(1);
    p.d = d.data();
    p.d_f32 = d.dtype() == DType::kF32;
    p.ldd = N;
    p.silu = silu;
    p.accumulate = accumulate;
    p.M = x.dim(0);
    p.N = N;
    p.K = x.dim(1);
    if (p.M == 0 || !kernels::gemm_small_m_supported(p)) return false;
    DS_CUDA_CHECK(kernels::launch_gemm_small_m(p, stream()));
    return true;
  }

  // out[M, N] = x[M, K] · w[N, K]ᵀ (x and w of one dtype; out bf16 or f32).
  void gemm_nk(const Tensor& x, const Tensor& w, const Tensor& out) {
    DS_CHECK(x.dtype() == w.dtype(), "GEMM operands ", x.describe(), " and ", w.describe());
    GemmArgs g;
    g.x = x.data();
    g.ldx = x.dim(1);
    g.w = w.data();
    g.ldw = w.dim(1);
    g.w_nk = true;
    g.d = out.data();
    g.ldd = out.dim(1);
    g.in_type = x.dtype();
    g.out_type = out.dtype();
    g.M = x.dim(0);
    g.N = w.dim(0);
    g.K = x.dim(1);
    run_gemm(g);
  }

  // With xq: out's block-FP8 quantization (ue8m0 scales or not) made in the same kernel where it takes the row.
  // With moe (x undefined): x is that MoE sum, added in the norm's kernel where it takes the shape (else combined
  // by its own launch first).
  void launch_rms(const Tensor& x, Tensor* residual, const Tensor& w, Tensor& out, float eps, Fp8Act* xq = nullptr,
                  bool ue8m0 = false, const kernels::MoeCombineParams* moe = nullptr) {
    check_cuda(w, "rms_norm weight");
    DS_CHECK(w.dtype() == DType::kBF16 || w.dtype() == DType::kF32, "rms_norm weight ", w.describe());
    const int64_t rows = out.dim(0), n = out.dim(1);
    kernels::RmsNormParams p{moe ? nullptr : x.data(), residual ? residual->data() : nullptr, w.data(), out.data(), rows,
                             n, n, n, n, eps, w.dtype() == DType::kF32};
    Tensor summed;  // [rows, n]: moe combined apart
    if (moe) {
      p.moe = *moe;
      if (!kernels::rms_norm_moe_supported(p)) {
        p.moe = {};
        summed = empty({rows, n}, DType::kBF16);
        kernels::MoeCombineParams c = *moe;
        c.out = summed.data();
        DS_CUDA_CHECK(kernels::launch_moe_combine(c, stream()));
        p.x = summed.data();
      }
    }
    if (xq) {
      Tensor q = empty({rows, n}, DType::kF8E4M3), s = empty({rows, n / 128}, DType::kF32);
      p.q = q.data_as<uint8_t>();
      p.q_scales = s.data_as<float>();
      p.q_ue8m0 = ue8m0;
      if (kernels::rms_norm_quant_supported(p)) {
        *xq = Fp8Act{q, s, ue8m0};
      } else {
        p.q = nullptr;
        p.q_scales = nullptr;
      }
    }
    DS_CUDA_CHECK(kernels::launch_rms_norm(p, stream()));
  }

  // out = x W^T for one expert's rows: bf16 on cuBLASLt, or block-FP8 (native mode) through fp8_, which may
  // write up to `out_rows` rows (its cuBLASLt row padding: the next expert's rows, rewritten by that expert
  // later in stream order, or the buffer's spare rows).
  void expert_gemm(const Tensor& x, const LinearWeight& w, Tensor out, int64_t out_rows) {
    if (!w.is_block_fp8()) return gemm_nk(x, w.weight, out);
    DS_CHECK(fp8_ && fp8_->owns(w), "expert weight ", w.weight.describe(), " is FP8 but not prepared natively");
    fp8_->linear_into(x, w, out.data(), out_rows);
  }

  // Per-expert cuBLASLt GEMMs over the counts read back to the host (one sync; not capturable): shapes the
  // grouped kernel does not take (dims not a multiple of 8) and prefill-sized batches.
  Tensor moe_experts_synced(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                            const std::vector<PreparedMlp>& experts, Tensor out) {
    const int64_t T = x.dim(0), d = x.dim(1), K = topk_ids.dim(1), N = T * K;
    const int E = static_cast<int>(experts.size());
    Tensor meta = empty({3 * static_cast<int64_t>(E) + 2 * N}, DType::kI32);
    int32_t* counts = meta.data_as<int32_t>();
    int32_t* offsets = counts + E;
    int32_t* cursor = offsets + E;
    int32_t* row_of = cursor + E;
    int32_t* src_token = row_of + N;
    DS_CUDA_CHECK(kernels::launch_moe_permute(
        {i32(topk_ids, "topk_ids"), counts, offsets, cursor, row_of, src_token, N, static_cast<int>(K), E}, stream()));
    std::vector<int32_t> host_counts(E);
    DS_CUDA_CHECK(cudaMemcpyAsync(host_counts.data(), counts, sizeof(int32_t) * E, cudaMemcpyDeviceToHost, stream()));
    DS_CUDA_CHECK(cudaStreamSynchronize(stream()));
    int64_t rows = 0;
    for (int32_t c : host_counts) rows += c;
    const int64_t inter = E ? experts[0].down.weight.dim(1) : 0;
    if (moe_fp8_segmented_ && moe_fp8_segmented(x, topk_ids, topk_weights, experts, host_counts, counts, offsets,
                                                row_of, src_token, out))
      return out;
    Tensor xp = empty({rows, d}, DType::kBF16);
    DS_CUDA_CHECK(kernels::launch_gather_rows(x.data(), src_token, xp.data(), rows, d, stream()));
    // Spare rows past `rows`: room for the last expert's FP8 row padding (expert_gemm).
    constexpr int64_t kSpare = Fp8Gemm::kLtRowMultiple;
    Tensor gu_all = empty({rows + kSpare, 2 * inter}, DType::kBF16);
    Tensor gu = gu_all.rows(0, rows);
    int64_t off = 0;
    for (int e = 0; e < E; ++e) {
      if (host_counts[e] == 0) continue;
      const Tensor& w = experts[e].gate_up.weight;
      DS_CHECK(w.dim(0) == 2 * inter && w.dim(1) == d, "expert ", e, " gate_up ", w.describe());
      expert_gemm(xp.rows(off, off + host_counts[e]), experts[e].gate_up, gu.rows(off, off + host_counts[e]),
                  rows + kSpare - off);
      off += host_counts[e];
    }
    Tensor act = silu_mul(gu);  // [rows, inter]
    Tensor y_all = empty({rows + kSpare, d}, DType::kBF16);
    Tensor y = y_all.rows(0, rows);
    off = 0;
    for (int e = 0; e < E; ++e) {
      if (host_counts[e] == 0) continue;
      const Tensor& w = experts[e].down.weight;
      DS_CHECK(w.dim(0) == d && w.dim(1) == inter, "expert ", e, " down ", w.describe());
      expert_gemm(act.rows(off, off + host_counts[e]), experts[e].down, y.rows(off, off + host_counts[e]),
                  rows + kSpare - off);
      off += host_counts[e];
    }
    DS_CUDA_CHECK(kernels::launch_moe_combine(
        {y.data(), row_of, topk_weights.data_as<float>(), out.data(), T, d, static_cast<int>(K)}, stream()));
    return out;
  }


  // moe_experts_synced for native FP8 experts whose GEMMs cuBLASLt takes at every segment's row count (else
  // false, before any launch): the routed rows are quantized once into per-expert segments padded to 16 rows,
  // each expert's GEMM runs on its segment's offsets, and the SiLU-mul is fused with the down projection's
  // quantization. Every step rounds as the per-expert chain does (same cuBLASLt shapes, bf16 SiLU output).
  bool moe_fp8_segmented(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                         const std::vector<PreparedMlp>& experts, const std::vector<int32_t>& host_counts,
                         const int32_t* counts, const int32_t* offsets, int32_t* row_of, const int32_t* src_token,
                         Tensor& out) {
    constexpr int64_t kRows = kernels::kMoeFp8SegmentRows;
    static_assert(kRows == Fp8Gemm::kLtRowMultiple, "segments are padded as cuBLASLt's rows");
    const int64_t T = x.dim(0), d = x.dim(1), K = topk_ids.dim(1);
    const int E = static_cast<int>(experts.size());
    if (!fp8_ || E == 0 || d % 128 != 0) return false;
    const int64_t inter = experts[0].down.weight.dim(1);
    if (inter % 128 != 0) return false;
    for (const PreparedMlp& m : experts)
      if (!m.gate_up.is_block_fp8() || !m.down.is_block_fp8() || !fp8_->owns(m.gate_up) || !fp8_->owns(m.down) ||
          m.gate_up.weight.dim(0) != 2 * inter || m.gate_up.weight.dim(1) != d || m.down.weight.dim(0) != d ||
          m.down.weight.dim(1) != inter)
        return false;
    // One activation quantization per GEMM kind: every expert's weights must agree on ue8m0.
    const bool ue_gu = fp8_->ue8m0_of(experts[0].gate_up), ue_dn = fp8_->ue8m0_of(experts[0].down);
    std::vector<int64_t> pstart(E + 1, 0);
    for (int e = 0; e < E; ++e) {
      const int64_t mp = (host_counts[e] + kRows - 1) / kRows * kRows;
      pstart[e + 1] = pstart[e] + mp;
      if (fp8_->ue8m0_of(experts[e].gate_up) != ue_gu || fp8_->ue8m0_of(experts[e].down) != ue_dn) return false;
      if (mp > 0 && !(fp8_->lt_supported_for(experts[e].gate_up, mp) && fp8_->lt_supported_for(experts[e].down, mp)))
        return false;
    }
    const int64_t slots = pstart[E];
    Tensor seg = empty({E + 1}, DType::kI32);  // pstart on the device
    int32_t* dev_pstart = seg.data_as<int32_t>();
    DS_CUDA_CHECK(kernels::launch_moe_fp8_segments(counts, E, dev_pstart, stream()));
    const bool m_major = fp8_->lt_scales_m_major();
    auto quantize = [&](const Tensor& in, int64_t ldx, bool silu, int64_t k, bool ue8m0, Tensor& q, Tensor& sc) {
      q = empty({slots, k}, DType::kF8E4M3);
      sc = empty({std::max<int64_t>(slots * (k / 128), 1)}, DType::kF32);
      kernels::MoeFp8SegmentQuantParams p;
      p.x = in.data();
      p.ldx = ldx;
      p.silu = silu;
      p.src_token = src_token;
      p.counts = counts;
      p.offsets = offsets;
      p.pstart = dev_pstart;
      p.experts = E;
      p.slots = slots;
      p.K = k;
      p.ue8m0 = ue8m0;
      p.s_m_major = m_major;
      p.q = q.data_as<uint8_t>();
      p.s = sc.data_as<float>();
      DS_CUDA_CHECK(kernels::launch_moe_fp8_segment_quant(p, stream()));
    };
    // Expert e's GEMM on rows [pstart[e], pstart[e + 1]) of q (width k) into those rows of y (width n).
    auto gemms = [&](const Tensor& q, const Tensor& sc, int64_t k, bool gate_up, Tensor& y, int64_t n) {
      for (int e = 0; e < E; ++e) {
        const int64_t mp = pstart[e + 1] - pstart[e];
        if (mp == 0) continue;
        fp8_->linear_quantized(q.data_as<uint8_t>() + pstart[e] * k, sc.data_as<float>() + pstart[e] * (k / 128),
                               gate_up ? experts[e].gate_up : experts[e].down, mp,
                               static_cast<uint16_t*>(y.data()) + pstart[e] * n);
      }
    };
    Tensor q1, s1, q2, s2;
    quantize(x, d, false, d, ue_gu, q1, s1);            // [slots, d] gathered tokens
    Tensor gu = empty({slots, 2 * inter}, DType::kBF16);  // [slots, 2 * inter]
    gemms(q1, s1, d, true, gu, 2 * inter);
    quantize(gu, 2 * inter, true, inter, ue_dn, q2, s2);  // [slots, inter] silu(gate) * up
    Tensor y = empty({slots, d}, DType::kBF16);             // [slots, d]
    gemms(q2, s2, inter, false, y, d);
    DS_CUDA_CHECK(kernels::launch_moe_fp8_slot_rows(i32(topk_ids, "topk_ids"), offsets, dev_pstart, row_of,
                                                    T * K, stream()));
    DS_CUDA_CHECK(kernels::launch_moe_combine(
        {y.data(), row_of, topk_weights.data_as<float>(), out.data(), T, d, static_cast<int>(K)}, stream()));
    return true;
  }

  // Device arrays of the experts' weight pointers for the grouped GEMMs, one per expert list (MoE layer),
  // built on first use (before any graph capture: the warm-up step) and rebuilt if the list's tensors change.
  struct ExpertTable {
    std::vector<const void*> host;  // gate_up pointers, then down pointers (the key: rebuilt when they change)
    Tensor dev;                     // those, then (FP8) the gate_up and down scale-grid pointers, on the device
    const void* const* gate_up = nullptr;
    const void* const* down = nullptr;
    bool fp8 = false;  // e4m3 weights prepared by fp8_ with 128x128 block scales
    const float* const* gate_up_scales = nullptr;
    const float* const* down_scales = nullptr;
    bool ue8m0_gate_up = false, ue8m0_down = false;  // every expert's scales are powers of two
    // One tensor map per expert weight for the wgmma walks (gate_up's, then down's): FP8 with DSERVE_MOE_FP8_WGMMA,
    // bf16 with DSERVE_MOE_BF16_WGMMA.
    Tensor maps;
    const CUtensorMap* gate_up_maps = nullptr;
    const CUtensorMap* down_maps = nullptr;
  };
  // Null when the experts are neither bf16 nor (native mode) block-FP8 [2I, d] / [d, I] with 16-byte aligned
  // data (the grouped kernels' input).
  const ExpertTable* expert_table(const std::vector<PreparedMlp>& experts, int64_t d, int64_t inter) {
    const size_t E = experts.size();
    ExpertTable& t = expert_tables_[&experts];
    bool same = t.host.size() == 2 * E;
    for (size_t e = 0; same && e < E; ++e)
      same = t.host[e] == experts[e].gate_up.weight.data() && t.host[E + e] == experts[e].down.weight.data();
    if (same) return t.dev.defined() ? &t : nullptr;
    t = ExpertTable{};
    const DType want = experts[0].gate_up.weight.dtype();
    const bool fp8 = want == DType::kF8E4M3;
    for (const PreparedMlp& m : experts) {
      const Tensor& gu = m.gate_up.weight;
      const Tensor& dn = m.down.weight;
      if ((want != DType::kBF16 && !fp8) || gu.dtype() != want || dn.dtype() != want ||
          gu.device() != Device::kCuda || dn.device() != Device::kCuda || gu.ndim() != 2 || dn.ndim() != 2 ||
          gu.dim(0) != 2 * inter || gu.dim(1) != d || dn.dim(0) != d || dn.dim(1) != inter ||
          ((reinterpret_cast<uintptr_t>(gu.data()) | reinterpret_cast<uintptr_t>(dn.data())) & 15) != 0)
        return nullptr;
      if (fp8 && !(fp8_ && fp8_->owns(m.gate_up) && fp8_->owns(m.down) &&
                   kernels::moe_fp8_gemm_supported(inter, d, true) && kernels::moe_fp8_gemm_supported(d, inter, false)))
        return nullptr;
    }
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    DS_CUDA_CHECK(cudaStreamIsCapturing(stream(), &capturing));
    DS_CHECK(capturing == cudaStreamCaptureStatusNone,
             "MoE expert table built during graph capture: run one eager step before capturing");
    const size_t slots = fp8 ? 4 * E : 2 * E;
    std::vector<const void*> all(slots, nullptr);
    t.ue8m0_gate_up = t.ue8m0_down = fp8;
    for (size_t e = 0; e < E; ++e) {
      all[e] = experts[e].gate_up.weight.data();
      all[E + e] = experts[e].down.weight.data();
      if (!fp8) continue;
      all[2 * E + e] = experts[e].gate_up.scale_inv.data();
      all[3 * E + e] = experts[e].down.scale_inv.data();
      t.ue8m0_gate_up = t.ue8m0_gate_up && fp8_->ue8m0_of(experts[e].gate_up);
      t.ue8m0_down = t.ue8m0_down && fp8_->ue8m0_of(experts[e].down);
    }
    t.dev = empty({static_cast<int64_t>(slots * sizeof(void*))}, DType::kU8);
    DS_CUDA_CHECK(cudaMemcpyAsync(t.dev.data(), all.data(), slots * sizeof(void*), cudaMemcpyHostToDevice, stream()));
    DS_CUDA_CHECK(cudaStreamSynchronize(stream()));  // `all` dies before a pageable copy would complete
    t.host.assign(all.begin(), all.begin() + 2 * E);
    t.gate_up = static_cast<const void* const*>(t.dev.data());
    t.down = t.gate_up + E;
    t.fp8 = fp8;
    if (fp8) {
      t.gate_up_scales = reinterpret_cast<const float* const*>(t.gate_up + 2 * E);
      t.down_scales = t.gate_up_scales + E;
    }
    if (fp8 ? wgmma_walk_ : bf16_wgmma_min_tokens_ > 0) {
      std::vector<CUtensorMap> maps(2 * E);
      const int64_t elem = fp8 ? 1 : 2;  // bytes an element
      if (kernels::make_moe_wgmma_maps(all.data(), static_cast<int>(E), 2 * inter, d * elem, maps.data()) &&
          kernels::make_moe_wgmma_maps(all.data() + E, static_cast<int>(E), d, inter * elem, maps.data() + E)) {
        t.maps = empty({static_cast<int64_t>(maps.size() * sizeof(CUtensorMap))}, DType::kU8);
        DS_CHECK((reinterpret_cast<uintptr_t>(t.maps.data()) & 63) == 0, "tensor maps need 64-byte alignment");
        DS_CUDA_CHECK(cudaMemcpyAsync(t.maps.data(), maps.data(), maps.size() * sizeof(CUtensorMap),
                                      cudaMemcpyHostToDevice, stream()));
        DS_CUDA_CHECK(cudaStreamSynchronize(stream()));
        t.gate_up_maps = static_cast<const CUtensorMap*>(t.maps.data());
        t.down_maps = t.gate_up_maps + E;
      } else {
        DS_WARN("MoE wgmma walk: no tensor maps for these experts; the mma.sync kernels run");
      }
    }
    return &t;
  }

  std::unordered_map<const std::vector<PreparedMlp>*, ExpertTable> expert_tables_;

  int device_ = 0;
  std::unique_ptr<CublasLtGemm> gemm_;
  int64_t small_m_max_ = kernels::kGemmSmallMMax;
  std::unique_ptr<Fp8Gemm> fp8_;  // null under DSERVE_FP8_NATIVE=0
  MoeFp8Tuning moe_fp8_tuning_;   // tokens up to which FP8 experts take the grouped kernels (eager steps)
  bool fallback_attention_ = false;
  bool grouped_moe_ = true;
  bool moe_fp8_segmented_ = false;
  bool fused_norm_ = false;
  bool vc_quant_ = false;
  bool fused_norm_wgmma_ = true;
  bool silu_quant_ = false;  // DSERVE_FP8_SILU_QUANT (linear_silu_q_for)
  bool fused_shared_ = false;
  bool open_moe_ = true;  // DSERVE_MOE_NORM_FUSED
  bool opening_ = false;  // inside moe_experts_open: combine() keeps its parameters in opened_
  bool wgmma_walk_ = true;        // DSERVE_MOE_FP8_WGMMA (see the constructor)
  int64_t bf16_wgmma_min_tokens_ = 1;  // DSERVE_MOE_BF16_WGMMA (see the constructor); 0: off
  int wgmma_stages_ = 0;          // DSERVE_MOE_WGMMA_STAGES (see the constructor)
  int walk_dynamic_ = -1;         // DSERVE_MOE_WALK_DYNAMIC (see the constructor): -1 by tokens, 0 never, 1 always
  static constexpr int64_t kWalkDynamicMinTokens = 8;
  Tensor walk_counters_;          // int [4]: a pair a stream (main, side)
  // The dynamic tiles' counter for a walk of T tokens on the current stream, or null (static tiles). Walks on one
  // stream run one after another, so a pair a stream suffices; a third stream would race one of them.
  int* walk_counter(int64_t T) {
    if (walk_dynamic_ == 0 || (walk_dynamic_ < 0 && T < kWalkDynamicMinTokens)) return nullptr;
    const bool side = stream() == cuda_side_stream();
    DS_CHECK(side || stream() == cuda_main_stream(), "MoE walk with dynamic tiles on a third stream");
    return walk_counters_.data_as<int32_t>() + (side ? 2 : 0);
  }
  bool fp8_walk_evict_first_ = true;    // DSERVE_MOE_WGMMA_EVICT_FIRST (see the constructor)
  bool bf16_walk_evict_first_ = false;
  int64_t walk_max_tokens_ = 256;       // DSERVE_MOE_WALK_MAX_TOKENS (see the constructor)
  // Whether the wgmma walks take a step of T tokens routed to N rows over E experts (walk_max_tokens_ and the rows an
  // expert of the dtype's walk).
  bool walk_takes(int64_t T, int64_t N, int E, bool fp8) const {
    const int64_t per_expert = fp8 ? fp8_walk_rows_per_expert_ : bf16_walk_rows_per_expert_;
    return T <= 16 || (T <= walk_max_tokens_ && N <= per_expert * static_cast<int64_t>(E));
  }
  int64_t fp8_walk_rows_per_expert_ = 32, bf16_walk_rows_per_expert_ = 8;  // see the constructor
  std::shared_ptr<const MoeParts> opened_;
  // The ids of the last moe_gate_route whose grouping follows them in memory (see permute); its grid counter.
  const void* fused_ids_ = nullptr;
  int fused_experts_ = 0;
  int64_t fused_entries_ = 0;
  Tensor ticket_;
  bool greedy_fast_ = true;  // DSERVE_SAMPLE_GREEDY_FAST
  bool join_fence_ = false;  // DSERVE_PDL_JOIN_FENCE
  static constexpr int64_t kGreedyMaxRows = kGreedyToStoreMaxRows;
  static_assert(kGreedyMaxRows >= kernels::kSampleGreedyMaxRows, "the counters serve both greedy launches");
  Tensor arrivals_;          // [kGreedyMaxRows] I32, zero between greedy launches
};

}  // namespace

std::unique_ptr<Ops> make_cuda_ops(int device_index) { return std::make_unique<CudaOps>(device_index); }

}  // namespace ds
