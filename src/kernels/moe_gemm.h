// Device-driven grouped expert GEMM for DeepSeekMoE: every expert's rows of the permuted activations times
// that expert's weight, with per-expert row counts/offsets read on the device (from moe_permute), so the
// launch needs no host sync and is graph-capturable (grid sized for the worst case; empty experts exit).
#pragma once
#include <cstdint>

#include <cuda.h>  // CUtensorMap (type only)
#include <cuda_runtime.h>

namespace ds::kernels {

// out[offsets[e] + i, n] = sum_k x[offsets[e] + i, k] * W_e[n, k] for i < counts[e] (bf16 in, fp32
// accumulate on tensor cores, bf16 out). With silu: W_e is [2N, K] (gate rows [0, N), up rows [N, 2N)) and
// out[r, n] = silu(gate) * up computed in fp32 ([rows, N] out). Rows outside every expert are not written.
// Requirements (moe_grouped_gemm_supported): K % 8 == 0, 16-byte aligned x / out rows and weights.
struct MoeGroupedGemmParams {
  const void* const* weights = nullptr;  // [experts] device array of bf16 [N (or 2N), K] row-major pointers
  const void* x = nullptr;               // [rows, K] bf16 (or [tokens, K] with src_rows)
  const int32_t* src_rows = nullptr;     // optional [rows]: permuted row r reads x[src_rows[r]] (no gather)
  void* out = nullptr;                   // [rows, N] bf16
  const int32_t* counts = nullptr;       // [experts]
  const int32_t* offsets = nullptr;      // [experts]
  // Optional (moe_permute's): the experts with rows and their number. Blocks then cover only
  // min(experts, max_active) experts, so a decode step with few routed experts launches few blocks.
  const int32_t* active = nullptr;
  const int32_t* num_active = nullptr;
  // Optional (the grouping's slot records, kernels/moe.h; needs max_active > 0 and experts <= 256): the decode
  // (small-M) kernel reads its expert, count, offset and source rows from slot blockIdx.y in one load round and
  // the expert's weight pointer from a table each warp holds in registers (loaded before the PDL wait); the
  // other kernels ignore it.
  const int32_t* slots = nullptr;
  // The slots were written at least two launches before this one (kernels/pdl.cuh): the small-M kernel reads its
  // slot, and issues its first round of weights, before the PDL wait (the op's down GEMM after the gate|up one).
  bool slots_settled = false;
  int max_active = 0;  // host-known bound on *num_active (tokens * top_k); 0: experts
  int experts = 0;
  int64_t N = 0;  // output columns
  int64_t K = 0;
  int64_t max_rows_per_expert = 0;  // host-known bound (tokens; rows of one expert): picks the token tile
  // Rows a busy expert is expected to get (e.g. twice the mean): sizes how many blocks split one expert's token
  // tiles (each block loops over tiles, so any count is handled). 0: max_rows_per_expert.
  int64_t rows_hint = 0;
  bool silu = false;
  // Pipelined tile shape past 8 rows per expert (the small-M stream off or K % 32 != 0 below 16): 0 the default
  // (env DSERVE_MOE_TILE, else by rows_hint), or for A/B runs the shapes of MoeFp8GemmParams::tile
  // (1: 16 tokens x 64 weight rows, 2: 16 x 128, 3: 32 x 128, 4: 8 x 64, 5: 32 x 64). Same bits for all.
  int tile = 0;
  // The small-M kernel as a two-stage walk of resident CTAs (moe_gemm.cu; needs slot records, <= 8 rows an
  // expert): -1 (default) by DSERVE_MOE_SMALL_WALK (read per launch: 0 off, 1 the down product, 2 down and
  // gate|up; unset: the down product at one token where its tiles are few, moe_gemm.cu walk_by_default), 0 off,
  // 1 the down product, 2 both (tests). The same bits either way.
  int walk = -1;
  // The wgmma walk's ring depth in 8 KB stages (moe_wgmma.cu): 0 its choice (walk_stages: by dtype and token
  // columns), or 4 / 6 / 8 (A/B runs: the ops set it from DSERVE_MOE_WGMMA_STAGES).
  int wgmma_stages = 0;
  // The walk's weight boxes with an L2 evict-first policy (the ops: on for FP8, DSERVE_MOE_WGMMA_EVICT_FIRST).
  bool wgmma_evict_first = false;
  // The wgmma walk's dynamic tiles (moe_wgmma.cu): int [2], zero before the launch and left zero after it (one
  // launch at a time on it; the ops keep one a stream). Null: static tiles. The same bits either way.
  int* walk_tile_counter = nullptr;
};

// The host-known bounds of a grouped step as the MoE ops set them, for MoeGroupedGemmParams and MoeFp8GemmParams
// alike: `routed` rows (tokens x top-k) over `experts` experts from `tokens` tokens (an expert appears at most once
// per token, so at most min(routed, experts) experts have rows), rows_hint twice the mean load (early-exit blocks
// are not free either).
template <typename Params>
void set_moe_bounds(Params& p, int64_t routed, int experts, int64_t tokens) {
  p.max_active = static_cast<int>(routed < experts ? routed : experts);
  p.experts = experts;
  p.max_rows_per_expert = tokens;
  p.rows_hint = 2 * ((routed + experts - 1) / experts);
}

// A pipelined tile shape forced from the environment for A/B runs (DSERVE_MOE_TILE for the bf16 kernel,
// DSERVE_MOE_FP8_TILE for the FP8 one; the same numbering, 1..5): its number, or 0 when unset or out of range.
int moe_env_tile(const char* name);

// The decode walk on wgmma bf16 (moe_wgmma.cu, the FP8 walk's kernel over the same bytes without scales; the ops'
// default, DSERVE_MOE_BF16_WGMMA=n: from n tokens on): tiles of one slot x 32 output columns with the SiLU or 64
// without, 128-byte blocks of K (64 bf16) streamed by TMA into a ring of 8 KB stages (wgmma_stages), wgmma
// m64n{8,16}k16 against the slot's token rows, 8 or 16 a pass (all of K staged in shared memory: K <= 7168 at 8
// rows, 3584 at 16; an expert with more rows takes a pass over the tile's weights per 16). Not bit-equal to the
// mma.sync kernels (another summation order). maps: make_moe_wgmma_maps (moe_fp8.h) over the experts' [rows, K] bf16
// weights (row_bytes 2K). Needs slot records (moe_bf16_wgmma_walk_supported); the ops take it up to 16 tokens and past
// that up to DSERVE_MOE_WALK_MAX_TOKENS (256) where the rows average <= 8 an expert.
bool moe_bf16_wgmma_walk_supported(const MoeGroupedGemmParams& p);
cudaError_t launch_moe_bf16_wgmma_walk(const MoeGroupedGemmParams& p, const CUtensorMap* maps, cudaStream_t stream);

bool moe_grouped_gemm_supported(int64_t N, int64_t K);
cudaError_t launch_moe_grouped_gemm(const MoeGroupedGemmParams& p, cudaStream_t stream);

}  // namespace ds::kernels
