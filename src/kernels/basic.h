// Memory-bound helper kernels of the CUDA backend (bf16 activations, fp32 math): fills, dtype conversion
// and block-FP8 dequantisation, embedding gather, elementwise add, SiLU-and-mul, strided column copies,
// row gathers, LayerNorm, log-softmax, and the kv_b_proj split for absorbed attention.
// Raw pointers + POD parameters; no allocation. Each launcher returns the launch error.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Element types the kernels understand (a subset of core/dtype.h, which the kernels do not include).
enum class ElemType : int { kF32, kBF16, kF16, kF8E4M3, kF8E5M2, kI32 };

// After a stream waits on an event (two streams joining), its next kernel must not be a programmatic dependent
// launch (pdl.cuh): that would order it after the stream's previous kernel only, not after the waited-for work.
// The next launch_pdl on `stream` from this thread is a plain launch.
void pdl_fence(cudaStream_t stream);

cudaError_t launch_fill_u16(void* p, int64_t n_halves, uint16_t value, cudaStream_t stream);
cudaError_t launch_fill_f32(void* p, int64_t n, float value, cudaStream_t stream);
cudaError_t launch_fill_bf16(void* p, int64_t n, float value, cudaStream_t stream);

// out[i, j] (bf16 or f32 as out_type) = float(in[i, j]) * (scale ? scale[i / block_n][j / block_k] : 1).
struct ConvertParams {
  const void* in;
  ElemType in_type;
  void* out;
  ElemType out_type;  // kBF16 or kF32
  const float* scale;  // [ceil(rows / block_n), scale_cols] or null
  int64_t rows, cols;
  int64_t scale_cols;
  int block_n, block_k;
};
cudaError_t launch_convert(const ConvertParams& p, cudaStream_t stream);

// out[t, :] = table[ids[t], :] (table bf16 or f32, out bf16); an id outside [0, vocab) yields NaN.
struct EmbeddingParams {
  const void* table;
  ElemType table_type;
  const int32_t* ids;
  void* out;
  int64_t tokens, vocab, dim;
};
cudaError_t launch_embedding(const EmbeddingParams& p, cudaStream_t stream);

// ids[i] < 0 -> store[-ids[i] - 1] in place (overlap scheduling: the token a step still in flight sampled).
cudaError_t launch_resolve_tokens(int32_t* ids, const int32_t* store, int64_t n, cudaStream_t stream);

// acc[i] += x[i], both of `type` (bf16 or f32); math in fp32.
cudaError_t launch_add_inplace(void* acc, const void* x, ElemType type, int64_t n, cudaStream_t stream);

// acc[i] = bf16(float(acc[i]) + x[i]): a bf16 sum with an fp32 partial, rounded once.
cudaError_t launch_add_f32_to_bf16(void* acc, const float* x, int64_t n, cudaStream_t stream);

// out[r, i] = silu(gu[r, i]) * gu[r, inter + i], bf16.
cudaError_t launch_silu_mul(const void* gate_up, void* out, int64_t rows, int64_t inter, cudaStream_t stream);

// out[r, out_col0 + c] = in[r, in_col0 + c] for c < cols, elements of `elem_bytes` bytes; row strides in
// elements. Covers concat, slice and the per-head views of attention.
struct CopyColsParams {
  const void* in;
  void* out;
  int64_t rows, cols;
  int64_t in_stride, out_stride;
  int64_t in_col0, out_col0;
  int elem_bytes;
};
cudaError_t launch_copy_cols(const CopyColsParams& p, cudaStream_t stream);

// y = (x - mean) / sqrt(var + eps) * w + b per row; x/out bf16, w and b bf16 or f32 (param_type).
struct LayerNormParams {
  const void* x;
  const void* w;
  const void* b;
  ElemType param_type;
  void* out;
  int64_t rows, n;
  float eps;
};
cudaError_t launch_layer_norm(const LayerNormParams& p, cudaStream_t stream);

// out[r, :] = logits[r, :] - logsumexp(logits[r, :]) in fp32; logits bf16 or f32. One block per row.
cudaError_t launch_log_softmax(const void* logits, ElemType type, float* out, int64_t rows, int64_t n,
                               cudaStream_t stream);
// The same split over blocks of 2048 logits (every row's vocab spread over the GPU): per-block max / sum
// of exp into `scratch` (log_softmax_scratch_floats(rows, n) floats, 8-byte aligned), then a second kernel
// combines them and writes. Reads the logits twice (the first time once per element).
int64_t log_softmax_scratch_floats(int64_t rows, int64_t n);
cudaError_t launch_log_softmax_split(const void* logits, ElemType type, float* out, float* scratch, int64_t rows,
                                     int64_t n, cudaStream_t stream);

// kv_b [H * (nope + v), lora] bf16 -> w_kc [H, nope, lora] (rows as they are) and w_vc [H, lora, v]
// (the v rows transposed).
struct AbsorbSplitParams {
  const void* kv_b;
  void* w_kc;
  void* w_vc;
  int64_t heads, nope, v, lora;
};
cudaError_t launch_absorb_split(const AbsorbSplitParams& p, cudaStream_t stream);

}  // namespace ds::kernels
