// Block-wise FP8 (DeepSeek's W8A8 format) reference semantics, shared by the loader (--quantization fp8),
// the CPU backend and the CUDA consistency tests: 128x128 weight blocks with one fp32 scale each, activations
// quantized per token per 128 channels, e4m3 values, optional power-of-two (ue8m0) scales.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/linear_weight.h"

namespace ds {

constexpr float kFp8ScaleFloor = 1e-4f;  // amax floor: s = max(amax, 1e-4) / 448

// The scale for a block with max |value| `amax`: amax / 448, or the next power of two up (ue8m0).
float fp8_block_scale(float amax, bool ue8m0);

// Block-quantizes a float weight [out, in] (any float dtype) to F8_E4M3 + F32 scale_inv
// [ceil(out / bn), ceil(in / bk)] (ragged edge blocks use their own scale).
LinearWeight quantize_weight_fp8(const Tensor& w, int block_n = 128, int block_k = 128, bool ue8m0 = false);

// Quantizes activations x [T, K] (F32) per token per `group` channels: q [T, K] F8_E4M3 and scales
// [T, ceil(K / group)] F32 with x ~= q * scale.
void quantize_activations_fp8(const Tensor& x, int group, bool ue8m0, Tensor* q, Tensor* scales);

// The W8A8 block GEMM's exact semantics in fp32: y[t, n] = sum over 128-deep K blocks kb of
// (sum_k qx[t, k] * qw[n, k]) * sx[t, kb] * sw[n / bn, kb]. x is F32 [T, K]; w must be block-FP8.
Tensor linear_w8a8_reference(const Tensor& x, const LinearWeight& w, bool ue8m0);
// The same GEMM on activations already quantized by quantize_activations_fp8 (qx [T, K] e4m3, sx [T, ceil(K/128)]).
Tensor linear_w8a8_quantized(const Tensor& qx, const Tensor& sx, const LinearWeight& w);

// Whether every scale is a positive power of two (a ue8m0 checkpoint: activations then get ue8m0 scales too).
// Host F32 tensor; false when empty.
bool fp8_scales_are_pow2(const Tensor& scales);

// Whether a gated MLP runs natively in block-FP8 (W8A8) when a backend's native FP8 mode is on: gate, up and
// down are e4m3 with 128x128 blocks, consistent shapes, and the hidden size is a multiple of 128 (each backend
// decides with this one predicate; others are dequantized).
bool fp8_mlp_is_native(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down);

// A native FP8 MLP as both backends prepare it: [gate; up] stacked into one [2 * Ip, d] linear and down
// [d, Ip], with the intermediate size padded to Ip = round_up(inter, 128) by zero rows / columns (new scale
// blocks 1.0), so the up half starts on a scale block. The result is exactly the unpadded MLP's: padded
// activations are silu(0) * 0 = 0 and leave every 128-group's amax unchanged. Host tensors.
struct Fp8Mlp {
  LinearWeight gate_up, down;
};
Fp8Mlp stack_mlp_fp8(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down);

// [a; b] stacked by rows with their scale grids (host block-FP8, a's rows a multiple of its block_n).
LinearWeight stack_rows_fp8(const LinearWeight& a, const LinearWeight& b);

// A host block-FP8 weight zero-padded to [rows, cols] (>= its shape); whole new scale blocks get 1.0.
LinearWeight pad_fp8(const LinearWeight& w, int64_t rows, int64_t cols);

// A host block-FP8 weight [n, k] of pseudo-random e4m3 bytes (xorshift from `seed`) that are never NaN (bit 3, the
// lowest exponent bit, cleared: the exponent field is never 15), every 128x128 block scale `scale`. Timing inputs
// for the tuners and benchmarks, where values do not matter but a NaN would.
LinearWeight random_e4m3_weight(int64_t n, int64_t k, uint64_t seed, float scale);

// Per-head block-FP8 weights for MLA's absorbed products (issue 7's FP8 BMM): w [H, N, K] e4m3 (each output's K
// values contiguous, as a linear's [out, in]) with scales [H, N / 128, K / 128] F32 (128x128 blocks, N and K
// multiples of 128), activations quantized per token per head per 128 channels (ue8m0: power-of-two scales).
struct HeadsFp8 {
  Tensor w;
  Tensor scale;
  bool ue8m0 = false;
  bool defined() const { return w.defined(); }
  int64_t heads() const { return w.dim(0); }
  int64_t out_features() const { return w.dim(1); }
  int64_t in_features() const { return w.dim(2); }
  // Head h as a linear [N, K] (views of w and scale).
  LinearWeight head(int64_t h) const;
};

// DSERVE_FP8_BMM=1: the absorbed W_UK / W_UV products run W8A8 (prepare_absorbed_fp8) where the backend runs FP8
// natively; opt-in on every backend alike (the CPU oracle follows the CUDA default), read at each prepare.
bool fp8_bmm_opted_in();

// kv_b_proj [H * (nope + v), lora] (block-FP8, 128x128) split for absorbed MLA: w_kc [H, lora, nope] (W_UK of
// each head transposed: q_nope [nope] -> latent [lora]) and w_vc [H, v, lora] (W_UV: latent -> v), the e4m3
// bytes and block scales exactly the checkpoint's (a 128x128 block of W_UK is a block of W_UK^T). False (nothing
// set) unless nope, v and lora are multiples of 128. Host tensors.
bool split_absorbed_fp8(const LinearWeight& kv_b, int64_t heads, int64_t nope, int64_t v, HeadsFp8* w_kc,
                        HeadsFp8* w_vc);

// The W8A8 semantics of the absorbed products: out[t, h, :] = linear_w8a8_reference(x[t, h, :], w.head(h),
// w.ue8m0). x F32 [T, H, K] -> F32 [T, H, N].
Tensor bmm_heads_w8a8_reference(const Tensor& x, const HeadsFp8& w);

// Rounds a latent cache row the way the FP8 KV cache stores it (FlashMLA layout): the first `nope` values
// as e4m3 with one scale per 128 (or ue8m0), the rest (the rope part) as bf16. In place on F32 rows [T, D].
void fp8_kv_round_trip(Tensor& rows, int64_t nope, bool ue8m0);

}  // namespace ds
