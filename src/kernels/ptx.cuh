// Inline-PTX helpers shared by the kernels: shared-memory addresses, cp.async (16 bytes, zero-fill), the streaming
// 16-byte load, ldmatrix, the bf16 m16n8k16 and e4m3 m16n8k32 mma.sync, a bf16 x8 dot product, bf16 packing and
// the fast exp2, thread-block cluster ranks, barriers and distributed shared-memory loads. One definition each.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ds::kernels::ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; valid = false zero-fills the destination and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  cp_async16(smem_u32(dst), src, valid);
}

// FP8 decode weight streams: 16 bytes global -> shared like cp_async16, with an L2 evict-first hint. A step reads each
// weight once (~80 MB a V2-Lite FP8 layer through a 60 MB L2); marked so, its lines go before the activations, the
// residual stream and the step's metadata that the chain's latency-bound kernels read back from the L2. Taken by the
// FP8 small-M GEMMs and MoE walks (and the opt-in fused router's rows): H200, session 37 (s37g, three rounds), FP8
// V2-Lite batch 1 1.59-1.60 vs 1.63-1.64 ms, batch 8 3.70-3.72 vs 3.77-3.79, V3-shaped FP8 1.56 / 3.99 vs 1.57 / 4.05.
// The bf16 kernels (small_m_tile.cuh cp_async_cg) keep plain copies: with the hint bf16 batch 1 / 8 measured
// 2.02-2.06 / 5.65-5.72 vs 2.01-2.04 / 5.59-5.69 (a tie or a slight loss). DS_WEIGHT_EVICT_FIRST=0 at compile time:
// plain copies.
#ifndef DS_WEIGHT_EVICT_FIRST
#define DS_WEIGHT_EVICT_FIRST 1
#endif
__device__ __forceinline__ void cp_async16_weight(uint32_t dst, const void* src, bool valid) {
#if DS_WEIGHT_EVICT_FIRST
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
#else
  cp_async16(dst, src, valid);
#endif
}
__device__ __forceinline__ void cp_async16_weight(void* dst, const void* src, bool valid) {
  cp_async16_weight(smem_u32(dst), src, valid);
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// acc + the dot product of 8 bf16 pairs (two 16-byte vectors), in fp32, in element order.
__device__ __forceinline__ float dot8_bf16(const uint4& a, const uint4& b, float acc) {
  const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* y = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 u = __bfloat1622float2(x[i]), v = __bfloat1622float2(y[i]);
    acc = fmaf(u.x, v.x, acc);
    acc = fmaf(u.y, v.y, acc);
  }
  return acc;
}

// 16 bytes of global memory read once (weights streamed per step): the read-only path, not kept in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) { ldmatrix_x4(r, smem_u32(p)); }
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4_trans(r, smem_u32(p));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}

// d += a b for one m16n8k16 tile, bf16 inputs, fp32 accumulators (a: 4 registers of bf16x2, b: 2).
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_bf16(d, a[0], a[1], a[2], a[3], b[0], b[1]);
}

// d += a b for one m16n8k32 tile of e4m3 inputs (a: 4 registers of 4 bytes, b: 2), fp32 accumulators.
// An Ada (sm_89) instruction that Hopper runs in software: ptxas converts both operands to f16 (F2FP) and issues f16
// MMAs (NVIDIA/cutlass#1986; s38f's opcode mix of the FP8 MoE walk: F2FP 14% of its instructions, HMMA 4.5%).
// Hopper's native FP8 tensor-core path is wgmma (B from shared memory).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// acc[t][j] += x[t * x_stride] * w[j] (fp32 fma) for t < min(T, kMaxT), w the eight bf16 of one 16-byte chunk: the
// inner step of the decode-sized products that keep a weight slice in registers (mla_fused.cu, mla_decode.cu).
template <int kMaxT>
__device__ __forceinline__ void fma_bf16x8(float (&acc)[kMaxT][8], const uint4& w, const float* x, int x_stride, int T) {
  const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&w);
  float wf[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(w2[j]);
    wf[2 * j] = f.x;
    wf[2 * j + 1] = f.y;
  }
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) {
    if (t >= T) break;
    const float xv = x[t * x_stride];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[t][j] = fmaf(xv, wf[j], acc[t][j]);
  }
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Thread-block clusters (sm_90): this CTA's rank in its cluster, a barrier of every thread of every CTA of the
// cluster (release / acquire: shared-memory writes before it are visible to the other CTAs' reads after it), and
// loads from another CTA's shared memory (addr: this CTA's shared address of the same variable; volatile, so they
// stay after the barrier that published what they read) and stores into it (made visible by the next barrier).
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ void st_cluster_f32(uint32_t addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ float4 ld_cluster_f32x4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

}  // namespace ds::kernels::ptx
