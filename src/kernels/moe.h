// DeepSeekMoE kernels: routing (softmax/sigmoid scores, optional correction bias, greedy / group-limited /
// noaux_tc group selection, top-k, normalisation and scaling) with one warp per token, and the token
// permutation by expert plus the weighted un-permutation around the per-expert GEMMs.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

enum class RouteMethod : int { kGreedy, kGroupLimitedGreedy, kNoauxTc };

// Semantics of CpuOps::moe_route; ties go to the lower expert / group index.
struct MoeRouteParams {
  const float* logits;  // [tokens, experts]
  const float* bias;    // [experts] or null (selection only)
  int32_t* topk_ids;    // [tokens, top_k + shared], the picks in descending order of the selection score
  float* topk_weights;  // [tokens, top_k + shared]
  int64_t tokens;
  int experts, top_k, n_group, topk_group;
  RouteMethod method;
  bool sigmoid, norm_topk_prob;
  float routed_scaling_factor;
  // Shared experts run as routed ones (SGLang's shared-experts fusion): after its top_k picks every token gets the
  // entries experts, ..., experts + shared - 1 with weight 1 (the shared MLP cut into expert-sized parts).
  int shared = 0;
};
// Entries a token gets: its picks, then the shared experts.
__host__ __device__ inline int route_width(const MoeRouteParams& p) { return p.top_k + p.shared; }
cudaError_t launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);

// SGLang's expert distribution recorder (stat mode): counts[e] += the entries of expert e in [0, experts) among the
// first rows of topk_ids (*real_rows where given: a CUDA graph's padded batch; else all tokens); other ids (fused
// shared experts) are not counted. Shared-memory histogram a block, then one atomic a block and expert.
struct MoeCountParams {
  const int32_t* topk_ids;   // [tokens, width]
  const int32_t* real_rows;  // [1] or null
  int32_t* counts;           // [experts], accumulated
  int64_t tokens;
  int width, experts;
};
cudaError_t launch_moe_count_experts(const MoeCountParams& p, cudaStream_t stream);

// SGLang's return_routed_experts: out[t * out_stride + column + j] = topk_ids[t * width + j], t < tokens, j < k.
struct MoeRecordParams {
  const int32_t* topk_ids;  // [tokens, width]
  int32_t* out;             // [>= tokens, out_stride]
  int64_t tokens, out_stride, column;
  int width, k;
};
cudaError_t launch_moe_record_ids(const MoeRecordParams& p, cudaStream_t stream);

// Groups the tokens * top_k (token, expert) entries by expert (with fused shared experts: top_k = route_width,
// experts = routed + shared): counts[e], offsets[e] (exclusive prefix
// sum), row_of[i] = the entry's row in the permuted order (-1 for an id outside [0, experts)), and
// src_token[row] = the token of each permuted row. One block (shared-memory counters and a parallel scan,
// at most 6144 experts); the order of rows within an expert is unspecified (each row is computed
// independently).
struct MoePermuteParams {
  const int32_t* topk_ids;  // [tokens * top_k]
  int32_t* counts;          // [experts]
  int32_t* offsets;         // [experts]
  int32_t* cursor;          // [experts] scratch (unused: the kernel keeps its cursors in shared memory)
  int32_t* row_of;          // [tokens * top_k]
  int32_t* src_token;       // [tokens * top_k]
  int64_t entries;
  int top_k, experts;
  int32_t* active = nullptr;      // optional [experts]: the experts with rows, ascending, in [0, *num_active)
  int32_t* num_active = nullptr;  // optional [1]
  // Optional (needs active and num_active; 16-byte aligned): one record of kMoeSlotInts per slot s <
  // min(experts, entries): the active expert active[s], its count and offset, then the source tokens of its first
  // kMoeSlotSrc rows; count 0 past the active experts. The decode expert kernels read their slot in one load round
  // (instead of num_active, then active, then counts / offsets, then src_token).
  int32_t* slots = nullptr;
};
constexpr int kMoeSlotInts = 32;    // a slot record: 128 bytes
constexpr int kMoeSlotHeader = 4;   // {expert, count, offset, 0}
constexpr int kMoeSlotSrc = 16;     // source tokens of the first 16 rows, from int kMoeSlotHeader on
// Slot records of a grouping of `entries` entries over `experts` experts: min(experts, entries).
__host__ __device__ constexpr int64_t moe_slot_count(int experts, int64_t entries) {
  return experts < entries ? experts : entries;
}
cudaError_t launch_moe_permute(const MoePermuteParams& p, cudaStream_t stream);

// Decode-sized routing and grouping in one launch (one CTA, a warp per token): moe_route, then moe_permute on the
// ids it wrote (permute.topk_ids = route.topk_ids), without the launch boundary between them. Up to 256 experts
// with top_k and n_group <= 32 (every DeepSeek config), each lane keeps its experts' scores in registers, a pick is
// one pair of warp reductions and the grouping is counted from the ids in shared memory (rows of an expert in
// entry order); DSERVE_MOE_ROUTE_FAST=0 (read per launch) takes the shared-memory routing and atomic grouping.
constexpr int kMoeRoutePermuteMaxTokens = 16;
// Whether launch_moe_route_permute takes these (1 <= tokens <= 16, the grouping of exactly these ids).
bool moe_route_permute_supported(const MoeRouteParams& route, const MoePermuteParams& permute);
cudaError_t launch_moe_route_permute(const MoeRouteParams& route, const MoePermuteParams& permute, cudaStream_t stream);

// Decode-sized routing in one launch: router logits = x . w^T (bf16 inputs, fp32 sums) for every expert,
// then, in the CTA that finishes last, moe_route and moe_permute on them (route.logits = logits,
// permute.topk_ids = route.topk_ids). One warp per expert row, staged in shared memory before the PDL
// wait. ticket: a device counter that is 0 before the launch (the last CTA resets it).
struct MoeGateRouteParams {
  const void* x;    // [tokens, dim] bf16
  const void* w;    // [experts, dim] bf16
  float* logits;    // [tokens, experts]
  uint32_t* ticket;
  int64_t dim;
  MoeRouteParams route;
  MoePermuteParams permute;
};
constexpr int kMoeGateRouteMaxTokens = 8;
constexpr int64_t kMoeGateRouteMaxDim = 7168;
// Whether launch_moe_gate_route takes these sizes (tokens <= 8, dim % 8 == 0 and <= 7168, 16-byte aligned x and w).
bool moe_gate_route_supported(const MoeGateRouteParams& p);
cudaError_t launch_moe_gate_route(const MoeGateRouteParams& p, cudaStream_t stream);

// xp[r, :] = x[src_token[r], :] for r < rows (bf16).
cudaError_t launch_gather_rows(const void* x, const int32_t* src, void* out, int64_t rows, int64_t dim,
                               cudaStream_t stream);

// out[t, :] = sum_k weights[t, k] * y[row_of[t * top_k + k], :] (+ addend[t, :]) in fp32, rounded once (bf16 y
// and out; rows -1 skipped; the optional addend [tokens, dim] bf16 or fp32: the shared expert's output).
// 16-byte vectors and (token, 1024-column) blocks when dim % 8 == 0, y, out and addend are 16-byte aligned and
// top_k <= 9 (V3's 8 picks and its fused shared expert); else one block per token.
struct MoeCombineParams {
  const void* y;
  const int32_t* row_of;
  const float* weights;
  void* out;
  int64_t tokens, dim;
  int top_k;
  const void* addend = nullptr;
  bool addend_f32 = false;
  // row_of and weights were written at least two launches before this one in the stream (the grouped MoE paths:
  // the expert GEMMs run in between), so the kernel reads them before its PDL wait: the launch between them
  // passed its own wait, i.e. their writer had completed, before it let this kernel start.
  bool ids_settled = false;
  // Set when the addend is made on another stream with no stream or graph edge to this launch (CudaOps' flag
  // join): two words [ready, arrivals], both 0 before the signal. launch_moe_addend_signal, queued on the addend's
  // stream after its writer, sets ready; every CTA of the consumer (this combine, or the norm that sums it) waits
  // for it after its PDL wait, and the last CTA to arrive sets both words back to 0 for the next signal.
  uint32_t* addend_ready = nullptr;
};
cudaError_t launch_moe_combine(const MoeCombineParams& p, cudaStream_t stream);
// MoeCombineParams::addend_ready's signal: a PDL launch on the addend's stream right after its last writer (its wait
// orders it after that kernel's completion and writes), then ready[0] = 1 with release semantics. Why not an event
// join: in a CUDA graph a kernel with an edge from another stream's branch does not start before its own stream's
// previous kernel ends (PDLJOIN in pdl_gpu_test.cpp), which made the MoE-summing norm a serial link of every layer.
cudaError_t launch_moe_addend_signal(uint32_t* ready, cudaStream_t stream);

}  // namespace ds::kernels
