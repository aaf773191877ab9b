// Block-FP8 (W8A8) grouped expert GEMMs for DeepSeekMoE: expert weights stay e4m3 with one fp32 scale per
// 128x128 block, activations are e4m3 with one scale per token per 128 channels, products accumulate in fp32 per
// 128-deep K block and are scaled as ops/fp8.h linear_w8a8_reference does. Per-expert row counts and offsets
// are read on the device (moe_permute's), so both launches are graph-capturable.
#pragma once
#include <cstdint>

#include <cuda.h>  // CUtensorMap (type only)
#include <cuda_runtime.h>

namespace ds::kernels {

// out[offsets[e] + i, n] (bf16) = sum over kb of (sum_k q[r, k] W_e[n, k]) * sx[r, kb] * S_e[n / 128, kb] for
// i < counts[e], r = the row's activation row (src_rows[offsets[e] + i] when given, else offsets[e] + i).
// With silu, W_e is [2N, K] (gate rows [0, N), up rows [N, 2N)) and out[., n] = silu(gate) * up in fp32.
// Requirements (moe_fp8_gemm_supported): K % 128 == 0, N % 64 == 0 (N % 128 == 0 with silu, so the up half
// starts on a scale block), 16-byte aligned weights, activations and out.
struct MoeFp8GemmParams {
  const void* const* weights = nullptr;  // [experts] device array of e4m3 [N (or 2N), K] row-major pointers
  const float* const* scales = nullptr;  // [experts] device array of fp32 [N (or 2N) / 128, K / 128] pointers
  // Activations quantized per row per 128 (launch_fp8_quant_act, token-major scales): e4m3 [rows, K] and fp32
  // [rows, K / 128].
  const uint8_t* q = nullptr;
  const float* sx = nullptr;
  const int32_t* src_rows = nullptr;  // optional [rows]: permuted row r reads activation row src_rows[r]
  void* out = nullptr;                // [rows, N] bf16
  const int32_t* counts = nullptr;    // [experts]
  const int32_t* offsets = nullptr;   // [experts]
  const int32_t* active = nullptr;    // optional: the experts with rows, ascending (moe_permute's), and their number
  const int32_t* num_active = nullptr;
  // Optional, as MoeGroupedGemmParams's (the grouping's slot records; needs max_active > 0): the small-M kernel
  // reads its slot in one load round, before the PDL wait with slots_settled (the down GEMM); other kernels ignore
  // them.
  const int32_t* slots = nullptr;
  bool slots_settled = false;
  int max_active = 0;  // host-known bound on *num_active; 0: experts
  int experts = 0;
  int64_t N = 0, K = 0;
  int64_t max_rows_per_expert = 0;  // host-known bound on counts[e]
  int64_t rows_hint = 0;            // rows a busy expert is expected to get (sizes the token-tile split); 0: max
  bool silu = false;
  // Small-M kernel: n8 output-column tiles per CTA (gate|up: 1 or 2, each with its up tile; down: 1, 2 or 4),
  // chosen by measurement (moe_fp8.cu). 0: the default (DSERVE_MOE_FP8_GATE_TILES /
  // DSERVE_MOE_FP8_DOWN_TILES, else the built-in choice). Every choice gives the same bits: each output column's
  // K split across warps and its reduction order do not depend on it.
  int col_tiles = 0;
  // Pipelined tile (launch_moe_fp8_grouped) shape past 8 rows per expert: 0 the default (env DSERVE_MOE_FP8_TILE,
  // else by rows_hint and silu, see moe_fp8.cu), or for A/B runs 1: 16 tokens x 64 weight rows per CTA, 2: 16 x
  // 128, 3: 32 x 128, 4: 8 x 64 (rows past 8 loop), 5: 32 x 64. The same bits for every choice.
  int tile = 0;
  // Small-M kernel as a two-stage walk of resident CTAs (moe_fp8.cu; needs slots, one load round, <= 8 rows an
  // expert): -1 (default) on unless DSERVE_MOE_FP8_PIPE=0, 0 off, 1 on where it applies (tests). The same bits
  // either way.
  int pipe = -1;
  // The wgmma walk's ring depth in 8 KB stages (moe_wgmma.cu): 0 its choice (walk_stages: by dtype and token
  // columns), or 4 / 6 / 8 (A/B runs: the ops set it from DSERVE_MOE_WGMMA_STAGES).
  int wgmma_stages = 0;
  // The walk's weight boxes with an L2 evict-first policy (the ops: on for FP8, DSERVE_MOE_WGMMA_EVICT_FIRST).
  bool wgmma_evict_first = false;
  // The wgmma walk's dynamic tiles (moe_wgmma.cu): int [2], zero before the launch and left zero after it (one
  // launch at a time on it; the ops keep one a stream). Null: static tiles. The same bits either way.
  int* walk_tile_counter = nullptr;
};

bool moe_fp8_gemm_supported(int64_t N, int64_t K, bool silu);
// The small-M path takes max_rows_per_expert <= kMoeFp8SmallMMax (decode); the tiled one any.
constexpr int64_t kMoeFp8SmallMMax = 16;
cudaError_t launch_moe_fp8_small_m(const MoeFp8GemmParams& p, cudaStream_t stream);
// Whether launch_moe_fp8_small_m takes the two-stage walk for p.
bool moe_fp8_small_m_pipes(const MoeFp8GemmParams& p);
cudaError_t launch_moe_fp8_grouped(const MoeFp8GemmParams& p, cudaStream_t stream);

// The small-M walk on Hopper's native FP8 tensor cores (moe_wgmma.cu; the ops' default where supported since
// session 39, DSERVE_MOE_FP8_WGMMA=0: the mma.sync walk). The other kernels' mma.sync e4m3 is emulated on Hopper.
// Tiles of one slot x 32 output columns with the SiLU (their gate and up rows: 64 wgmma rows) or 64 without; each
// tile's 128-deep blocks stream as two TMA boxes {128 B, 32 rows} into a ring of 8 KB stages (a producer warp)
// and a consumer warpgroup multiplies them by wgmma m64n{8,16}k32 e4m3 against the slot's token rows, 8 or 16 a pass
// (all of a tile's K staged in shared memory; an expert with more rows takes a pass over the tile's weights per 16),
// fresh accumulators per block scaled in fp32 (not bit-equal to the mma.sync kernels: FP8 wgmma accumulates a block
// at reduced precision). maps: one tensor map per expert over its weight [rows (2N with the SiLU), K], built by
// make_moe_wgmma_maps on the host and copied to 64-byte aligned device memory. Needs slot records and K <= 7168
// (moe_fp8_wgmma_walk_supported); the ops take it up to 16 tokens and past that up to
// DSERVE_MOE_WALK_MAX_TOKENS (256) where the rows average <= 8 an expert.
bool moe_fp8_wgmma_walk_supported(const MoeFp8GemmParams& p);
// One tensor map per expert weight of `rows` rows of row_bytes bytes (a multiple of 128) for the wgmma walks (this
// FP8 one, moe_gemm.h's bf16 one): boxes of 128 bytes x 32 rows with the 128-byte swizzle. False when the driver's
// encoder is missing or a pointer is null or not 16-byte aligned.
bool make_moe_wgmma_maps(const void* const* host_weights, int experts, int64_t rows, int64_t row_bytes,
                         CUtensorMap* out);
cudaError_t launch_moe_fp8_wgmma_walk(const MoeFp8GemmParams& p, const CUtensorMap* maps, cudaStream_t stream);

}  // namespace ds::kernels
