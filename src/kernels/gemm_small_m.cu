// Small-M bf16 GEMMs (see gemm_small_m.h): a tensor-core weight stream over [N, K] weights.
#include "kernels/gemm_small_m.h"
#include "kernels/per_device.h"

#include <algorithm>
#include <cstdlib>

#include <cuda_bf16.h>

#include "core/env.h"
#include "kernels/gemv_m1.cuh"
#include "kernels/pdl.cuh"
#include "kernels/small_m_tile.cuh"

namespace ds::kernels {
namespace {

using small_m::accumulate_rows;
using small_m::NkShape;

constexpr int kWarps = 8;

__device__ __forceinline__ void store_out(const GemmSmallMParams& p, int64_t off, float v) {
  if (p.d_f32) {
    float* d = static_cast<float*>(p.d) + off;
    *d = p.accumulate ? *d + v : v;
  } else {
    __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d) + off;
    *d = __float2bfloat16(p.accumulate ? __bfloat162float(*d) + v : v);
  }
}

// [N, K] weights. CTA = NT x 8 weight rows (the mma's N side) x up to 16 tokens (its M side); its 8 warps
// split K in 32-deep chunks (small_m::accumulate_rows) and reduce through shared memory. kSilu: the two tiles
// are the gate and up rows of the same 8 output columns.
// Two problems sharing the launch (GemmSmallMPair): CTAs [0, split) take the first, the rest the second.
struct NkLaunch {
  GemmSmallMParams p[2];
  int64_t split;
  bool early = false;  // an early trigger (pdl.cuh pdl_early: the pair launch)
};

// kPre (the default; DSERVE_SMALL_M_PREWAIT=0 turns it off): the first round's weights go to shared memory
// before the PDL wait instead of an L2 prefetch of the CTA's rows, with 4 chunks per warp per round, so the
// one-tile CTA at <= 8 rows takes 32 KB instead of 64 KB and the next kernel's CTAs fit beside this one's to do
// the same (2026-11-27: batch 1 / 8 decode 0.07 / 0.08 ms faster; either half alone measured no gain).
// kPreU: chunks per warp per round with kPre (4; 8 where launch_rows takes the wide rounds).
template <int NT, bool kM16, bool kSilu = false, bool kPre = false, int kPreU = 4>
__global__ void __launch_bounds__(kWarps * 32) gemm_small_m_nk_kernel(const NkLaunch launch) {
  static_assert(!kSilu || NT == 2, "the fused SiLU takes a gate tile and an up tile");
  if (launch.early) pdl_launch_dependents();
  const bool second = blockIdx.x >= launch.split;
  const GemmSmallMParams& p = launch.p[second ? 1 : 0];
  const int64_t bx = second ? blockIdx.x - launch.split : blockIdx.x;
  using S = NkShape<NT, kM16, kPre ? kPreU : 0>;
  extern __shared__ uint4 stage[];
  __shared__ float red[kWarps][NT * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  uint4* my = stage + warp * S::kSlots * 32 + lane;  // slot s of this lane: my[s * 32]
  const int64_t b = blockIdx.y;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + b * p.stride_x;
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(p.w) + b * p.stride_w;
  const int64_t n0 = bx * (kSilu ? 8 : NT * 8);

  const __nv_bfloat16* wrow[NT];
  bool wok[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t n = kSilu ? n0 + g : n0 + t * 8 + g;
    wok[t] = n < p.N;
    wrow[t] = w + (wok[t] ? n + (kSilu && t == 1 ? p.N : 0) : 0) * p.ldw + tig * 8;
  }
  // Weights are never written during a forward, so they may be read before the PDL wait (pdl.cuh), while the
  // previous kernel of the stream finishes: kPre issues this warp's first round into shared memory; otherwise the
  // CTA's rows are pulled into L2. Then wait for that kernel before touching x or d.
  if constexpr (kPre) {
    small_m::issue_first_weights<NT, S::kUnroll>(wrow, wok, p.K, warp, kWarps, my);
  } else {
    for (int r = warp; r < NT * 8; r += kWarps) {
      const int t = r / 8;
      const int64_t n = kSilu ? n0 + r % 8 : n0 + r;
      if (n < p.N) {
        const char* row = reinterpret_cast<const char*>(w + (n + (kSilu && t == 1 ? p.N : 0)) * p.ldw);
        for (int64_t off = lane * 128; off < p.K * 2; off += 32 * 128)
          asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + off));
      }
    }
  }
  pdl_enter();
  const bool xok0 = g < p.M, xok1 = kM16 && g + 8 < p.M;
  const __nv_bfloat16* xrow0 = x + (xok0 ? g : 0) * p.ldx + tig * 8;
  const __nv_bfloat16* xrow1 = x + (xok1 ? g + 8 : 0) * p.ldx + tig * 8;

  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;

  accumulate_rows<NT, kM16, S::kUnroll, kPre>(wrow, wok, xrow0, xok0, xrow1, xok1, p.K, warp, kWarps, my, acc);

#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][t * 4 + c][lane] = acc[t][c];
  __syncthreads();
  const int64_t d_base = b * p.stride_d;
  if constexpr (kSilu) {
    if (threadIdx.x < 4 * 32) {
      const int c = threadIdx.x / 32, l = threadIdx.x % 32;
      float gate = 0.0f, up = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) gate += red[wi][c][l], up += red[wi][4 + c][l];
      const int64_t m = (l >> 2) + (c >= 2 ? 8 : 0);
      const int64_t n = n0 + (l & 3) * 2 + (c & 1);
      if (m < p.M && n < p.N) store_out(p, d_base + m * p.ldd + n, gate / (1.0f + expf(-gate)) * up);
    }
  } else {
    for (int idx = threadIdx.x; idx < NT * 4 * 32; idx += kWarps * 32) {
      const int tc = idx / 32, l = idx % 32;
      float sum = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) sum += red[wi][tc][l];
      const int t = tc / 4, c = tc % 4;
      // C fragment: c0, c1 = token g, weight rows 2 tig + {0, 1}; c2, c3 = token g + 8.
      const int64_t m = (l >> 2) + (c >= 2 ? 8 : 0);
      const int64_t n = n0 + t * 8 + (l & 3) * 2 + (c & 1);
      if (m < p.M && n < p.N) store_out(p, d_base + m * p.ldd + n, sum);
    }
  }
}

// p2 (optional): a second problem of batch 1 in the same launch.
template <int NT, bool kM16, bool kSilu = false, bool kPre = false, int kPreU = 4>
cudaError_t launch_nk(const GemmSmallMParams& p, cudaStream_t stream, const GemmSmallMParams* p2 = nullptr,
                      bool early = false) {
  constexpr size_t kSmem = static_cast<size_t>(kWarps) * NkShape<NT, kM16, kPre ? kPreU : 0>::kSlots * 512;
  static PerDevice<cudaError_t> attrs;
  const cudaError_t attr = attrs.get([] {
    return cudaFuncSetAttribute(gemm_small_m_nk_kernel<NT, kM16, kSilu, kPre, kPreU>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
  });
  if (attr != cudaSuccess) return attr;
  const int64_t cols = kSilu ? 8 : NT * 8;
  NkLaunch l;
  l.p[0] = p;
  l.p[1] = p2 ? *p2 : p;
  l.split = (p.N + cols - 1) / cols;
  l.early = early;
  const int64_t blocks = l.split + (p2 ? (p2->N + cols - 1) / cols : 0);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.batch));
  return launch_pdl(gemm_small_m_nk_kernel<NT, kM16, kSilu, kPre, kPreU>, grid, kWarps * 32, kSmem, stream, l);
}

// M = 1, batch 1 (gemv_m1.cuh): one launch for one problem or a pair sharing K; items = output columns.
struct GemvLaunch {
  GemmSmallMParams p[2];
  gemv::Rows rows;
};

template <bool kSilu, bool kShort>
__global__ void __launch_bounds__(gemv::kWarps * 32) gemv_m1_kernel(const GemvLaunch l) {
  auto x_row = [&](int64_t item) {
    return static_cast<const __nv_bfloat16*>(item >= l.rows.split ? l.p[1].x : l.p[0].x);
  };
  auto store = [&](int64_t item, float a, float b) {
    const bool second = item >= l.rows.split;
    const GemmSmallMParams& q = second ? l.p[1] : l.p[0];
    const float v = kSilu ? a / (1.0f + expf(-a)) * b : a;
    store_out(q, second ? item - l.rows.split : item, v);
  };
  // Two rows per item with the SiLU: half the segment keeps the registers of both buffers the same. kShort:
  // half again (fewer registers, fewer bytes in flight per warp).
  constexpr int kSeg = (kSilu ? 4 : 8) / (kShort ? 2 : 1);
  gemv::warp_loop<kSilu ? 2 : 1, kSeg>(l.rows, x_row, store);
}

// Where the GEMV wins (dserve_kernel_bench M = 1 rows, H100, 2026-11-26): from ~1,000 rows and K >= 1024 (V2-Lite
// o_proj 5.44 vs 6.06 us, shared gate|up 10.6 vs 11.8, V3 shared gate|up 24.1 vs 29.6); below that one warp
// per row leaves the machine idle (kv_a alone, 576 rows: 4.0 vs 3.3 us) or lanes idle (K = 512: V3 kv_b 26.6 vs
// 14.0 us), and the shared-memory kernel keeps those.
constexpr int64_t kGemvMinItems = 1024, kGemvMinK = 1024;
// Opt-in: DSERVE_GEMV_M1=1 (read per launch). Inside bench-one-batch it lost or tied (V2-Lite batch 1, H100,
// 2026-11-26: 3.11-3.19 vs 3.06-3.08 ms; with DSERVE_GEMV_SHORT=1 3.05 ms) while winning alone: its registers
// (98 per thread, 2 CTAs of 256 per SM) keep the next kernel's CTAs and the side stream's off the SMs. Experiment
// knobs: DSERVE_GEMV_SHORT=1 (half segments: 72 registers), DSERVE_GEMV_CTAS (CTAs per SM, 2),
// DSERVE_GEMV_PRE=0 (no loads before the PDL wait: 3.15 ms), DSERVE_GEMV_MIN_ITEMS (rows, 1024; the first run,
// without the bounds, so with the 64-row router GEMM on the GEMV too, gave 3.03 / 3.07 vs 3.07 ms: not yet
// separated from noise).
int64_t gemv_knob(const char* name, int64_t dflt) { return env_int(name, dflt); }
bool gemv_enabled() { return gemv_knob("DSERVE_GEMV_M1", 0) == 1; }

// The M = 1 path when it applies (batch 1; a pair with one K); cudaErrorNotSupported otherwise.
cudaError_t try_gemv(const GemmSmallMParams& p, const GemmSmallMParams* p2, cudaStream_t stream) {
  if (!gemv_enabled() || p.M != 1 || p.batch != 1 || p.K < kGemvMinK || (p2 && (p2->M != 1 || p2->K != p.K)) ||
      p.N + (p2 ? p2->N : 0) < gemv_knob("DSERVE_GEMV_MIN_ITEMS", kGemvMinItems))
    return cudaErrorNotSupported;
  GemvLaunch l;
  l.p[0] = p;
  l.p[1] = p2 ? *p2 : p;
  for (int i = 0; i < 2; ++i) {
    l.rows.w[i] = static_cast<const __nv_bfloat16*>(l.p[i].w);
    l.rows.ldw[i] = l.p[i].ldw;
    l.rows.N[i] = l.p[i].N;
  }
  l.rows.split = p.N;
  l.rows.items = p.N + (p2 ? p2->N : 0);
  l.rows.K = p.K;
  l.rows.pre = gemv_knob("DSERVE_GEMV_PRE", 1) != 0;
  // Two CTAs of 8 warps per SM by default, at most one warp per item.
  const int64_t per_sm = gemv_knob("DSERVE_GEMV_CTAS", 2);
  const int64_t max_ctas = static_cast<int64_t>(device_sm_count()) * (per_sm >= 1 && per_sm <= 8 ? per_sm : 2);
  const int64_t need = (l.rows.items + gemv::kWarps - 1) / gemv::kWarps;
  const unsigned ctas = static_cast<unsigned>(need < max_ctas ? need : max_ctas);
  const bool shortseg = gemv_knob("DSERVE_GEMV_SHORT", 0) == 1;
  const auto kernel = p.silu ? (shortseg ? gemv_m1_kernel<true, true> : gemv_m1_kernel<true, false>)
                             : (shortseg ? gemv_m1_kernel<false, true> : gemv_m1_kernel<false, false>);
  return launch_pdl(kernel, dim3(ctas), gemv::kWarps * 32, 0, stream, l);
}

// DSERVE_SMALL_M_PREWAIT=0 (read per launch; A/B runs): the kernels that prefetch their rows into L2 instead.
bool prewait() { return gemv_knob("DSERVE_SMALL_M_PREWAIT", 1) != 0; }

// Rounds of 8 chunks a warp only matter where K takes more than one round of 4 (then the second round's weights are
// a DRAM trip after the PDL wait).
bool past_one_round(int64_t K) { return K / 32 > kWarps * 4; }
// K past four rounds of 4 chunks a warp: each round waits for its copies before the next is issued, so a CTA keeps
// only one round (16 KB) in flight and a long-K product in a grid of a few CTAs an SM runs at the latency of its
// rounds. V2-Lite's dense down (K = 10944, N = 2048: 256 CTAs, 11 rounds) took 22.6 us for 44.8 MB (~2 TB/s, 0.47 of
// copy) in a bf16 batch-1 step (H200, session 49), ~15 us with rounds of 8 and ~12.4 us with rounds of 12 (s49e, s49f).
bool long_k(int64_t K) { return K / 32 > kWarps * 4 * 4; }
// K within one round of 8 chunks a warp (staged whole before the PDL wait by the rounds-of-8 kernel).
bool one_wide_round(int64_t K) { return K / 32 <= kWarps * 8; }

template <bool kPre>
cudaError_t launch_rows(const GemmSmallMParams& p, cudaStream_t stream) {
  const bool m16 = p.M > 8;
  if (p.silu) return m16 ? launch_nk<2, true, true, kPre>(p, stream) : launch_nk<2, false, true, kPre>(p, stream);
  // Two 8-row tiles per CTA once there are enough rows to fill the machine several times over.
  if (p.N * p.batch >= 8192)
    return m16 ? launch_nk<2, true, false, kPre>(p, stream) : launch_nk<2, false, false, kPre>(p, stream);
  // A grid of at most one CTA an SM (the MoE router: V2-Lite 8 CTAs) stages rounds of 8 chunks a warp (64 KB), so
  // its pre-wait round covers K = 2048 whole: with rounds of 4 the second round's weights were a DRAM trip after
  // the wait, on the chain norm -> router -> routing. DSERVE_SMALL_M_WIDE_PRE=n (read per launch; A/B runs,
  // tests): grids of at most n CTAs an SM take them (0: none; 2 takes V2-Lite's bf16 o_proj, 256 CTAs, two an SM:
  // no gain in s32a).
  if constexpr (kPre) {
    const int64_t wide = std::clamp<int64_t>(gemv_knob("DSERVE_SMALL_M_WIDE_PRE", 1), 0, 3);
    const int64_t ctas = (p.N + 7) / 8 * p.batch;
    if (wide > 0 && !m16 && ctas <= wide * device_sm_count() && past_one_round(p.K))
      return launch_nk<1, false, false, true, 8>(p, stream);
    // Grids of up to two CTAs an SM whose K fits one round of 8 (V2-Lite's bf16 o_proj: K = 2048, 256 CTAs) stage it
    // whole before the wait: H200, s50h, bench-one-batch bf16 three rounds alternating, batch 1 518.3 / 521.2 / 520.8
    // vs 513.8 / 514.9 / 508.3 tok/s, batch 8 +0.4%. (s49e's WIDE_PRE=2 also widened the shared down, K = 2816 in two
    // wide rounds beside the MoE walks, and lost 0.8%.) DSERVE_SMALL_M_WIDE_ONE=0 (read per launch): rounds of 4.
    if (gemv_knob("DSERVE_SMALL_M_WIDE_ONE", 1) == 1 && !m16 && ctas <= 2 * device_sm_count() && past_one_round(p.K) &&
        one_wide_round(p.K))
      return launch_nk<1, false, false, true, 8>(p, stream);
    // Long K (long_k) in grids of up to two CTAs an SM: rounds of 12 chunks a warp (96 KB a CTA; two still share an
    // SM). H200, s49f, bench-one-batch bf16 three rounds alternating, tok/s: batch 1 rounds of 12 507.4 / 510.0 /
    // 508.7, of 8 501.6 / 507.9 / 507.6, of 4 502.7 / 500.5 / 506.8; batch 8 a tie. The wide rounds for every grid of
    // two CTAs an SM (DSERVE_SMALL_M_WIDE_PRE=2) lost 0.8% at batch 1 (s49e: o_proj and the shared down, which runs
    // beside the MoE walks). DSERVE_SMALL_M_LONG_K (read per launch; A/B runs, tests): 12 (default) or 8 chunks a
    // round, 0: rounds of 4.
    if (!m16 && ctas <= 2 * device_sm_count() && long_k(p.K)) {
      const int64_t unroll = gemv_knob("DSERVE_SMALL_M_LONG_K", 12);
      if (unroll == 8) return launch_nk<1, false, false, true, 8>(p, stream);
      if (unroll != 0) return launch_nk<1, false, false, true, 12>(p, stream);
    }
  }
  return m16 ? launch_nk<1, true, false, kPre>(p, stream) : launch_nk<1, false, false, kPre>(p, stream);
}

bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

}  // namespace

bool gemm_small_m_supported(const GemmSmallMParams& p) {
  if (p.M < 1 || p.N < 1 || p.K < 1 || p.batch < 1 || p.batch > 65535 || !p.x || !p.w || !p.d) return false;
  if (!aligned16(p.w) || p.ldw % 8 != 0 || (p.batch > 1 && p.stride_w % 8 != 0)) return false;
  return p.w_nk && p.M <= kGemmSmallMMax && p.K % 32 == 0 && aligned16(p.x) && p.ldx % 8 == 0 &&
         (p.batch == 1 || p.stride_x % 8 == 0) && (p.N + 7) / 8 <= 0x7fffffff;
}

cudaError_t launch_gemm_small_m(const GemmSmallMParams& p, cudaStream_t stream) {
  if (!gemm_small_m_supported(p)) return cudaErrorInvalidValue;
  if (const cudaError_t e = try_gemv(p, nullptr, stream); e != cudaErrorNotSupported) return e;
  return prewait() ? launch_rows<true>(p, stream) : launch_rows<false>(p, stream);
}

cudaError_t launch_gemm_small_m_pair(const GemmSmallMParams& a, const GemmSmallMParams& b, cudaStream_t stream) {
  if (!gemm_small_m_supported(a) || !gemm_small_m_supported(b) || a.silu || b.silu || a.batch != 1 ||
      b.batch != 1 || a.M != b.M)
    return cudaErrorInvalidValue;
  if (const cudaError_t e = try_gemv(a, &b, stream); e != cudaErrorNotSupported) return e;
  const bool m16 = a.M > 8;
  const bool early = pdl_early(false);  // bf16: no gain measured (session 34)
  if (prewait())
    return m16 ? launch_nk<1, true, false, true>(a, stream, &b, early)
               : launch_nk<1, false, false, true>(a, stream, &b, early);
  return m16 ? launch_nk<1, true>(a, stream, &b, early) : launch_nk<1, false>(a, stream, &b, early);
}

}  // namespace ds::kernels
