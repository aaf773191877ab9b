// The fused decode router (see moe.h, MoeGateRouteParams): router GEMM spread over the SMs, then the last CTA to
// finish routes every token and groups the entries by expert, so the chain router -> route -> permute costs one
// launch and one round of dependent loads instead of three. The last CTA routes in registers where it can
// (DSERVE_MOE_ROUTE_FAST, as moe_route_permute).
#include <cuda_bf16.h>

#include "kernels/moe.h"
#include "kernels/per_device.h"
#include "kernels/moe_route.cuh"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"

namespace ds::kernels {
namespace {

using moe_detail::permute_block;
using moe_detail::permute_smem_bytes;
using moe_detail::route_smem_per_warp;
using moe_detail::route_token;

constexpr int kWarps = 4;  // expert rows per CTA

// The last CTA's scratch for the register routing (after the staged rows are dead): ids, the experts-with-rows
// mask, the warps' group scratch.
constexpr int kFastIds = 0, kFastMask = kMoeGateRouteMaxTokens * 32 * 4,
              kFastGroup = kFastMask + (moe_detail::kRouteMaskWords * 4 + 15) / 16 * 16;
constexpr size_t fast_tail_smem(int J) { return kFastGroup + static_cast<size_t>(kWarps) * 32 * J * 4; }

// The last CTA's routing and grouping where route_fast_fits (route_token_fast, store_grouping; as
// moe_route_permute_fast_kernel).
template <int J>
__device__ __forceinline__ void route_tail_fast(const MoeGateRouteParams& p, char* smem) {
  int32_t* ids_s = reinterpret_cast<int32_t*>(smem + kFastIds);
  uint32_t* mask_s = reinterpret_cast<uint32_t*>(smem + kFastMask);
  float* gsm = reinterpret_cast<float*>(smem + kFastGroup);
  float bias[J];
  moe_detail::load_route_bias<J>(p.route, bias);
  if (threadIdx.x < moe_detail::kRouteMaskWords) mask_s[threadIdx.x] = 0;
  moe_detail::route_and_group_fast<J>(p.route, p.permute, bias, kWarps, ids_s, mask_s, gsm);
}

// A warp a router row: row e's 16-byte chunks staged into row_sm lane-strided (zeros past the experts; weights are
// never written during a forward, so before the PDL wait: pdl.cuh), and the row's logit for token t from them,
// warp-reduced. Each lane reads back only the chunks it copied (no barrier). chunks = p.dim / 8.
__device__ __forceinline__ void stage_router_row(const MoeGateRouteParams& p, int e, int64_t chunks, uint4* row_sm,
                                                 int lane) {
  const int E = p.route.experts;
  const uint4* row = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.w) + (e < E ? e : 0) * p.dim);
  for (int64_t c = lane; c < chunks; c += 32) ptx::cp_async16_weight(&row_sm[c], &row[c], e < E);
}
__device__ __forceinline__ float router_logit(const MoeGateRouteParams& p, const uint4* row_sm, int64_t chunks,
                                              int64_t t, int lane) {
  const uint4* xrow = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) + t * p.dim);
  float s = 0.0f;
#pragma unroll 4
  for (int64_t c = lane; c < chunks; c += 32) s += ptx::dot8_bf16(row_sm[c], xrow[c], 0.0f);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// At most 64 registers (8 CTAs an SM), so its CTAs fit beside the shared expert's (the last CTA's routing spills a
// few words). tail: route_fast_launch_j's J for the last CTA's routing (0: the shared-memory routing).
__global__ void __launch_bounds__(kWarps * 32, 8) moe_gate_route_kernel(const MoeGateRouteParams p, int tail) {
  extern __shared__ __align__(16) char smem[];
  __shared__ uint64_t warp_tot[32];
  __shared__ bool last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int E = p.route.experts;
  const int e = blockIdx.x * kWarps + warp;
  const int64_t chunks = p.dim / 8;  // 16-byte chunks of a row
  // The router row staged in shared memory before the wait. Shared, not registers: this kernel runs beside the
  // shared expert's GEMMs, and a register-heavy CTA finds no room on their SMs until they finish.
  uint4* wsm = reinterpret_cast<uint4*>(smem) + warp * chunks;
  stage_router_row(p, e, chunks, wsm, lane);
  ptx::cp_async_commit();
  pdl_wait();
  pdl_launch_dependents();
  ptx::cp_async_wait<0>();
  if (e < E) {
    for (int64_t t = 0; t < p.route.tokens; ++t) {
      const float s = router_logit(p, wsm, chunks, t, lane);
      if (lane == 0) p.logits[t * E + e] = s;
    }
  }
  // Last CTA in: every row's logits are written (threadfence before the ticket, as in a grid reduction).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (tail == 2) {
    route_tail_fast<2>(p, smem);
  } else if (tail == 8) {
    route_tail_fast<8>(p, smem);
  } else {
    const size_t per_warp = route_smem_per_warp(E, p.route.n_group, p.route.top_k);
    for (int64_t t = warp; t < p.route.tokens; t += kWarps) route_token(p.route, t, smem + warp * per_warp);
    __syncthreads();  // the ids are in global memory, written by this block
    permute_block(p.permute, reinterpret_cast<int32_t*>(smem), warp_tot);
  }
  if (threadIdx.x == 0) *p.ticket = 0;  // ready for the next launch (graph replays included)
}

// The staged rows, then (reused) the routing's and the grouping's scratch.
size_t gate_route_smem(const MoeGateRouteParams& p) {
  const size_t rows = kWarps * static_cast<size_t>(p.dim) * 2;
  const size_t route = kWarps * route_smem_per_warp(p.route.experts, p.route.n_group, p.route.top_k);
  const size_t perm = permute_smem_bytes(p.route.experts + p.route.shared);  // the grouping's experts
  const size_t fast = fast_tail_smem(8);
  const size_t most = rows > route ? (rows > perm ? rows : perm) : (route > perm ? route : perm);
  return most > fast ? most : fast;
}
constexpr size_t kMaxSmem = kWarps * kMoeGateRouteMaxDim * 2 + 1024;

}  // namespace

bool moe_gate_route_supported(const MoeGateRouteParams& p) {
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return p.x && p.w && p.logits && p.ticket && a16(p.x) && a16(p.w) && p.dim > 0 && p.dim % 8 == 0 &&
         p.dim <= kMoeGateRouteMaxDim && p.route.tokens >= 1 && p.route.tokens <= kMoeGateRouteMaxTokens &&
         p.route.experts >= 1 && p.route.n_group >= 1 && p.route.experts % p.route.n_group == 0 &&
         p.route.n_group <= 64 && p.route.top_k >= 1 && p.route.top_k <= p.route.experts && p.route.shared >= 0 &&
         route_width(p.route) <= 32 && p.route.logits == p.logits && p.permute.topk_ids == p.route.topk_ids &&
         p.permute.experts == p.route.experts + p.route.shared && p.permute.top_k == route_width(p.route) &&
         p.permute.entries == p.route.tokens * route_width(p.route) &&
         moe_detail::slots_ok(p.permute) && gate_route_smem(p) <= kMaxSmem;
}

cudaError_t launch_moe_gate_route(const MoeGateRouteParams& p, cudaStream_t stream) {
  if (!moe_gate_route_supported(p)) return cudaErrorInvalidValue;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get(
      [] { return cudaFuncSetAttribute(moe_gate_route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem); });
  if (attr != cudaSuccess) return attr;
  const unsigned blocks = static_cast<unsigned>((p.route.experts + kWarps - 1) / kWarps);
  return launch_pdl(moe_gate_route_kernel, blocks, kWarps * 32, gate_route_smem(p), stream, p,
                    moe_detail::route_fast_launch_j(p.route));
}

}  // namespace ds::kernels
