// MLA prefill attention kernels (see mla_prefill.h). The tensor-core kernel is flash-attention style: one
// block of 4 warps per (64 query tokens, head, sequence); each warp owns 16 query rows with Q (192 dims) in
// registers, streams 64-key tiles of K = [k_nope from kv | shared rope key from ctx] and V through
// double-buffered, XOR-swizzled shared memory (cp.async), and keeps an fp32 online softmax; S = Q K^T and
// O += P V run on mma.sync m16n8k16 with P taken straight from the S accumulators.
#include <cuda_bf16.h>

#include "kernels/mla_merge.cuh"
#include "kernels/mla_prefill.h"
#include "kernels/mla_prefill_rows.cuh"
#include "kernels/per_device.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kThreads = 128;
constexpr int kBq = 64;  // query rows per block
constexpr int kBk = 64;  // keys per tile
constexpr int kNope = 128, kRope = 64, kQk = 192, kV = 128;
constexpr int kKChunks = kQk / 8;  // 16-byte chunks per K (and Q) row: 24
constexpr int kVChunks = kV / 8;   // 16
constexpr int kKRowBytes = kQk * 2;
constexpr int kVRowBytes = kV * 2;
constexpr int kSmemQ = 0;
constexpr int kSmemK = kBq * kKRowBytes;                  // two K tiles
constexpr int kSmemV = kSmemK + 2 * kBk * kKRowBytes;     // two V tiles
constexpr int kSmemBytes = kSmemV + 2 * kBk * kVRowBytes;  // 104 KB: two blocks per multiprocessor
constexpr float kLog2e = 1.4426950408889634f;

// Chunk c of row r with the low three chunk bits XORed by r % 8: the 8 rows an ldmatrix reads hit 8
// different 16-byte bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c, int row_bytes) {
  return r * row_bytes + (((c & ~7) | ((c ^ r) & 7)) << 4);
}
// d += a b for one m16n8k16 tile (a: 4 regs of bf16x2, b: 2 regs).

// First context row of sequence `seq` in kv/ctx: the sum of the earlier sequences' lengths.
__device__ int64_t context_base(const int32_t* seq_lens, int seq) {
  __shared__ int64_t base_sh;
  if (threadIdx.x == 0) {
    int64_t b = 0;
    for (int s = 0; s < seq; ++s) b += seq_lens[s];
    base_sh = b;
  }
  __syncthreads();
  return base_sh;
}

__device__ __forceinline__ bool allowed(const MlaPrefillParams& p, int t, int j) {
  return p.allow == nullptr || ((p.allow[static_cast<int64_t>(t) * p.allow_words + (j >> 5)] >> (j & 31)) & 1u);
}

__global__ void __launch_bounds__(kThreads) mla_prefill_kernel(const MlaPrefillParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int qt = blockIdx.x, h = blockIdx.y, seq = blockIdx.z;
  const int q0 = p.q_starts[seq];
  const int qn = p.q_starts[seq + 1] - q0;
  if (qt * kBq >= qn) return;  // block-uniform
  const int64_t cb = context_base(p.seq_lens, seq);
  const int seq_len = p.seq_lens[seq];
  const int H = p.num_heads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row_first = qt * kBq;
  const int kv_end = min(seq_len, p.positions[q0 + min(row_first + kBq - 1, qn - 1)] + 1);
  const int n_kt = (max(kv_end, 0) + kBk - 1) / kBk;

  const uint32_t sb = smem_u32(smem);
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q);
  const __nv_bfloat16* kv = static_cast<const __nv_bfloat16*>(p.kv);
  const __nv_bfloat16* ctx = static_cast<const __nv_bfloat16*>(p.ctx);

  // Q rows (zero-filled past the sequence's tokens).
  for (int idx = tid; idx < kBq * kKChunks; idx += kThreads) {
    const int r = idx / kKChunks, c = idx % kKChunks;
    const bool ok = row_first + r < qn;
    const __nv_bfloat16* src = ok ? q + (static_cast<int64_t>(q0 + row_first + r) * H + h) * kQk + c * 8 : q;
    cp_async16(sb + kSmemQ + swz(r, c, kKRowBytes), src, ok);
  }
  // One 64-key tile: K = [k_nope | rope key] and V, zero rows past the block's context end.
  auto load_tile = [&](int kt, int buf) {
    const uint32_t dk = sb + kSmemK + buf * kBk * kKRowBytes;
    const uint32_t dv = sb + kSmemV + buf * kBk * kVRowBytes;
    for (int idx = tid; idx < kBk * (kKChunks + kVChunks); idx += kThreads) {
      const int r = idx / (kKChunks + kVChunks), c = idx % (kKChunks + kVChunks);
      const int j = kt * kBk + r;
      const bool ok = j < kv_end;
      const int64_t row = cb + (ok ? j : 0);
      const __nv_bfloat16* kvrow = kv + (row * H + h) * (kNope + kV);
      if (c < kNope / 8) {
        cp_async16(dk + swz(r, c, kKRowBytes), ok ? kvrow + c * 8 : kv, ok);
      } else if (c < kKChunks) {
        cp_async16(dk + swz(r, c, kKRowBytes), ok ? ctx + row * p.ctx_dim + p.rope_offset + (c - 16) * 8 : ctx, ok);
      } else {
        const int cv = c - kKChunks;
        cp_async16(dv + swz(r, cv, kVRowBytes), ok ? kvrow + kNope + cv * 8 : kv, ok);
      }
    }
  };

  const int ra = 16 * warp + (lane >> 2), rb = ra + 8;  // this thread's two rows
  const int ta = q0 + row_first + ra, tb = q0 + row_first + rb;
  const int pos_a = row_first + ra < qn ? p.positions[ta] : -1;
  const int pos_b = row_first + rb < qn ? p.positions[tb] : -1;
  const float sl2 = p.scale * kLog2e;

  uint32_t qf[kQk / 16][4];
  float o[kV / 8][4];
#pragma unroll
  for (int i = 0; i < kV / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

  if (n_kt > 0) load_tile(0, 0);
  cp_async_commit();
  for (int kt = 0; kt < n_kt; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < n_kt) {
      load_tile(kt + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < kQk / 16; ++kk) {
        const int mi = lane >> 3;
        ldmatrix_x4(qf[kk], sb + kSmemQ + swz(16 * warp + (mi & 1) * 8 + (lane & 7), 2 * kk + (mi >> 1), kKRowBytes));
      }
    }
    const uint32_t kbase = sb + kSmemK + buf * kBk * kKRowBytes;
    const uint32_t vbase = sb + kSmemV + buf * kBk * kVRowBytes;

    float sc[kBk / 8][4];
#pragma unroll
    for (int i = 0; i < kBk / 8; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kQk / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBk / 16; ++np) {
        const int mi = lane >> 3;
        uint32_t b[4];
        ldmatrix_x4(b, kbase + swz(16 * np + (mi >> 1) * 8 + (lane & 7), 2 * kk + (mi & 1), kKRowBytes));
        mma_bf16(sc[2 * np], qf[kk], b[0], b[1]);
        mma_bf16(sc[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Mask (context end, causality, DSA bits) and online softmax in log2 units.
    const int j0 = kt * kBk + 2 * (lane & 3);
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kBk / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = j0 + 8 * nt + e;
        const bool va = j < kv_end && j <= pos_a && allowed(p, ta, j);
        const bool vb = j < kv_end && j <= pos_b && allowed(p, tb, j);
        sc[nt][e] = va ? sc[nt][e] * sl2 : -INFINITY;
        sc[nt][2 + e] = vb ? sc[nt][2 + e] * sl2 : -INFINITY;
        mx_a = fmaxf(mx_a, sc[nt][e]);
        mx_b = fmaxf(mx_b, sc[nt][2 + e]);
      }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
    const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
    const float alpha_a = new_a == -INFINITY ? 1.0f : fast_exp2(m_a - new_a);
    const float alpha_b = new_b == -INFINITY ? 1.0f : fast_exp2(m_b - new_b);
    m_a = new_a;
    m_b = new_b;
    const float base_a = m_a == -INFINITY ? 0.0f : m_a, base_b = m_b == -INFINITY ? 0.0f : m_b;
    l_a *= alpha_a;
    l_b *= alpha_b;
#pragma unroll
    for (int i = 0; i < kV / 8; ++i) {
      o[i][0] *= alpha_a;
      o[i][1] *= alpha_a;
      o[i][2] *= alpha_b;
      o[i][3] *= alpha_b;
    }
#pragma unroll
    for (int nt = 0; nt < kBk / 8; ++nt) {
      sc[nt][0] = fast_exp2(sc[nt][0] - base_a);
      sc[nt][1] = fast_exp2(sc[nt][1] - base_a);
      sc[nt][2] = fast_exp2(sc[nt][2] - base_b);
      sc[nt][3] = fast_exp2(sc[nt][3] - base_b);
      l_a += sc[nt][0] + sc[nt][1];
      l_b += sc[nt][2] + sc[nt][3];
    }

    // O += P V: P's A fragments are the S accumulators of two neighbouring 8-key tiles.
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(sc[2 * kk][0], sc[2 * kk][1]), pack_bf16(sc[2 * kk][2], sc[2 * kk][3]),
                             pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                             pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kV / 16; ++dp) {
        const int mi = lane >> 3;
        uint32_t b[4];
        ldmatrix_x4_trans(b, vbase + swz(16 * kk + (mi & 1) * 8 + (lane & 7), 2 * dp + (mi >> 1), kVRowBytes));
        mma_bf16(o[2 * dp], a, b[0], b[1]);
        mma_bf16(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration refills this buffer
  }
  cp_async_wait<0>();  // (no key tile: a sequence of no positions, a context part's; Q's copies still in flight)

  store_prefill_row<kV>(p, h, lane, ta, pos_a, m_a, l_a, [&](int i) { return make_float2(o[i][0], o[i][1]); });
  store_prefill_row<kV>(p, h, lane, tb, pos_b, m_b, l_b, [&](int i) { return make_float2(o[i][2], o[i][3]); });
}

__global__ void topk_bitmask_kernel(const int32_t* topk, int topk_k, uint32_t* allow, int allow_words) {
  const int64_t t = blockIdx.x;
  for (int k = threadIdx.x; k < topk_k; k += blockDim.x) {
    const int pos = topk[t * topk_k + k];
    if (pos >= 0 && pos < allow_words * 32) atomicOr(&allow[t * allow_words + (pos >> 5)], 1u << (pos & 31));
  }
}

// ---- reference kernel: one block per (head, token) ----
constexpr int kRefThreads = 128;
constexpr int kRefChunk = 64;
constexpr int kRefMaxV = 1024;

__global__ void __launch_bounds__(kRefThreads) mla_prefill_reference_kernel(const MlaPrefillParams p) {
  extern __shared__ float ref_smem[];  // q row [nope + rope], scores [kRefChunk]
  __shared__ int seq_sh;
  const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int H = p.num_heads, dqk = p.nope + p.rope, dkv = p.nope + p.v;
  float* qf = ref_smem;
  float* sc = ref_smem + dqk;
  if (tid == 0) {
    int s = 0;
    while (s + 1 < p.num_seqs && p.q_starts[s + 1] <= t) ++s;
    seq_sh = s;
  }
  const __nv_bfloat16* qrow = static_cast<const __nv_bfloat16*>(p.q) + (static_cast<int64_t>(t) * H + h) * dqk;
  for (int d = tid; d < dqk; d += kRefThreads) qf[d] = __bfloat162float(qrow[d]);
  __syncthreads();
  const int seq = seq_sh;
  const int64_t cb = context_base(p.seq_lens, seq);
  const int kv_end = min(p.positions[t] + 1, p.seq_lens[seq]);
  const __nv_bfloat16* kv = static_cast<const __nv_bfloat16*>(p.kv);
  const __nv_bfloat16* ctx = static_cast<const __nv_bfloat16*>(p.ctx);
  const float sl2 = p.scale * kLog2e;
  float acc[kRefMaxV / kRefThreads];
#pragma unroll
  for (int k = 0; k < kRefMaxV / kRefThreads; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int base = 0; base < kv_end; base += kRefChunk) {
    for (int i = warp; i < kRefChunk; i += kRefThreads / 32) {
      const int j = base + i;
      const bool ok = j < kv_end && allowed(p, t, j);
      float d = 0.0f;
      if (ok) {
        const __nv_bfloat16* krow = kv + ((cb + j) * H + h) * dkv;
        const __nv_bfloat16* rrow = ctx + (cb + j) * p.ctx_dim + p.rope_offset;
        for (int k = lane; k < dqk; k += 32)
          d += qf[k] * __bfloat162float(k < p.nope ? krow[k] : rrow[k - p.nope]);
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
      }
      if (lane == 0) sc[i] = ok ? d * sl2 : -INFINITY;
    }
    __syncthreads();
    float cmax = -INFINITY;
    for (int i = 0; i < kRefChunk; ++i) cmax = fmaxf(cmax, sc[i]);
    const float mn = fmaxf(m, cmax);
    if (mn > -INFINITY) {
      const float alpha = exp2f(m - mn);
      l *= alpha;
#pragma unroll
      for (int k = 0; k < kRefMaxV / kRefThreads; ++k) acc[k] *= alpha;
      m = mn;
      for (int i = 0; i < kRefChunk; ++i) {
        if (sc[i] == -INFINITY) continue;
        const float w = exp2f(sc[i] - m);
        l += w;
        const __nv_bfloat16* vrow = kv + ((cb + base + i) * H + h) * dkv + p.nope;
#pragma unroll
        for (int k = 0; k < kRefMaxV / kRefThreads; ++k) {
          const int d = tid + k * kRefThreads;
          if (d < p.v) acc[k] += w * __bfloat162float(vrow[d]);
        }
      }
    }
    __syncthreads();
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + (static_cast<int64_t>(t) * H + h) * p.v;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  if (p.lse && tid == 0) p.lse[static_cast<int64_t>(t) * H + h] = natural_lse(m, l);
#pragma unroll
  for (int k = 0; k < kRefMaxV / kRefThreads; ++k) {
    const int d = tid + k * kRefThreads;
    if (d < p.v) out[d] = __float2bfloat16(acc[k] * inv);
  }
}

// One warp a row (token, head): both parts' weights from their lse, then the row's columns.
constexpr int kMergeThreads = 256;
__global__ void __launch_bounds__(kMergeThreads) merge_parts_kernel(__nv_bfloat16* out, float* lse,
                                                                    const __nv_bfloat16* out_part,
                                                                    const float* lse_part, int64_t rows, int v) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kMergeThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float la = lse[row] * kLog2e, lb = lse_part[row] * kLog2e;  // -inf stays -inf
  const float mx = fmaxf(la, lb);
  if (mx == -INFINITY) return;  // neither part attended anything: out stays 0
  const float wa = la == -INFINITY ? 0.0f : exp2f(la - mx), wb = lb == -INFINITY ? 0.0f : exp2f(lb - mx);
  const float inv = 1.0f / (wa + wb);
  __nv_bfloat16* o = out + row * v;
  const __nv_bfloat16* op = out_part + row * v;
  for (int c = lane; c < v; c += 32) {
    // A part of zero weight may hold anything (never read: 0 * NaN would poison the sum).
    const float a = wa == 0.0f ? 0.0f : wa * __bfloat162float(o[c]);
    const float b = wb == 0.0f ? 0.0f : wb * __bfloat162float(op[c]);
    o[c] = __float2bfloat16((a + b) * inv);
  }
  if (lane == 0) lse[row] = (mx + log2f(wa + wb)) * 0.6931471805599453f;
}

}  // namespace

cudaError_t launch_mla_merge_parts(void* out, float* lse, const void* out_part, const float* lse_part, int64_t rows,
                                   int v, cudaStream_t stream) {
  if (rows == 0 || v == 0) return cudaSuccess;
  const int64_t blocks = (rows + kMergeThreads / 32 - 1) / (kMergeThreads / 32);
  return launch_plain(merge_parts_kernel, static_cast<unsigned>(blocks), kMergeThreads, 0, stream,
                      static_cast<__nv_bfloat16*>(out), lse, static_cast<const __nv_bfloat16*>(out_part), lse_part,
                      rows, v);
}

bool mla_prefill_fast_supported(int nope, int rope, int v, int64_t ctx_dim, int64_t rope_offset) {
  return nope == kNope && rope == kRope && v == kV && ctx_dim % 8 == 0 && rope_offset % 8 == 0 &&
         rope_offset + kRope <= ctx_dim;
}

cudaError_t launch_mla_topk_bitmask(const int32_t* topk, int num_tokens, int topk_k, uint32_t* allow,
                                    int allow_words, cudaStream_t stream) {
  if (num_tokens == 0 || allow_words == 0) return cudaSuccess;
  cudaError_t e = cudaMemsetAsync(allow, 0, static_cast<size_t>(num_tokens) * allow_words * 4, stream);
  if (e != cudaSuccess) return e;
  return topk_k > 0 ? launch_plain(topk_bitmask_kernel, static_cast<unsigned>(num_tokens), 128, 0, stream, topk, topk_k,
                                   allow, allow_words)
                    : cudaSuccess;
}

cudaError_t launch_mla_prefill(const MlaPrefillParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0 || p.num_seqs == 0 || p.max_q_len == 0) return cudaSuccess;
  if (!mla_prefill_fast_supported(p.nope, p.rope, p.v, p.ctx_dim, p.rope_offset)) return cudaErrorInvalidValue;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t e = attrs.get(
      [] { return cudaFuncSetAttribute(mla_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes); });
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kBq - 1) / kBq), static_cast<unsigned>(p.num_heads),
                  static_cast<unsigned>(p.num_seqs));
  return launch_plain(mla_prefill_kernel, grid, kThreads, kSmemBytes, stream, p);
}

cudaError_t launch_mla_prefill_reference(const MlaPrefillParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0 || p.num_heads == 0) return cudaSuccess;
  if (p.nope < 0 || p.rope <= 0 || p.v <= 0 || p.v > kRefMaxV || p.nope + p.rope > 4096) return cudaErrorInvalidValue;
  const size_t smem = (static_cast<size_t>(p.nope + p.rope) + kRefChunk) * sizeof(float);
  return launch_plain(mla_prefill_reference_kernel,
                      dim3(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.num_tokens)), kRefThreads, smem,
                      stream, p);
}

}  // namespace ds::kernels
