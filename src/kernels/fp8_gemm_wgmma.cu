// The split-K block-FP8 GEMM on wgmma e4m3 (fp8_gemm_wgmma.h). Why: at 17-64 tokens cuBLASLt runs a few 128 x 128
// tiles over all of K (V2-Lite o_proj, 4 MB: 16 CTAs, 9.3 us) and the small-M kernel's e4m3 mma.sync is emulated on
// Hopper (compute-bound there); here a CTA streams 64 weight rows over a K range through TMA, its first weight boxes
// before the PDL wait. Splitting K across CTAs was measured to lose on V2-Lite's shapes (session 52: the split sum's
// fence and second pass cost more than the extra CTAs gave), so dserve splits only where a range would pass
// kFp8WgmmaMaxBlocks.
#include "kernels/fp8_gemm_wgmma.h"
#include "kernels/per_device.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdlib>
#include <type_traits>

#include "kernels/occupancy.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kThreads = 160;       // a consumer warpgroup (warps 0-3) and a producer warp (4)
constexpr int kRows = 64;           // weight rows a CTA (the wgmma's M)
constexpr int kWBytes = kRows * 128;  // a stage's weight box: 64 rows x one 128-byte block of K
constexpr int kDefaultStages = 6;

template <int kMt, int kStages>
struct Layout {
  static constexpr int kXBytes = kMt * 128;  // a stage's token box: kMt rows x the same block of K
  static constexpr int kStage = kWBytes + kXBytes;
  static constexpr int kBars = kStages * kStage;
  static constexpr int kFlag = kBars + 2 * kStages * 8;
  // The range's scales, staged once: sw [bps] (a 64-row tile sits in one 128-row scale block), sx [bps][kMt].
  static constexpr int kSw = kFlag + 16;
  static constexpr int kSx = kSw + kFp8WgmmaMaxBlocks * 4;
  static constexpr int kBytes = kSx + kFp8WgmmaMaxBlocks * kMt * 4 + 1024;  // + the 1024-byte alignment slack
};

// The cluster's sum of its K ranges' partials, called by the 128 consumer threads of each CTA once their chains are
// done (the producer warp meets the two cluster barriers on its own): each CTA puts its accumulators in its ring
// (thread-major, kR floats a thread), and CTA `rank` sums slots [rank * kC, rank * kC + kC) of every thread's
// accumulators over the cluster in rank order (the same bits whichever CTA runs first), handing each sum to
// put(i, v) for accumulator i of the calling thread's own slot.
template <int kR, int kCluster, class Put>
__device__ __forceinline__ void cluster_sum(uint8_t* smem, int rank, const float (&acc)[kR], Put&& put) {
  constexpr int kC = kR / kCluster;
  named_barrier(1, 128);  // every consumer warp's wgmmas are done with the ring
  const int tid = threadIdx.x;
  float* mine = reinterpret_cast<float*>(smem) + tid * kR;
#pragma unroll
  for (int i = 0; i < kR; i += 4)
    *reinterpret_cast<float4*>(mine + i) = make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
  cluster_sync();  // every CTA's partials written (release / acquire across the cluster)
  const uint32_t at = smem_u32(mine + rank * kC);
  float v[kCluster][kC];
#pragma unroll
  for (int c = 0; c < kCluster; ++c) {
    const uint32_t src = cluster_map(at, c);
    if constexpr (kC % 4 == 0) {
#pragma unroll
      for (int j = 0; j < kC; j += 4) {
        const float4 f = ld_cluster_f32x4(src + 4 * j);
        v[c][j] = f.x;
        v[c][j + 1] = f.y;
        v[c][j + 2] = f.z;
        v[c][j + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kC; ++j) v[c][j] = ld_cluster_f32(src + 4 * j);
    }
  }
  cluster_sync();  // no CTA leaves (freeing its shared memory) while the cluster still reads it
#pragma unroll
  for (int j = 0; j < kC; ++j) {
    float s = v[0][j];
#pragma unroll
    for (int c = 1; c < kCluster; ++c) s += v[c][j];
    put(rank * kC + j, s);
  }
}

// kPair: CTAs [tiles, tiles + second.Np / 64) run the pair's second product (wmap2, second; p.splits == 1). The
// single-product kernel gets those parameters last and unused, so its code is the one measured before the pair.
// kCluster > 1: launched in clusters of kCluster CTAs, the K ranges of one tile (CTA b: tile b / kCluster, range
// b % kCluster; p.splits == kCluster), whose partials the cluster sums in distributed shared memory (no partials
// buffer, fence or ticket: the split sum that lost in session 52 went through global memory).
template <int kMt, int kStages, bool kPair, int kCluster = 1>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_gemm_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                          const Fp8GemmWgmmaParams p, int tiles, int bps, const __grid_constant__ CUtensorMap wmap2,
                          const Fp8GemmWgmmaSecond second_p) {
  static_assert(kCluster == 1 || !kPair, "a pair's products are not split");
  using L = Layout<kMt, kStages>;
  constexpr int kR = kMt / 2;  // accumulators a thread: rows r, r + 8 x its 2 columns of each 8
  static_assert(kR % kCluster == 0 && 128 * kR * 4 <= L::kBars, "the cluster's partials fit the ring");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const uint32_t sbase = smem_u32(smem), full = sbase + L::kBars, empty = full + kStages * 8;
  int* flag = reinterpret_cast<int*>(smem + L::kFlag);
  // The pair's selections are written inline (kPair && second ? ... : ...): held in locals they changed the single
  // kernel's code (ptxas: 150 -> 161 registers at 64 tokens).
  const bool second = kPair && static_cast<int>(blockIdx.x) >= tiles;
  const int tile = kCluster > 1 ? blockIdx.x / kCluster : second ? blockIdx.x - tiles : blockIdx.x % tiles;
  const int split = kCluster > 1 ? blockIdx.x % kCluster : second ? 0 : blockIdx.x / tiles;
  const int kb = static_cast<int>(p.Kp / 128);
  const int kb0 = split * bps, nkb = min(bps, kb - kb0);
  const int n0 = tile * kRows;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  if (tid == 0) mbar_init_ring(full, empty, kStages, 4);  // four consumer warps release a stage
  __syncthreads();

  if (warp == 4) {  // producer
    if (lane == 0) {
      uint64_t policy = 0;
      if (p.evict_first) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
      auto load_w = [&](int i) {
        const int s = i % kStages;
        if (p.evict_first)
          tma_load_box_hint(sbase + s * L::kStage, kPair && second ? &wmap2 : &wmap, (kb0 + i) * 128, n0,
                            full + s * 8, policy);
        else
          tma_load_box(sbase + s * L::kStage, kPair && second ? &wmap2 : &wmap, (kb0 + i) * 128, n0, full + s * 8);
      };
      auto load_x = [&](int i) {
        const int s = i % kStages;
        tma_load_box(sbase + s * L::kStage + kWBytes, &xmap, (kb0 + i) * 128, 0, full + s * 8);
      };
      // The first stages' weights before the wait (no kernel writes them); the tokens after it.
      const int pre = min(nkb, kStages);
      for (int i = 0; i < pre; ++i) {
        mbar_expect_tx(full + i * 8, L::kStage);
        load_w(i);
      }
      pdl_wait();
      for (int i = 0; i < pre; ++i) load_x(i);
      for (int i = pre; i < nkb; ++i) {
        const int s = i % kStages;
        mbar_wait(empty + s * 8, ((i / kStages) - 1) & 1);
        mbar_expect_tx(full + s * 8, L::kStage);
        load_w(i);
        load_x(i);
      }
    }
    if constexpr (kCluster > 1) {  // the producer warp takes its part in the consumers' two cluster barriers
      __syncwarp();
      cluster_sync();
      cluster_sync();
    }
    return;
  }
  pdl_enter();

  // The range's scales into shared memory (one round trip here instead of one a block inside the chain: s52b, a
  // 2-block range took ~20 us at 64 token columns with the loads in the fold). Columns past M scale by 0.
  float* sws = reinterpret_cast<float*>(smem + L::kSw);
  float* sxs = reinterpret_cast<float*>(smem + L::kSx);
  {
    const float* swt = (kPair && second ? second_p.sw : p.sw) + static_cast<int64_t>(n0 / 128) * kb + kb0;
    // Every load in flight before the first store (a loop of dependent rounds cost a round trip each).
    constexpr int kPer = (kFp8WgmmaMaxBlocks * kMt + 127) / 128;
    float v[kPer];
    const int c = tid % kMt;  // this thread's column: the same in every round (128 % kMt == 0)
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = (tid + k * 128) / kMt;
      v[k] = j < nkb && c < p.M ? __ldg(p.sx + c * p.sx_ld + kb0 + j) : 0.0f;
    }
    const float w = tid < nkb ? __ldg(swt + tid) : 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (tid + k * 128 < nkb * kMt) sxs[tid + k * 128] = v[k];
    if (tid < nkb) sws[tid] = w;
    named_barrier(1, 128);
  }

  // This thread's D elements: weight rows r, r + 8, token columns 8 g + c0 (+ 1); accumulator 4 g + 2 h + c is row
  // r + 8 h, column 8 g + c0 + c.
  const int r = 16 * warp + (lane >> 2), c0 = 2 * (lane & 3);
  auto col = [&](int i) { return 8 * (i >> 2) + c0 + (i & 1); };
  float acc[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) acc[i] = 0.0f;
  auto mma = [&](int b, float (&d)[kR]) {
    const int s = b % kStages;
    const uint32_t wa = sbase + s * L::kStage, xa = wa + kWBytes;
    wgmma_k128_block<kR>(d, wa, xa, full + s * 8, (b / kStages) & 1);
  };
  auto fold = [&](int b, const float (&d)[kR]) {  // block b's wgmmas are complete: scale, add, free its stage
    const float sw = sws[b];
    const float* sx = sxs + b * kMt;
    float a[kMt / 4];
#pragma unroll
    for (int j = 0; j < kMt / 4; ++j) a[j] = sx[8 * (j >> 1) + c0 + (j & 1)] * sw;
#pragma unroll
    for (int i = 0; i < kR; ++i) acc[i] += d[i] * a[2 * (i >> 2) + (i & 1)];
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + (b % kStages) * 8);
  };
  wgmma_blocks_one_ahead<kR>(nkb, mma, fold);

  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(kPair && second ? second_p.d : p.d);
  auto put = [&](int i, float v) {  // accumulator i of this thread's slot, rows and columns past the output kept
    const int c = col(i);
    const int64_t n = n0 + r + ((i >> 1) & 1) * 8;
    if (c < p.M && n < (kPair && second ? second_p.N : p.N))
      out[c * (kPair && second ? second_p.ldd : p.ldd) + n] = __float2bfloat16(v);
  };
  auto store = [&](const float (&v)[kR]) {
#pragma unroll
    for (int i = 0; i < kR; ++i) put(i, v[i]);
  };
  if constexpr (kCluster > 1) {
    cluster_sum<kR, kCluster>(smem, split, acc, put);
    return;
  }
  if (p.splits == 1) {
    store(acc);
    return;
  }
  // Partials in the accumulators' own layout (each thread kR floats), then the tile's last CTA sums them.
  float* part = p.partial + ((static_cast<int64_t>(tile) * p.splits + split) * 128 + tid) * kR;
#pragma unroll
  for (int i = 0; i < kR; i += 4)
    *reinterpret_cast<float4*>(part + i) = make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
  // The CTA's partials ordered before its ticket by one thread's fence after the barrier (fences are cumulative),
  // and the last CTA's reads after its own (CUTLASS's serial split-K semaphore does the same).
  named_barrier(1, 128);
  if (tid == 0) {
    __threadfence();
    const int last = atomicAdd(p.tickets + tile, 1) == p.splits - 1;
    if (last) __threadfence();
    *flag = last;
  }
  named_barrier(1, 128);
  if (!*flag) return;
  float sum[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) sum[i] = 0.0f;
  // Split order (the same bits whichever CTA is last), kU splits' loads in flight at once; a missing split adds 0.
  constexpr int kU = kMt == 64 ? 2 : 4;
  for (int s0 = 0; s0 < p.splits; s0 += kU) {
    float4 v[kU][kR / 4];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const float* ps = p.partial + ((static_cast<int64_t>(tile) * p.splits + s0 + u) * 128 + tid) * kR;
#pragma unroll
      for (int i = 0; i < kR / 4; ++i)
        v[u][i] = s0 + u < p.splits ? __ldcg(reinterpret_cast<const float4*>(ps) + i) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int i = 0; i < kR / 4; ++i) {
        sum[4 * i] += v[u][i].x;
        sum[4 * i + 1] += v[u][i].y;
        sum[4 * i + 2] += v[u][i].z;
        sum[4 * i + 3] += v[u][i].w;
      }
    }
  }
  if (tid == 0) p.tickets[tile] = 0;  // for the next launch on these buffers
  store(sum);
}

// The token map: q [M, ldq] e4m3, boxes of 128 bytes x kMt rows (rows past M read as zeros).
bool make_token_map(const Fp8GemmWgmmaParams& p, int mt, CUtensorMap* out) {
  return encode_2d_swizzle128(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.q, static_cast<uint64_t>(p.Kp),
                              static_cast<uint64_t>(p.M), static_cast<uint64_t>(p.ldq), 128, static_cast<uint32_t>(mt));
}

template <int kMt, int kS, bool kPair = false, int kCluster = 1>
int ctas_per_sm() {
  static PerDevice<int> n;
  return n.get(
      [] { return resident_per_sm(fp8_gemm_wgmma_kernel<kMt, kS, kPair, kCluster>, kThreads, Layout<kMt, kS>::kBytes); });
}

// CTAs of kC-CTA clusters resident at once (0: none can run), cached per instantiation.
template <int kMt, int kS, int kC>
int cluster_ctas() {
  static PerDevice<int> n;
  return n.get([] {
    return ctas_per_sm<kMt, kS, false, kC>() <= 0
               ? 0
               : kC * active_clusters(fp8_gemm_wgmma_kernel<kMt, kS, false, kC>, dim3(kThreads),
                                      Layout<kMt, kS>::kBytes, dim3(kC));
  });
}

// A/B switch, read once: DSERVE_FP8_WGMMA_STAGES=4, 8 or 12 (else 6; s52g: 4 stages lost 0.6 us at 32 tokens, tied
// at 64; session 53: 12 won alone, 1.1-2.9 us at 64 tokens, and tied in the model, its 210 KB CTA likely shutting out
// the PDL neighbours' CTAs; 8, ~140 KB at 64 tokens, not yet measured).
int stages() {
  static const int n = [] {
    const char* v = std::getenv("DSERVE_FP8_WGMMA_STAGES");
    const int s = v ? std::atoi(v) : 0;
    return s == 4 || s == 8 || s == 12 ? s : kDefaultStages;
  }();
  return n;
}

// second / wmap2: a pair's second product (its Np / 64 CTAs after p's), or null (one product; wmap passed again as the
// unused parameter).
template <int kMt, int kS>
cudaError_t launch_mt(const Fp8GemmWgmmaParams& p, const CUtensorMap& wmap, const Fp8GemmWgmmaSecond* second,
                      const CUtensorMap* wmap2, cudaStream_t stream) {
  alignas(64) CUtensorMap xmap;
  if (!make_token_map(p, kMt, &xmap)) return cudaErrorInvalidValue;
  const int tiles = static_cast<int>(p.Np / kRows), kb = static_cast<int>(p.Kp / 128);
  const int bps = (kb + p.splits - 1) / p.splits;
  if (p.cluster > 1) {
    auto launch = [&](auto cluster) {  // std::integral_constant: the kernel's cluster size
      constexpr int kC = decltype(cluster)::value;
      if (cluster_ctas<kMt, kS, kC>() <= 0) return cudaErrorInvalidConfiguration;
      return launch_pdl_cluster(fp8_gemm_wgmma_kernel<kMt, kS, false, kC>, dim3(static_cast<unsigned>(tiles * kC)),
                                dim3(kC), kThreads, Layout<kMt, kS>::kBytes, stream, wmap, xmap, p, tiles, bps, wmap,
                                Fp8GemmWgmmaSecond{});
    };
    switch (p.cluster) {
      case 2: return launch(std::integral_constant<int, 2>{});
      case 4: return launch(std::integral_constant<int, 4>{});
      default: return launch(std::integral_constant<int, 8>{});
    }
  }
  if (!second) {
    if (ctas_per_sm<kMt, kS>() <= 0) return cudaErrorInvalidConfiguration;
    return launch_pdl(fp8_gemm_wgmma_kernel<kMt, kS, false>, dim3(static_cast<unsigned>(tiles * p.splits)), kThreads,
                      Layout<kMt, kS>::kBytes, stream, wmap, xmap, p, tiles, bps, wmap, Fp8GemmWgmmaSecond{});
  }
  if (ctas_per_sm<kMt, kS, true>() <= 0) return cudaErrorInvalidConfiguration;
  const int tiles2 = static_cast<int>(second->Np / kRows);
  return launch_pdl(fp8_gemm_wgmma_kernel<kMt, kS, true>, dim3(static_cast<unsigned>(tiles + tiles2)), kThreads,
                    Layout<kMt, kS>::kBytes, stream, wmap, xmap, p, tiles, bps, *wmap2, *second);
}

template <int kMt>
cudaError_t launch_mt(const Fp8GemmWgmmaParams& p, const CUtensorMap& wmap, const Fp8GemmWgmmaSecond* second,
                      const CUtensorMap* wmap2, cudaStream_t stream) {
  switch (stages()) {
    case 4: return launch_mt<kMt, 4>(p, wmap, second, wmap2, stream);
    case 8: return launch_mt<kMt, 8>(p, wmap, second, wmap2, stream);
    case 12: return launch_mt<kMt, 12>(p, wmap, second, wmap2, stream);
    default: return launch_mt<kMt, kDefaultStages>(p, wmap, second, wmap2, stream);
  }
}

cudaError_t launch_by_tokens(const Fp8GemmWgmmaParams& p, const CUtensorMap& wmap, const Fp8GemmWgmmaSecond* second,
                             const CUtensorMap* wmap2, cudaStream_t stream) {
  switch (fp8_gemm_wgmma_tokens(p.M)) {
    case 16: return launch_mt<16>(p, wmap, second, wmap2, stream);
    case 32: return launch_mt<32>(p, wmap, second, wmap2, stream);
    default: return launch_mt<64>(p, wmap, second, wmap2, stream);
  }
}

template <int kMt, int kS>
int cluster_ctas(int cluster) {
  switch (cluster) {
    case 2: return cluster_ctas<kMt, kS, 2>();
    case 4: return cluster_ctas<kMt, kS, 4>();
    default: return cluster_ctas<kMt, kS, 8>();
  }
}

template <int kMt>
int cluster_ctas_any(int cluster) {
  switch (stages()) {
    case 4: return cluster_ctas<kMt, 4>(cluster);
    case 8: return cluster_ctas<kMt, 8>(cluster);
    case 12: return cluster_ctas<kMt, 12>(cluster);
    default: return cluster_ctas<kMt, kDefaultStages>(cluster);
  }
}

template <int kMt>
int ctas_per_sm_any() {
  switch (stages()) {
    case 4: return ctas_per_sm<kMt, 4>();
    case 8: return ctas_per_sm<kMt, 8>();
    case 12: return ctas_per_sm<kMt, 12>();
    default: return ctas_per_sm<kMt, kDefaultStages>();
  }
}

}  // namespace

bool make_fp8_weight_map(const uint8_t* w, int64_t Np, int64_t Kp, Fp8WeightMap* out) {
  static_assert(sizeof(Fp8WeightMap::bytes) == sizeof(CUtensorMap), "a CUtensorMap's bytes");
  out->valid = false;
  if (!w || (reinterpret_cast<uintptr_t>(w) & 15) || Np <= 0 || Np % kRows != 0 || Np > INT32_MAX || Kp <= 0 ||
      Kp % 128 != 0)
    return false;
  out->valid = encode_2d_swizzle128(reinterpret_cast<CUtensorMap*>(out->bytes), CU_TENSOR_MAP_DATA_TYPE_UINT8, w,
                                    static_cast<uint64_t>(Kp), static_cast<uint64_t>(Np), static_cast<uint64_t>(Kp),
                                    128, kRows);
  return out->valid;
}

int fp8_gemm_wgmma_tokens(int64_t M) { return M <= 16 ? 16 : M <= 32 ? 32 : 64; }

int fp8_gemm_wgmma_ctas_per_sm(int64_t M) {
  const int mt = fp8_gemm_wgmma_tokens(M);
  return mt == 16 ? ctas_per_sm_any<16>() : mt == 32 ? ctas_per_sm_any<32>() : ctas_per_sm_any<64>();
}

bool fp8_gemm_wgmma_supported(const Fp8GemmWgmmaParams& p) {
  if (!p.q || !p.sx || !p.sw || !p.d || p.M < 1 || p.M > kFp8WgmmaMaxM || p.N < 1 || p.Np % 128 != 0 || p.N > p.Np ||
      p.Kp < 128 || p.Kp % 128 != 0 || p.ldq < p.Kp || p.ldq % 16 != 0 || (reinterpret_cast<uintptr_t>(p.q) & 15) ||
      p.sx_ld < p.Kp / 128 || p.ldd < p.N || p.splits < 1 || p.Np / kRows > INT32_MAX / p.splits)
    return false;
  const int64_t kb = p.Kp / 128, bps = (kb + p.splits - 1) / p.splits;
  if ((p.splits - 1) * bps >= kb || bps > kFp8WgmmaMaxBlocks) return false;  // an empty or too long range
  if (p.cluster != 1)  // a cluster's ranges summed in distributed shared memory: no buffers
    return fp8_gemm_wgmma_cluster_supported(p.cluster, p.M) && p.splits == p.cluster;
  if (p.splits == 1) return true;
  const int64_t tiles = p.Np / kRows, mt = fp8_gemm_wgmma_tokens(p.M);
  return p.partial && p.tickets && p.ticket_count >= tiles && p.partial_floats >= p.splits * tiles * kRows * mt &&
         (reinterpret_cast<uintptr_t>(p.partial) & 15) == 0;
}

cudaError_t launch_fp8_gemm_wgmma(const Fp8GemmWgmmaParams& p, const Fp8WeightMap& weight_map, cudaStream_t stream) {
  if (!weight_map.valid || !fp8_gemm_wgmma_supported(p)) return cudaErrorInvalidValue;
  return launch_by_tokens(p, *reinterpret_cast<const CUtensorMap*>(weight_map.bytes), nullptr, nullptr, stream);
}

bool fp8_gemm_wgmma_cluster_supported(int cluster, int64_t M) {
  if (cluster != 2 && cluster != 4 && cluster != 8) return false;
  return (fp8_gemm_wgmma_tokens(M) / 2) % cluster == 0;  // a thread's kMt / 2 accumulators split evenly
}

int fp8_gemm_wgmma_cluster_ctas(int cluster, int64_t M) {
  if (!fp8_gemm_wgmma_cluster_supported(cluster, M)) return 0;
  const int mt = fp8_gemm_wgmma_tokens(M);
  return mt == 16 ? cluster_ctas_any<16>(cluster) : mt == 32 ? cluster_ctas_any<32>(cluster) : cluster_ctas_any<64>(cluster);
}

bool fp8_gemm_wgmma_pair_supported(const Fp8GemmWgmmaParams& p, const Fp8GemmWgmmaSecond& second) {
  return fp8_gemm_wgmma_supported(p) && p.splits == 1 && p.cluster == 1 && second.sw && second.d && second.N >= 1 &&
         second.Np % 128 == 0 && second.N <= second.Np && second.ldd >= second.N &&
         p.Np / kRows + second.Np / kRows <= INT32_MAX;
}

cudaError_t launch_fp8_gemm_wgmma_pair(const Fp8GemmWgmmaParams& p, const Fp8WeightMap& weight_map,
                                       const Fp8GemmWgmmaSecond& second, const Fp8WeightMap& second_map,
                                       cudaStream_t stream) {
  if (!weight_map.valid || !second_map.valid || !fp8_gemm_wgmma_pair_supported(p, second)) return cudaErrorInvalidValue;
  return launch_by_tokens(p, *reinterpret_cast<const CUtensorMap*>(weight_map.bytes), &second,
                          reinterpret_cast<const CUtensorMap*>(second_map.bytes), stream);
}

}  // namespace ds::kernels
