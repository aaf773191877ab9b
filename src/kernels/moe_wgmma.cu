// The MoE decode walks on Hopper's wgmma (moe_fp8.h launch_moe_fp8_wgmma_walk, moe_gemm.h launch_moe_bf16_wgmma_walk):
// each tile's weight rows stream as TMA boxes into a ring of shared-memory stages and a consumer warpgroup multiplies
// them with wgmma m64n{8,16} against the slot's token rows (N = 8 or 16). FP8: e4m3 k32 (mma.sync e4m3, which the
// other FP8 kernels use, is emulated on Hopper: f16 conversions + f16 MMAs, NVIDIA/cutlass#1986, session 38's ncu
// opcode mix), each 128-deep block's sums scaled in fp32; bf16: k16 over the same bytes, no scales.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/moe.h"
#include "kernels/moe_block.cuh"
#include "kernels/occupancy.h"
#include "kernels/moe_fp8.h"
#include "kernels/moe_gemm.h"
#include "kernels/pdl.cuh"
#include "kernels/ptx.cuh"
#include "kernels/tensor_map.h"
#include "kernels/wgmma.cuh"

namespace ds::kernels {
namespace {

using namespace ptx;

constexpr int kBoxRows = 32;                     // a TMA box: 32 weight rows x one 128-byte block of K
constexpr int kStageBytes = 2 * kBoxRows * 128;  // two boxes = the wgmma's 64 rows (8 KB)
// Ring depth: see walk_stages (MoeFp8GemmParams / MoeGroupedGemmParams::wgmma_stages: 0 = its choice, or 4 / 6 / 8).
constexpr int kSmemPerSm = 228 * 1024;  // Hopper's shared memory an SM (227 KB a CTA at most, 1 KB reserved a CTA)
constexpr int kThreads = 160;   // a consumer warpgroup (warps 0-3) and a producer warp (4)

// A tile: one slot (expert) x kCols output columns: with the SiLU 32 columns (A = their 32 gate rows, then their 32 up
// rows), else 64 (A = 64 consecutive rows). Its two boxes' first weight rows.
template <bool kSilu>
struct TileRows {
  static constexpr int kCols = kSilu ? 32 : 64;
  __device__ static int row_a(int64_t n0) { return static_cast<int>(n0); }
  __device__ static int row_b(int64_t n0, int64_t N) { return static_cast<int>(kSilu ? N + n0 : n0 + kBoxRows); }
};

// What both walks need (walk_tile_slot reads slots and src_rows). A token row is nb blocks of 128 bytes (K / 128 for
// e4m3, K / 64 for bf16); the FP8 walk's scales: sx [rows, nb], scales[e] [rows / 128, nb].
struct WalkParams {
  const int32_t* slots = nullptr;
  const int32_t* src_rows = nullptr;
  const uint8_t* x = nullptr;  // [rows, nb * 128 bytes]
  const float* sx = nullptr;
  const float* const* scales = nullptr;
  void* out = nullptr;  // bf16 [rows, N]
  int64_t N = 0;
  int nb = 0;
  bool slots_settled = false;
  bool evict_first = false;  // the weight boxes with an L2 evict-first policy
  // Dynamic tiles (walk_tile_counter in the params): [0] the next tile past the grid's first, [1] CTAs done; zero
  // before a launch and reset by its last CTA. Null: CTA b takes tiles b, b + grid, ... (static).
  int* tile_counter = nullptr;
};
constexpr int kTileRing = 4;  // tile ids the producer publishes ahead of the consumers (dynamic tiles)

// Shared memory (bytes from the 1024-aligned base): [kStages][64 rows][128 B] weight stages, [nb][tokens][128 B]
// token rows (both with the 128-byte swizzle), the up half's accumulators for the SiLU ([32][tokens] fp32), the
// tile's slot (expert, count, first output row, 16 token rows), the stages' full / empty mbarriers, then the tile
// ring's (dynamic tiles: the producer's tile ids and their full / empty mbarriers).
struct SmemLayout {
  int x, xch, slot, bars, tbars, tids, bytes;
  __host__ __device__ SmemLayout(int nb, int tokens, int stages) {
    x = stages * kStageBytes;
    xch = x + nb * tokens * 128;
    slot = xch + 32 * tokens * 4;
    bars = slot + 32 * 4;
    tbars = bars + 2 * stages * 8;
    tids = tbars + 2 * kTileRing * 8;
    bytes = tids + kTileRing * 4;
  }
};

template <bool kSilu, int kTokens, bool kBf16, int kStages, bool kPasses>
__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_walk_kernel(const WalkParams p, const CUtensorMap* maps, int tiles_x, int total) {
  using TR = TileRows<kSilu>;
  constexpr int kR = kTokens / 2;     // accumulators a thread: rows r, r + 8 x its 2 columns of each 8
  constexpr int kXBlock = kTokens * 128;  // one block's token rows
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_align1024(smem_raw);
  const int64_t N = p.N;
  const int nb = p.nb;
  const int64_t row_bytes = static_cast<int64_t>(nb) * 128;
  const SmemLayout L(nb, kTokens, kStages);
  const uint32_t sbase = smem_u32(smem);
  const uint32_t xbase = sbase + L.x, full = sbase + L.bars, empty = full + kStages * 8;
  float* xch = reinterpret_cast<float*>(smem + L.xch);
  int* slot = reinterpret_cast<int*>(smem + L.slot);  // [0] expert, [1] count, [2] first output row, [4..19] rows
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Dynamic tiles: after its grid's first tile each CTA takes the next one left, so CTAs that start late (SMs held
  // by a kernel on the other stream) take fewer tiles instead of finishing last with a full static share.
  const bool dynamic = p.tile_counter != nullptr;
  const uint32_t tfull = sbase + L.tbars, tempty = tfull + kTileRing * 8;
  volatile int* tids = reinterpret_cast<volatile int*>(smem + L.tids);
  if (tid == 0) {
    mbar_init_ring(full, empty, kStages, 4);  // four consumer warps release a stage
    if (dynamic) mbar_init_ring(tfull, tempty, kTileRing, 4);
  }
  __syncthreads();
  // Slot records written by this step's grouping are read after the wait unless settled (pdl.cuh).
  if (!p.slots_settled) pdl_enter();

  if (warp == 4) {  // producer: every tile's blocks, in the consumers' order, into the ring
    if (lane == 0) {
      uint64_t policy = 0;
      if (p.evict_first) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
      int it = 0;  // (tile, block) sequence number: stage it % kStages, its use it / kStages
      for (int k = 0, t = blockIdx.x;; ++k) {
        if (dynamic) {
          if (k > 0) {
            pdl_wait();  // the counter is reset by the previous launch's last CTA (the first tile's boxes went before)
            t = gridDim.x + atomicAdd(p.tile_counter, 1);
          }
          const int s = k % kTileRing;  // publish t (past the end too: the consumers stop on it)
          if (k >= kTileRing) mbar_wait(tempty + s * 8, ((k / kTileRing) - 1) & 1);
          tids[s] = t;
          mbar_arrive(tfull + s * 8);
        } else if (k > 0) {
          t += gridDim.x;
        }
        int4 h;
        int64_t xr0;
        if (!moe_detail::walk_tile_slot(p, t, tiles_x, total, 0, &h, &xr0)) break;
        const CUtensorMap* map = maps + h.x;
        const int64_t n0 = static_cast<int64_t>(t % tiles_x) * TR::kCols;
        // One pass over the tile's blocks for each kTokens rows of the expert (the consumers' chunks).
        const int passes = kPasses ? (h.y + kTokens - 1) / kTokens : 1;
        for (int pass = 0; pass < passes; ++pass) {
          for (int b = 0; b < nb; ++b, ++it) {
            const int s = it % kStages;
            if (it >= kStages) mbar_wait(empty + s * 8, ((it / kStages) - 1) & 1);
            mbar_expect_tx(full + s * 8, kStageBytes);
            const uint32_t dst = sbase + s * kStageBytes, bar = full + s * 8;
            if (p.evict_first) {
              tma_load_box_hint(dst, map, b * 128, TR::row_a(n0), bar, policy);
              tma_load_box_hint(dst + kBoxRows * 128, map, b * 128, TR::row_b(n0, N), bar, policy);
            } else {
              tma_load_box(dst, map, b * 128, TR::row_a(n0), bar);
              tma_load_box(dst + kBoxRows * 128, map, b * 128, TR::row_b(n0, N), bar);
            }
          }
        }
      }
      if (dynamic) {  // every grab done: the last CTA zeroes the counter for the next launch
        pdl_wait();
        if (atomicAdd(p.tile_counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
          atomicExch(p.tile_counter, 0);
          atomicExch(p.tile_counter + 1, 0);
        }
      }
    }
    if (p.slots_settled) pdl_enter();
    return;
  }
  if (p.slots_settled) pdl_enter();  // the token rows are this step's

  // This thread's D elements: rows 16 warp + lane / 4 (+ 8), token columns 8 g + 2 (lane % 4) (+ 1) for each group
  // g of 8 columns; accumulator 4 g + 2 h + c is row r + 8 h, column 8 g + c0 + c.
  const int r = 16 * warp + (lane >> 2), c0 = 2 * (lane & 3);
  int it = 0;
  for (int k = 0, t = blockIdx.x;; ++k) {
    if (dynamic) {
      const int s = k % kTileRing;
      mbar_wait(tfull + s * 8, (k / kTileRing) & 1);
      t = tids[s];
      __syncwarp();
      if (lane == 0) mbar_arrive(tempty + s * 8);
    } else if (k > 0) {
      t += gridDim.x;
    }
    if (t >= total) break;
    if (tid < kTokens) {  // the slot and its token rows (-1 past the count)
      int4 h;
      int64_t xr;
      const bool ok = moe_detail::walk_tile_slot(p, t, tiles_x, total, tid, &h, &xr);
      if (tid == 0) {
        slot[0] = ok ? h.x : -1;
        slot[1] = ok ? h.y : 0;
        slot[2] = ok ? h.z : 0;
      }
      slot[4 + tid] = ok && tid < h.y ? static_cast<int>(xr) : -1;
    }
    named_barrier(1, 128);
    if (slot[0] < 0) break;  // past the last slot with rows (the producer stopped there too)
    const int e = slot[0], count = slot[1];
    const int64_t row0 = slot[2];
    const int64_t n0 = static_cast<int64_t>(t % tiles_x) * TR::kCols;
    // The expert's rows in chunks of kTokens (more than one only past kTokens rows: max_rows_per_expert > 16), each
    // a pass over the tile's weights; a later chunk's token rows from the grouping's source rows.
    for (int base = 0; base < (kPasses ? count : 1); base += kTokens) {
      if (base > 0) {
        if (tid < kTokens) {
          const int j = base + tid;
          slot[4 + tid] = j >= count ? -1 : p.src_rows ? p.src_rows[row0 + j] : static_cast<int>(row0 + j);
        }
        named_barrier(1, 128);
      }
      const int cnt = min(count - base, kTokens);
      // Token rows -> [block][row][128 B], chunk c of row j at ((c ^ (j % 8)) << 4); rows past the count zero.
      for (int i = tid; i < nb * kTokens * 8; i += 128) {
        const int b = i / (kTokens * 8), j = (i >> 3) % kTokens, c = i & 7;
        const int xr = slot[4 + j];
        cp_async16(xbase + b * kXBlock + j * 128 + ((c ^ (j & 7)) << 4),
                   p.x + (xr >= 0 ? xr : 0) * row_bytes + b * 128 + c * 16, xr >= 0);
      }
      cp_async_commit();
      // FP8 scales: this thread's rows' weight scale row (its 16 rows sit in one 32-row half, inside one 128-row
      // block) and its token columns' activation scale rows.
      const float* swr = nullptr;
      const float* sx[kTokens / 4];
      if constexpr (!kBf16) {
        const int64_t wrow = r < 32 ? TR::row_a(n0) + r : TR::row_b(n0, N) + (r - 32);
        swr = p.scales[e] + (wrow / 128) * nb;
#pragma unroll
        for (int i = 0; i < kTokens / 4; ++i) {
          const int xr = slot[4 + 8 * (i >> 1) + c0 + (i & 1)];
          sx[i] = xr >= 0 ? p.sx + static_cast<int64_t>(xr) * nb : nullptr;
        }
      }
      // A block's scales load one fold ahead: loaded at their own fold, the scale product waited on them (s65g's
      // source page: 19% of a V2-Lite FP8 decode step's samples on that one FMUL).
      [[maybe_unused]] float sw_next = 0.0f;
      [[maybe_unused]] float sx_next[kTokens / 4];
      auto load_scales = [&](int b) {
        if constexpr (!kBf16) {
          sw_next = __ldg(swr + b);
#pragma unroll
          for (int i = 0; i < kTokens / 4; ++i) sx_next[i] = sx[i] ? __ldg(sx[i] + b) : 0.0f;
        }
      };
      load_scales(0);
      cp_async_wait<0>();
      fence_proxy_async();
      named_barrier(1, 128);

      float acc[kR];
#pragma unroll
      for (int i = 0; i < kR; ++i) acc[i] = 0.0f;
      [[maybe_unused]] float one = 1.0f;  // the bf16 fold's (below)
      if constexpr (kBf16) asm volatile("" : "+f"(one));
      auto mma = [&](int b, float (&d)[kR]) {
        const int s = (it + b) % kStages;
        wgmma_k128_block<kR, kBf16>(d, sbase + s * kStageBytes, xbase + b * kXBlock, full + s * 8,
                                    ((it + b) / kStages) & 1);
      };
      auto fold = [&](int b, const float (&d)[kR]) {  // block b's wgmmas are complete: (scale,) add, free its stage
        if constexpr (kBf16) {
          // Times an opaque 1: with a plain add ptxas serializes the wgmmas (C7518, "WG.DP in divergent path").
#pragma unroll
          for (int i = 0; i < kR; ++i) acc[i] += d[i] * one;
        } else {
          float a[kTokens / 4];
#pragma unroll
          for (int i = 0; i < kTokens / 4; ++i) a[i] = sx_next[i] * sw_next;
          load_scales(min(b + 1, nb - 1));  // clamped, not branched: a branch here serializes the wgmmas (C7518)
#pragma unroll
          for (int i = 0; i < kR; ++i) acc[i] += d[i] * a[2 * (i >> 2) + (i & 1)];
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + ((it + b) % kStages) * 8);
      };
      wgmma_blocks_one_ahead<kR>(nb, mma, fold);
      it += nb;

      // Store: out[row0 + c, n0 + column] in bf16 for token columns c < cnt.
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
      auto col = [&](int i) { return 8 * (i >> 2) + c0 + (i & 1); };
      auto row = [&](int i) { return r + ((i >> 1) & 1) * 8; };
      if (kSilu) {
        if (warp >= 2) {  // up rows: hand them to the gate rows' threads
#pragma unroll
          for (int i = 0; i < kR; ++i) xch[(row(i) - 32) * kTokens + col(i)] = acc[i];
        }
        named_barrier(1, 128);
        if (warp < 2) {
#pragma unroll
          for (int i = 0; i < kR; ++i) {
            const int c = col(i);
            const int64_t n = n0 + row(i);
            const float up = xch[row(i) * kTokens + c];
            if (c < cnt && n < N)
              out[(row0 + base + c) * N + n] = __float2bfloat16(acc[i] / (1.0f + expf(-acc[i])) * up);
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          const int c = col(i);
          const int64_t n = n0 + row(i);
          if (c < cnt && n < N) out[(row0 + base + c) * N + n] = __float2bfloat16(acc[i]);
        }
      }
      named_barrier(1, 128);  // the token rows, slot and exchange buffers are free for the next chunk or tile
    }
  }
}

}  // namespace

bool make_moe_wgmma_maps(const void* const* host_weights, int experts, int64_t rows, int64_t row_bytes,
                         CUtensorMap* out) {
  if (experts <= 0 || rows <= 0 || rows > INT32_MAX || row_bytes <= 0 || row_bytes % 128 != 0) return false;
  for (int e = 0; e < experts; ++e) {
    if (!host_weights[e] || (reinterpret_cast<uintptr_t>(host_weights[e]) & 15)) return false;
    if (!encode_2d_swizzle128(&out[e], CU_TENSOR_MAP_DATA_TYPE_UINT8, host_weights[e], static_cast<uint64_t>(row_bytes),
                              static_cast<uint64_t>(rows), static_cast<uint64_t>(row_bytes), 128, kBoxRows))
      return false;
  }
  return true;
}

namespace {

size_t walk_smem_at(int nb, int tokens, int stages) { return SmemLayout(nb, tokens, stages).bytes + 1024; }
int ctas_by_smem(size_t smem) { return static_cast<int>(kSmemPerSm / (smem + 1024)); }

// The ring depth of a launch: `requested` when 4, 6 or 8 (A/B runs: DSERVE_MOE_WGMMA_STAGES), else measured in the
// forward (s40a, H200, V2-Lite, bench-one-batch 256 / 32, graphs, batch 1 / 4 / 8 / 16 ms; bf16 two rounds: 8 stages
// 2.01-2.03 / 3.76-3.77 / 5.41-5.42 / 8.23-8.35, 6: 2.09-2.10 / 3.79-3.80 / 5.42-5.45 / 8.41-8.47, 4: 2.07-2.10 /
// 3.78-3.80 / 5.41-5.45 / 7.67-7.73; FP8 one round, batch 1 / 8 / 16: 8 1.61 / 3.60 / 4.90, 6 1.63 / 3.50 / 4.87, 4
// 1.67 / 3.50 / 4.66; s39d: FP8 6 vs 4 at batch 1 1.59 vs 1.65): 8 stages for bf16 and 6 for FP8 at <= 8 rows an
// expert; at 16 token columns, whose token rows take twice the shared memory, 4 stages where that leaves more CTAs
// an SM (V2-Lite's gate|up: bf16 two instead of one, FP8 three instead of two), else the same depth.
int walk_stages(int requested, bool bf16, int nb, int tokens) {
  if (requested == 4 || requested == 6 || requested == 8) return requested;
  const int deep = bf16 ? 8 : 6;
  if (tokens <= 8) return deep;
  return ctas_by_smem(walk_smem_at(nb, tokens, 4)) > ctas_by_smem(walk_smem_at(nb, tokens, deep)) ? 4 : deep;
}
int walk_tokens(int64_t max_rows) { return max_rows <= 8 ? 8 : 16; }
// Shared memory a walk launch takes (the 1024-byte alignment slack included).
size_t walk_smem(int nb, int64_t max_rows, int requested_stages, bool bf16) {
  const int tokens = walk_tokens(max_rows);
  return walk_smem_at(nb, tokens, walk_stages(requested_stages, bf16, nb, tokens));
}

// The bounds both walks share: slot records, rows an expert (past 16: passes of 16), the layout in shared memory.
template <class Params>
bool walk_supported(const Params& p, int64_t row_bytes, bool bf16) {
  return p.slots && p.max_active > 0 && p.max_active <= p.experts && (reinterpret_cast<uintptr_t>(p.slots) & 15) == 0 &&
         p.max_rows_per_expert >= 1 && row_bytes % 128 == 0 &&
         walk_smem(static_cast<int>(row_bytes / 128), p.max_rows_per_expert, p.wgmma_stages, bf16) <= 227 * 1024 &&
         p.out;
}

template <bool kBf16>
cudaError_t launch_walk(const WalkParams& w, bool silu, int64_t max_rows, int max_active, int stages,
                        const CUtensorMap* maps, cudaStream_t stream) {
  const int tokens = walk_tokens(max_rows);
  stages = walk_stages(stages, kBf16, w.nb, tokens);
  auto launch = [&](auto kernel, int cols) {
    const size_t smem = walk_smem_at(w.nb, tokens, stages);
    // CTAs an SM for (kernel, smem), looked up once each on each device (eager steps launch these per layer; the
    // attribute lives in the device's context). The kernel's shared-memory attribute stays at the largest size asked
    // so far: a launch after a smaller one's lookup (another K) still fits.
    struct Known {
      const void* kernel;
      int device;
      size_t smem;
      int per_sm;
    };
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return cudaErrorInvalidDevice;
    static std::mutex mu;
    static std::vector<Known> known;
    int per_sm = -1;
    {
      std::lock_guard<std::mutex> lock(mu);
      size_t widest = 0;
      for (const Known& k : known) {
        if (k.kernel != reinterpret_cast<const void*>(kernel) || k.device != device) continue;
        widest = std::max(widest, k.smem);
        if (k.smem == smem) per_sm = k.per_sm;
      }
      if (per_sm < 0) {
        per_sm = resident_per_sm(kernel, kThreads, smem);  // sets the attribute to smem
        if (per_sm > 0 && widest > smem &&
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(widest)) !=
                cudaSuccess)
          per_sm = 0;
        known.push_back({reinterpret_cast<const void*>(kernel), device, smem, per_sm});
      }
    }
    if (per_sm <= 0) return cudaErrorInvalidConfiguration;
    const int64_t tiles_x = w.N / cols, total = tiles_x * max_active;
    if (total > INT32_MAX) return cudaErrorInvalidValue;
    const int64_t grid = std::min<int64_t>(total, static_cast<int64_t>(per_sm) * device_sm_count());
    return launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), kThreads, smem, stream, w, maps,
                      static_cast<int>(tiles_x), static_cast<int>(total));
  };
  constexpr int kG = TileRows<true>::kCols, kD = TileRows<false>::kCols;
  // Past the token columns, the instantiations with passes (kept apart: the one-pass kernels are the measured ones).
  const bool passes = max_rows > tokens;
  auto by_tokens = [&](auto stages_c) {
    constexpr int S = decltype(stages_c)::value;
    if (tokens == 8)
      return silu ? launch(moe_wgmma_walk_kernel<true, 8, kBf16, S, false>, kG)
                  : launch(moe_wgmma_walk_kernel<false, 8, kBf16, S, false>, kD);
    if (passes)
      return silu ? launch(moe_wgmma_walk_kernel<true, 16, kBf16, S, true>, kG)
                  : launch(moe_wgmma_walk_kernel<false, 16, kBf16, S, true>, kD);
    return silu ? launch(moe_wgmma_walk_kernel<true, 16, kBf16, S, false>, kG)
                : launch(moe_wgmma_walk_kernel<false, 16, kBf16, S, false>, kD);
  };
  if (stages == 4) return by_tokens(std::integral_constant<int, 4>{});
  if (stages == 8) return by_tokens(std::integral_constant<int, 8>{});
  return by_tokens(std::integral_constant<int, 6>{});
}

}  // namespace

bool moe_fp8_wgmma_walk_supported(const MoeFp8GemmParams& p) {
  return walk_supported(p, p.K, false) && p.N % (p.silu ? 128 : 64) == 0 && p.q && p.sx;
}

cudaError_t launch_moe_fp8_wgmma_walk(const MoeFp8GemmParams& p, const CUtensorMap* maps, cudaStream_t stream) {
  if (!maps || (reinterpret_cast<uintptr_t>(maps) & 63) || !moe_fp8_wgmma_walk_supported(p)) return cudaErrorInvalidValue;
  WalkParams w;
  w.slots = p.slots;
  w.src_rows = p.src_rows;
  w.x = p.q;
  w.sx = p.sx;
  w.scales = p.scales;
  w.out = p.out;
  w.N = p.N;
  w.nb = static_cast<int>(p.K / 128);
  w.slots_settled = p.slots_settled;
  w.evict_first = p.wgmma_evict_first;
  w.tile_counter = p.walk_tile_counter;
  return launch_walk<false>(w, p.silu, p.max_rows_per_expert, p.max_active, p.wgmma_stages, maps, stream);
}

bool moe_bf16_wgmma_walk_supported(const MoeGroupedGemmParams& p) {
  return walk_supported(p, 2 * p.K, true) && p.N % (p.silu ? 32 : 64) == 0 && p.x &&
         (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
}

cudaError_t launch_moe_bf16_wgmma_walk(const MoeGroupedGemmParams& p, const CUtensorMap* maps, cudaStream_t stream) {
  if (!maps || (reinterpret_cast<uintptr_t>(maps) & 63) || !moe_bf16_wgmma_walk_supported(p)) return cudaErrorInvalidValue;
  WalkParams w;
  w.slots = p.slots;
  w.src_rows = p.src_rows;
  w.x = static_cast<const uint8_t*>(p.x);
  w.out = p.out;
  w.N = p.N;
  w.nb = static_cast<int>(2 * p.K / 128);
  w.slots_settled = p.slots_settled;
  w.evict_first = p.wgmma_evict_first;
  w.tile_counter = p.walk_tile_counter;
  return launch_walk<true>(w, p.silu, p.max_rows_per_expert, p.max_active, p.wgmma_stages, maps, stream);
}

}  // namespace ds::kernels
