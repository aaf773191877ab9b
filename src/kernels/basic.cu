// Memory-bound helper kernels (see basic.h). Simple grid-stride or row-per-block loops; copies use 16-byte
// accesses when every address and stride allows it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/env.h"
#include "kernels/basic.h"
#include "kernels/block_reduce.cuh"
#include "kernels/pdl.cuh"
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ds::kernels {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

__device__ __forceinline__ float load_elem(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF32: return static_cast<const float*>(p)[i];
    case ElemType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ElemType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::kF8E4M3: return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
    case ElemType::kF8E5M2: return static_cast<float>(static_cast<const __nv_fp8_e5m2*>(p)[i]);
    default: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
}

__global__ void fill_u16_kernel(uint16_t* p, int64_t n, uint16_t v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) p[i] = v;
}
__global__ void fill_f32_kernel(float* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) p[i] = v;
}

__global__ void convert_kernel(ConvertParams p) {
  const int64_t n = p.rows * p.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = load_elem(p.in, p.in_type, i);
    if (p.scale) {
      const int64_t r = i / p.cols, c = i % p.cols;
      v *= p.scale[(r / p.block_n) * p.scale_cols + c / p.block_k];
    }
    if (p.out_type == ElemType::kF32)
      static_cast<float*>(p.out)[i] = v;
    else
      static_cast<__nv_bfloat16*>(p.out)[i] = __float2bfloat16(v);
  }
}

__global__ void embedding_kernel(EmbeddingParams p) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t id = p.ids[t];
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + t * p.dim;
  const bool ok = id >= 0 && id < p.vocab;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x)
    out[i] = ok ? __float2bfloat16(load_elem(p.table, p.table_type, int64_t(id) * p.dim + i)) : __float2bfloat16(NAN);
}

// A bf16 table row in 16-byte pieces, up to four loads of each thread in flight before its stores (the scalar loop's
// load-store pairs were one dependent L2/DRAM round trip each: ~5 us for V2-Lite's 2048 columns at the head of every
// decode step).
__global__ void embedding_vec_kernel(EmbeddingParams p) {
  constexpr int kInFlight = 4;
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t id = p.ids[t];
  const bool ok = id >= 0 && id < p.vocab;
  const int64_t n = p.dim / 8;
  const uint4* __restrict__ src = static_cast<const uint4*>(p.table) + (ok ? static_cast<int64_t>(id) * n : 0);
  uint4* __restrict__ dst = static_cast<uint4*>(p.out) + t * n;
  const uint4 nan8 = make_uint4(0x7fff7fffu, 0x7fff7fffu, 0x7fff7fffu, 0x7fff7fffu);  // __float2bfloat16(NAN) x 8
  for (int64_t i0 = threadIdx.x; i0 < n; i0 += kInFlight * static_cast<int64_t>(blockDim.x)) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
      v[u] = i < n && ok ? src[i] : nan8;
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
      if (i < n) dst[i] = v[u];
    }
  }
}

__global__ void resolve_tokens_kernel(int32_t* ids, const int32_t* store, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if (ids[i] < 0) ids[i] = store[-static_cast<int64_t>(ids[i]) - 1];
}

template <class T>
__global__ void add_kernel(T* acc, const T* x, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 4)
      acc[i] += x[i];
    else
      acc[i] = __float2bfloat16(__bfloat162float(acc[i]) + __bfloat162float(x[i]));
  }
}

__global__ void add_f32_to_bf16_kernel(__nv_bfloat16* acc, const float* x, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] = __float2bfloat16(__bfloat162float(acc[i]) + x[i]);
}

__global__ void silu_mul_kernel(const __nv_bfloat16* gu, __nv_bfloat16* out, int64_t rows, int64_t inter) {
  pdl_enter();
  const int64_t n = rows * inter;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter, c = i % inter;
    const float g = __bfloat162float(gu[r * 2 * inter + c]);
    const float u = __bfloat162float(gu[r * 2 * inter + inter + c]);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

// 8 outputs per thread (16-byte loads of gate and up, one 16-byte store): inter % 8 == 0, aligned data.
__global__ void silu_mul_vec_kernel(const uint4* gu, uint4* out, int64_t rows, int64_t inter8) {
  pdl_enter();
  const int64_t n = rows * inter8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter8, c = i % inter8;
    const uint4 gv = gu[r * 2 * inter8 + c], uv = gu[r * 2 * inter8 + inter8 + c];
    const __nv_bfloat16* g8 = reinterpret_cast<const __nv_bfloat16*>(&gv);
    const __nv_bfloat16* u8 = reinterpret_cast<const __nv_bfloat16*>(&uv);
    uint4 o;
    __nv_bfloat16* o8 = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float g = __bfloat162float(g8[j]), u = __bfloat162float(u8[j]);
      o8[j] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
    out[i] = o;
  }
}

// Copies `cols` units of type U per row (U = the widest type that divides every offset).
template <class U>
__global__ void copy_cols_kernel(const U* in, U* out, int64_t rows, int64_t cols, int64_t in_stride,
                                 int64_t out_stride) {
  pdl_enter();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[r * out_stride + c] = in[r * in_stride + c];
  }
}

template <class U>
cudaError_t copy_cols_as(const CopyColsParams& p, int64_t unit, cudaStream_t stream) {
  const int64_t eb = p.elem_bytes;
  const U* in = reinterpret_cast<const U*>(static_cast<const char*>(p.in) + p.in_col0 * eb);
  U* out = reinterpret_cast<U*>(static_cast<char*>(p.out) + p.out_col0 * eb);
  const int64_t cols = p.cols * eb / unit;
  return launch_pdl(copy_cols_kernel<U>, grid_for(p.rows * cols), kThreads, 0, stream, in, out, p.rows, cols,
                    p.in_stride * eb / unit, p.out_stride * eb / unit);
}

__global__ void layer_norm_kernel(LayerNormParams p) {
  __shared__ float scratch[33];
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + row * p.n;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + row * p.n;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += __bfloat162float(x[i]);
  const float mean = block_sum(s, scratch) / static_cast<float>(p.n);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    const float d = __bfloat162float(x[i]) - mean;
    v += d * d;
  }
  const float inv = rsqrtf(block_sum(v, scratch) / static_cast<float>(p.n) + p.eps);
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x)
    out[i] = __float2bfloat16((__bfloat162float(x[i]) - mean) * inv * load_elem(p.w, p.param_type, i) +
                              load_elem(p.b, p.param_type, i));
}

__global__ void log_softmax_kernel(const void* logits, ElemType type, float* out, int64_t n) {
  __shared__ float scratch[33];
  const int64_t row = blockIdx.x;
  const int64_t base = row * n;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, load_elem(logits, type, base + i));
  mx = block_max(mx, scratch);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(load_elem(logits, type, base + i) - mx);
  const float lse = mx + logf(block_sum(s, scratch));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[base + i] = load_elem(logits, type, base + i) - lse;
}

constexpr int kLsThreads = 256;
constexpr int kLsPerThread = 8;
constexpr int64_t kLsChunk = kLsThreads * kLsPerThread;  // logits per block of the split log-softmax

// Split log-softmax, pass 1: block (row, chunk) keeps its chunk in registers and writes the chunk's max m and
// sum of exp(x - m) (-inf logits add 0, so a chunk of only -inf gives (-inf, 0); NaN propagates).
__global__ void __launch_bounds__(kLsThreads) log_softmax_stats_kernel(const void* logits, ElemType type,
                                                                     float2* part, int64_t n, int64_t chunks) {
  __shared__ float scratch[33];
  const int64_t row = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const int64_t base = row * n, first = c * kLsChunk;
  float v[kLsPerThread];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kLsPerThread; ++j) {
    const int64_t i = first + j * kLsThreads + threadIdx.x;
    v[j] = i < n ? load_elem(logits, type, base + i) : -INFINITY;
    mx = fmaxf(mx, v[j]);
  }
  mx = block_max(mx, scratch);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kLsPerThread; ++j) s += v[j] == -INFINITY ? 0.0f : expf(v[j] - mx);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) part[blockIdx.x] = make_float2(mx, s);
}

// Pass 2: block (row, chunk) combines the row's partials into logsumexp and writes its chunk.
__global__ void __launch_bounds__(kLsThreads) log_softmax_out_kernel(const void* logits, ElemType type,
                                                                   const float2* part, float* out, int64_t n,
                                                                   int64_t chunks) {
  __shared__ float scratch[33];
  const int64_t row = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const float2* pr = part + row * chunks;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < chunks; j += kLsThreads) mx = fmaxf(mx, pr[j].x);
  mx = block_max(mx, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < chunks; j += kLsThreads) {
    const float2 q = pr[j];
    s += q.y == 0.0f ? 0.0f : q.y * expf(q.x - mx);
  }
  const float lse = mx + logf(block_sum(s, scratch));
  const int64_t base = row * n, first = c * kLsChunk;
#pragma unroll
  for (int j = 0; j < kLsPerThread; ++j) {
    const int64_t i = first + j * kLsThreads + threadIdx.x;
    if (i < n) out[base + i] = load_elem(logits, type, base + i) - lse;
  }
}

__global__ void absorb_split_kernel(AbsorbSplitParams p) {
  const int64_t per_head = p.nope + p.v;
  const int64_t n = p.heads * per_head * p.lora;
  const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.kv_b);
  __nv_bfloat16* kc = static_cast<__nv_bfloat16*>(p.w_kc);
  __nv_bfloat16* vc = static_cast<__nv_bfloat16*>(p.w_vc);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.lora, c = i % p.lora;
    const int64_t h = r / per_head, rr = r % per_head;
    if (rr < p.nope)
      kc[(h * p.nope + rr) * p.lora + c] = src[i];
    else
      vc[(h * p.lora + c) * p.v + (rr - p.nope)] = src[i];
  }
}

}  // namespace

bool pdl_enabled() {
  static const bool on = env_flag("DSERVE_PDL", true);
  return on;
}

bool pdl_early(bool auto_default) { return env_flag("DSERVE_PDL_EARLY", auto_default); }

bool launch_twice(const void* kernel) {
  static const char* const list = env_text("DSERVE_DUP_KERNELS");
  if (!list) return false;
  // The decision per kernel, cached (a few dozen kernels run in a forward).
  static std::mutex mu;
  static std::vector<std::pair<const void*, bool>> seen;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, dup] : seen)
    if (k == kernel) return dup;
  const char* name = nullptr;
  bool dup = false;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name) {
    const std::string n(name), l(list);
    for (size_t b = 0; b <= l.size();) {
      size_t e = l.find(',', b);
      if (e == std::string::npos) e = l.size();
      if (e > b && n.find(l.substr(b, e - b)) != std::string::npos) dup = true;
      b = e + 1;
    }
    if (dup) std::fprintf(stderr, "DSERVE_DUP_KERNELS: launching %s twice\n", name);
  }
  seen.emplace_back(kernel, dup);
  return dup;
}

int device_sm_count() {
  static const int n = [] {
    int dev = 0, count = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132;  // the H100's, where the query fails
    return count;
  }();
  return n;
}

namespace {
thread_local cudaStream_t t_fenced[4] = {};  // streams whose next launch_pdl is plain (few streams per thread)
}  // namespace

void pdl_fence(cudaStream_t stream) {
  for (cudaStream_t& f : t_fenced)
    if (f == stream) return;
  for (cudaStream_t& f : t_fenced)
    if (!f) {
      f = stream;
      return;
    }
  t_fenced[0] = stream;  // more than 4 fenced streams: never the case (compute + side stream)
}

bool pdl_take_fence(cudaStream_t stream) {
  for (cudaStream_t& f : t_fenced)
    if (f && f == stream) {
      f = nullptr;
      return true;
    }
  return false;
}

cudaError_t launch_fill_u16(void* p, int64_t n, uint16_t value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_plain(fill_u16_kernel, grid_for(n), kThreads, 0, stream, static_cast<uint16_t*>(p), n, value);
}

cudaError_t launch_fill_f32(void* p, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch_plain(fill_f32_kernel, grid_for(n), kThreads, 0, stream, static_cast<float*>(p), n, value);
}

cudaError_t launch_fill_bf16(void* p, int64_t n, float value, cudaStream_t stream) {
  const __nv_bfloat16 b = __float2bfloat16(value);
  uint16_t bits;
  memcpy(&bits, &b, 2);
  return launch_fill_u16(p, n, bits, stream);
}

cudaError_t launch_convert(const ConvertParams& p, cudaStream_t stream) {
  if (p.rows * p.cols == 0) return cudaSuccess;
  return launch_plain(convert_kernel, grid_for(p.rows * p.cols), kThreads, 0, stream, p);
}

cudaError_t launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.table_type == ElemType::kBF16 && p.dim % 8 == 0 &&
      ((reinterpret_cast<uintptr_t>(p.table) | reinterpret_cast<uintptr_t>(p.out)) & 15) == 0)
    return launch_pdl(embedding_vec_kernel, static_cast<unsigned>(p.tokens), kThreads, 0, stream, p);
  return launch_pdl(embedding_kernel, static_cast<unsigned>(p.tokens), kThreads, 0, stream, p);
}

cudaError_t launch_resolve_tokens(int32_t* ids, const int32_t* store, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_pdl(resolve_tokens_kernel, grid_for(n), kThreads, 0, stream, ids, store, n);
}

cudaError_t launch_add_inplace(void* acc, const void* x, ElemType type, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (type == ElemType::kF32)
    return launch_pdl(add_kernel<float>, grid_for(n), kThreads, 0, stream, static_cast<float*>(acc),
                      static_cast<const float*>(x), n);
  return launch_pdl(add_kernel<__nv_bfloat16>, grid_for(n), kThreads, 0, stream, static_cast<__nv_bfloat16*>(acc),
                    static_cast<const __nv_bfloat16*>(x), n);
}

cudaError_t launch_add_f32_to_bf16(void* acc, const float* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_pdl(add_f32_to_bf16_kernel, grid_for(n), kThreads, 0, stream, static_cast<__nv_bfloat16*>(acc), x, n);
}

cudaError_t launch_silu_mul(const void* gate_up, void* out, int64_t rows, int64_t inter, cudaStream_t stream) {
  if (rows * inter == 0) return cudaSuccess;
  if (inter % 8 == 0 && ((reinterpret_cast<uintptr_t>(gate_up) | reinterpret_cast<uintptr_t>(out)) & 15) == 0) {
    return launch_pdl(silu_mul_vec_kernel, grid_for(rows * inter / 8), kThreads, 0, stream,
                      static_cast<const uint4*>(gate_up), static_cast<uint4*>(out), rows, inter / 8);
  }
  return launch_pdl(silu_mul_kernel, grid_for(rows * inter), kThreads, 0, stream,
                    static_cast<const __nv_bfloat16*>(gate_up), static_cast<__nv_bfloat16*>(out), rows, inter);
}

cudaError_t launch_copy_cols(const CopyColsParams& p, cudaStream_t stream) {
  if (p.rows * p.cols == 0) return cudaSuccess;
  const int64_t eb = p.elem_bytes;
  auto fits = [&](int64_t unit) {
    const auto in = reinterpret_cast<uintptr_t>(static_cast<const char*>(p.in) + p.in_col0 * eb);
    const auto out = reinterpret_cast<uintptr_t>(static_cast<char*>(p.out) + p.out_col0 * eb);
    return in % unit == 0 && out % unit == 0 && (p.cols * eb) % unit == 0 && (p.in_stride * eb) % unit == 0 &&
           (p.out_stride * eb) % unit == 0;
  };
  if (fits(16)) return copy_cols_as<uint4>(p, 16, stream);
  if (fits(4)) return copy_cols_as<uint32_t>(p, 4, stream);
  if (fits(2)) return copy_cols_as<uint16_t>(p, 2, stream);
  return copy_cols_as<uint8_t>(p, 1, stream);
}

cudaError_t launch_layer_norm(const LayerNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  return launch_plain(layer_norm_kernel, static_cast<unsigned>(p.rows), kThreads, 0, stream, p);
}

cudaError_t launch_log_softmax(const void* logits, ElemType type, float* out, int64_t rows, int64_t n,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return launch_plain(log_softmax_kernel, static_cast<unsigned>(rows), 1024, 0, stream, logits, type, out, n);
}

int64_t log_softmax_scratch_floats(int64_t rows, int64_t n) { return 2 * rows * ((n + kLsChunk - 1) / kLsChunk); }

cudaError_t launch_log_softmax_split(const void* logits, ElemType type, float* out, float* scratch, int64_t rows,
                                     int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  const int64_t chunks = (n + kLsChunk - 1) / kLsChunk;
  if (rows * chunks >= (int64_t{1} << 31) || (reinterpret_cast<uintptr_t>(scratch) & 7) != 0)
    return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows * chunks);
  float2* part = reinterpret_cast<float2*>(scratch);
  if (const cudaError_t e = launch_plain(log_softmax_stats_kernel, grid, kLsThreads, 0, stream, logits, type, part, n,
                                         chunks);
      e != cudaSuccess)
    return e;
  return launch_plain(log_softmax_out_kernel, grid, kLsThreads, 0, stream, logits, type, part, out, n, chunks);
}

cudaError_t launch_absorb_split(const AbsorbSplitParams& p, cudaStream_t stream) {
  const int64_t n = p.heads * (p.nope + p.v) * p.lora;
  if (n == 0) return cudaSuccess;
  return launch_plain(absorb_split_kernel, grid_for(n), kThreads, 0, stream, p);
}

}  // namespace ds::kernels
