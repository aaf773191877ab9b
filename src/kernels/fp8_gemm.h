// Block-FP8 (DeepSeek W8A8) kernels: per-token-per-128 activation quantization and the small-M (decode)
// block-scaled GEMM on tensor cores (mma.sync e4m3, fp32 accumulation, bf16 out). Semantics are
// ops/fp8.h's reference (quantize_activations_fp8, linear_w8a8_reference). Raw pointers, no allocation.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// q[m, k] = e4m3(x[m, k] / s[m, k / 128]) with s = max(amax, 1e-4) / 448 (ue8m0: next power of two up),
// for k < K; columns K..Kp of q are zero (Kp % 128 == 0, Kp >= K; the padded groups get the floor scale).
// Scales go to s[g * s_ld + m] when s_m_major (cuBLASLt VEC128 layout), else s[m * s_ld + g].
struct Fp8QuantParams {
  const void* x;  // [M, K] row stride ldx, bf16 (x_f32 = false) or f32
  bool x_f32 = false;
  int64_t ldx = 0;
  int64_t M = 0, K = 0, Kp = 0;
  uint8_t* q = nullptr;  // [M, Kp] row stride Kp
  float* s = nullptr;
  int64_t s_ld = 0;
  bool s_m_major = false;
  bool ue8m0 = false;
  // > M: rows [M, M_pad) are written too, as zero tokens (q 0, a finite scale), so cuBLASLt's pad rows need no memsets.
  int64_t M_pad = 0;
  // silu: x (bf16) holds a gated MLP's gate at [0, K) and its up at [up_off, up_off + K) of each row, and the values
  // quantized are silu_mul's (basic.h: silu(gate) * up rounded to bf16), also stored to silu_out ([M, K] bf16, row
  // stride K) when set: one launch for the SiLU-mul and the down's quantization. K % 128 == 0 (Kp == K), no pad
  // rows, 8-byte aligned rows.
  bool silu = false;
  int64_t up_off = 0;
  void* silu_out = nullptr;
};
cudaError_t launch_fp8_quant_act(const Fp8QuantParams& p, cudaStream_t stream);
// Whether p (silu set) takes the SiLU input mode: the conditions above.
bool fp8_quant_act_silu_supported(const Fp8QuantParams& p);
// The token-major quantization of rows x [M, K] (row stride ldx; bf16, or f32 with x_f32) into q [M, Kp] (row stride
// Kp, zeros past K) and scales s [M, Kp / 128]: the layout the small-M kernel, the wgmma GEMM and the MoE walks read.
inline Fp8QuantParams fp8_quant_rows_params(const void* x, bool x_f32, int64_t ldx, int64_t M, int64_t K, int64_t Kp,
                                            uint8_t* q, float* s, bool ue8m0) {
  Fp8QuantParams p;
  p.x = x;
  p.x_f32 = x_f32;
  p.ldx = ldx;
  p.M = M;
  p.K = K;
  p.Kp = Kp;
  p.q = q;
  p.s = s;
  p.s_ld = Kp / 128;
  p.s_m_major = false;
  p.ue8m0 = ue8m0;
  return p;
}
// The SiLU mode's parameters for gate|up rows [M, ldx] (gate at [0, inter), up at [inter, 2 inter)) into q [M, inter]
// and token-major scales [M, inter / 128], silu_mul's output to silu_out (or null).
inline Fp8QuantParams fp8_silu_quant_params(const void* gate_up, int64_t ldx, int64_t M, int64_t inter, uint8_t* q,
                                            float* s, bool ue8m0, void* silu_out) {
  Fp8QuantParams p = fp8_quant_rows_params(gate_up, false, ldx, M, inter, inter, q, s, ue8m0);
  p.silu = true;
  p.up_off = inter;
  p.silu_out = silu_out;
  return p;
}

// d[m, n] (bf16, n < N, m < M) = sum over kb of (sum_k q[m, k] w[n, k]) * sx[m * sx_ld + kb] * sw[n / 128, kb]
// with q, sx from launch_fp8_quant_act (s_m_major = false). w is e4m3 [Np, Kp] row-major with Np % 128 == 0,
// Kp % 128 == 0 (zero padding), sw fp32 [Np / 128, Kp / 128]. M <= 64. 16-byte aligned q and w.
struct Fp8GemmSmallMParams {
  const uint8_t* q = nullptr;
  const float* sx = nullptr;
  int64_t sx_ld = 0;
  const uint8_t* w = nullptr;
  const float* sw = nullptr;
  void* d = nullptr;  // bf16 [M, ldd]
  int64_t ldd = 0;
  int64_t M = 0, N = 0, Np = 0, Kp = 0;
  // In-kernel quantization (fp8_gemm_small_m_supported says when): x bf16 [M, ldx] with K real columns
  // is quantized by the GEMM itself, bit for bit as launch_fp8_quant_act would (q and sx unused). M <= 8,
  // K % 4 == 0, ldx % 4 == 0, x 8-byte aligned.
  const void* x = nullptr;
  int64_t ldx = 0, K = 0;
  bool ue8m0 = false;
  // Gated: w stacks gate rows [0, up_row) and up rows [up_row, ...) (up_row % 128 == 0) and d[m, n] =
  // silu(gate[m, n]) * up[m, n] in fp32, rounded once, for n < N <= up_row.
  bool silu = false;
  int64_t up_row = 0;
  // L2 prefetch of the CTA's weights before the PDL wait: its whole 16-row slice (kAll) or only the two blocks
  // each warp loads first (kFirst). kAuto: kAll when the grid has no more CTAs than the GPU has SMs, else kFirst.
  // Measured on the H100 (dserve_fp8_gemm_bench, 2026-11-26, BENCHMARKS.md): the whole slice wins only on grids
  // of about one CTA an SM (V3 q_a_kv_a, 132 CTAs: 11.4 vs 14.0 us at M = 1); on larger grids it evicts lines
  // before they are read (V3 o_proj, 448 CTAs: 53.7 vs 46.3 us; dense gate|up 106 vs 92 us). The launcher's
  // DSERVE_FP8_PREFETCH=all|first overrides kAuto.
  enum class Prefetch : uint8_t { kAuto, kAll, kFirst };
  Prefetch prefetch = Prefetch::kAuto;
  bool prefetch_first = false;  // resolved by the launcher from `prefetch`; set by callers has no effect
  // Row stride of q (0: Kp; else a multiple of 16 >= Kp), and batching (the per-head products of absorbed MLA):
  // `batch` problems of the same shape in one launch, problem b's q, sx, w, sw and d offset by b * batch_q,
  // batch_sx, batch_w, batch_sw, batch_d elements (batch_q, batch_w multiples of 16). Not with x or silu.
  int64_t ldq = 0;
  int batch = 1;
  int64_t batch_q = 0, batch_sx = 0, batch_w = 0, batch_sw = 0, batch_d = 0;
};
constexpr int64_t kFp8SmallMMax = 64;

// dst [cols, rows] = transpose of src [rows, cols], both bf16, contiguous (cuBLASLt's column-major FP8 output).
struct TransposeBf16Params {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t rows = 0, cols = 0;
};
cudaError_t launch_transpose_bf16(const TransposeBf16Params& p, cudaStream_t stream);
cudaError_t launch_fp8_gemm_small_m(const Fp8GemmSmallMParams& p, cudaStream_t stream);
// Whether p (with x and/or silu set) can run: the layout conditions above.
bool fp8_gemm_small_m_supported(const Fp8GemmSmallMParams& p);
// Two problems of the same M and kind (both quantized in the kernel or both not, neither gated) in one launch.
cudaError_t launch_fp8_gemm_small_m_pair(const Fp8GemmSmallMParams& a, const Fp8GemmSmallMParams& b,
                                         cudaStream_t stream);

}  // namespace ds::kernels
