// MLA attention in absorbed (MQA) form over the paged latent cache: the decode kernel (wgmma, split-KV with
// a combine step), its host-side split plan, and a plain reference kernel for any head dims.
// Raw pointers + POD parameters; no allocation. Each launcher returns the launch error.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// The tensor-core kernel's fixed shape: cache rows of 576 (latent 512 | rope 64), value = first 512.
constexpr int kMlaHeadDim = 576;
constexpr int kMlaValueDim = 512;
constexpr int kMlaMaxSplits = 128;

// Semantics of ops/ops.h mla_attention_absorbed: query token t of sequence s (q_starts[s] <= t <
// q_starts[s+1]) at position positions[t] attends the context positions j <= positions[t], j < seq_lens[s]
// (only those listed in topk[t, :] when topk is set; -1 entries and duplicates-free lists assumed), each
// stored at slot block_table[s][j / page_size] * page_size + j % page_size of the cache.
struct MlaDecodeParams {
  const void* q = nullptr;               // [num_tokens, num_heads, head_dim] bf16, contiguous
  const void* cache = nullptr;           // [slots, head_dim] bf16, contiguous; or packed rows (cache_format)
  void* out = nullptr;                   // [num_tokens, num_heads, v_dim] bf16, contiguous
  float* part_o = nullptr;    // [num_splits, num_tokens * num_heads, v_dim] f32 scratch (num_splits > 1)
  float* part_lse = nullptr;  // [num_splits, num_tokens * num_heads] f32 scratch (num_splits > 1)
  const int32_t* q_starts = nullptr;     // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;     // [num_seqs]
  const int32_t* positions = nullptr;    // [num_tokens]
  const int32_t* block_table = nullptr;  // [num_seqs, max_pages]
  const int32_t* topk = nullptr;         // [num_tokens, topk_k] or null
  int num_seqs = 0;
  int num_tokens = 0;
  int num_heads = 0;
  int head_dim = kMlaHeadDim;  // the reference kernel takes any head_dim <= 1024, v_dim <= 1024
  int v_dim = kMlaValueDim;
  int64_t num_slots = 0;  // rows of the cache (bounds of the tensor-map loads)
  int max_pages = 0;
  int page_size = 0;
  int topk_k = 0;
  int max_q_len = 0;   // max new tokens of one sequence (sizes the grid)
  int num_splits = 1;  // from mla_decode_num_splits; at most kMlaMaxSplits
  int plan_context = 0;  // the context the split plan was made for (0: unknown); picks the kernel
  float scale = 1.0f;
  // KvFormat of the cache rows (kernels/kv_fp8.h; nope = v_dim, rope = head_dim - v_dim). Packed formats are
  // read by the tensor-core kernels without top-k (tiles dequantised to bf16 in shared memory) or the reference
  // kernel.
  int cache_format = 0;
  bool use_tma = true;  // tensor-map tile loads when possible (dense context, page_size % 64 == 0)
  bool skip_combine = false;  // num_splits > 1: leave the partials for launch_mla_combine_vc (no combine launch)
  // Transposed kernel with splits and no skip_combine: splits merged per thread-block cluster. -1: the launcher's
  // choice (all of them, when num_splits is 2, 4, 8 or 16 and those clusters all fit at once: no combine launch;
  // DSERVE_MLA_CLUSTER=0: none); 0 or 1: none; 2 / 4 / 8 / 16: that size when it divides num_splits (tests).
  int t16_cluster = -1;
  // Transposed kernel without a cluster merge: query rows a block. 0: the launcher's choice (mla_decode_t16_rows); 8
  // or 16: that many (tests).
  int t16_rows = 0;
};

// Host-side plan: how many pieces the context of each (sequence, 64 query rows) block is split into so the
// grid fills `num_sms` multiprocessors. Depends only on host-known sizes (no device reads), so a decode step
// stays graph-capturable; the kernel cuts each sequence's own context into that many pieces on the device,
// so any seq_lens at replay time are handled. max_context: m.max_seq_len (or topk_k when topk is set).
// rows_per_block: query rows of one block (64 for the wgmma kernel, 16 for the mma.sync one on packed caches).
int mla_decode_num_splits(int num_seqs, int num_tokens, int max_q_len, int num_heads, int max_context, bool topk,
                          int num_sms, int rows_per_block = 64);

// Scratch for a plan: part_o at offset 0, part_lse at mla_decode_lse_offset (256-aligned); 0 bytes when
// num_splits == 1.
size_t mla_decode_scratch_bytes(int num_splits, int num_tokens, int num_heads);
size_t mla_decode_lse_offset(int num_splits, int num_tokens, int num_heads);

// True when the tensor-core kernel handles these dims (576 / 512); otherwise use the reference kernel.
bool mla_decode_fast_supported(int head_dim, int v_dim);

// Tensor-core decode kernel (+ the combine kernel when num_splits > 1). head_dim 576, v_dim 512.
cudaError_t launch_mla_decode(const MlaDecodeParams& p, cudaStream_t stream);

// The mma.sync decode kernel with 16 query rows per block (mla_decode_m16.cu), which launch_mla_decode takes when
// it applies and the transposed kernel below does not (bf16 caches: only without tensor-map loads): packed FP8 caches whose sequences have at most 16 query rows (else the wgmma kernel dequantises
// 64-row tiles; this choice does not depend on num_splits / plan_context, so the split plan may ask it first);
// for bf16 caches one new token per sequence, at most 16 heads, and plans whose splits hold at most
// kMlaM16MaxUnits units of 64 context positions (plan_context >= 1), where a block is latency-bound and the 64-row
// wgmma tiles are three-quarters padding. Measured on the H100 (2026-11-25, dserve_mla_bench, 16 heads): 1 unit
// per split (batch 1 x 4K, 64 splits) 10.8 vs 12.7 us, V2-Lite batch 1 / 8 decode at context 288 -2%; 4 units per
// split (batch 8 x 4K, batch 64 x 512, batch 1 x 32K) 1-6% and 32 (batch 64 x 4K) 10% slower than the wgmma
// kernel, so those stay there. DSERVE_MLA_M16=0: never, =1: whenever the shape fits. Same split plan, scratch and combine.
constexpr int kMlaM16MaxUnits = 1;
bool mla_decode_m16_supported(const MlaDecodeParams& p);
// DSERVE_MLA_M16, read once for both launchers: 1 whenever it fits, 0 never, -1 (unset or other text) by the plan.
int mla_decode_m16_mode();
cudaError_t launch_mla_decode_m16(const MlaDecodeParams& p, cudaStream_t stream);

// The transposed wgmma kernel (mla_decode_t16.cu): S^T = K Q^T and O^T = V^T P^T with the (at most 16) query rows
// of a sequence as the wgmma N, so none of the tensor work is padding; bf16 caches without top-k, tiles by tensor
// map (page_size % 64 == 0). launch_mla_decode takes it when it applies (DSERVE_MLA_T16=0: never;
// DSERVE_MLA_M16=1 still forces the mma.sync kernel). Same split plan and scratch. tensor_map: the CUtensorMap
// launch_mla_decode made for the cache. Unless the partials are left for launch_mla_combine_vc, consecutive splits
// may run as thread-block clusters that merge their partials in distributed shared memory (MlaDecodeParams::
// t16_cluster): *merged = the splits merged per cluster (1: none), so num_splits / *merged partials are left for
// the combine (none when that is 1: the kernel wrote the output).
bool mla_decode_t16_supported(const MlaDecodeParams& p);
// The splits the transposed kernel merges per cluster for p (1: none), and how many clusters of `size` (2, 4, 8,
// 16) CTAs of it fit the current device at once (its GPCs bound them: 0 for other sizes).
int mla_decode_t16_cluster(const MlaDecodeParams& p);
int mla_decode_t16_max_clusters(int size);
// The transposed kernel's query rows a block (8 or 16) for a launch whose clusters merge `cluster` splits.
int mla_decode_t16_rows(const MlaDecodeParams& p, int cluster);
cudaError_t launch_mla_decode_t16(const MlaDecodeParams& p, const void* tensor_map, cudaStream_t stream,
                                  int* merged);

// The split combine fused with the absorbed W_UV product, for decode-sized steps: out[t, h, :] = merge over the
// splits of (part_o, part_lse)[t, h] (as the combine kernel, kept in fp32) @ w_vc[h] ([kMlaValueDim, v] bf16,
// fp32 sums, bf16 out). CTAs: (head, 32 output columns); each merges its head's rows and holds its weight slice
// in registers, loaded before the dependency wait. tokens <= kMlaCombineVcMaxTokens, v % 32 == 0, w_vc 16-byte
// aligned. Replaces the combine launch plus a batched GEMM launch after a split decode (skip_combine). Measured
// (H100, V2-Lite bench-one-batch, 2026-11-26): batch 1 -0.07..-0.11 ms per step, batch 4 about even, batch 8
// +0.03 ms (two tokens' merges per round no longer hide under one launch): hence 4 tokens at most.
constexpr int kMlaCombineVcMaxTokens = 4;
struct MlaCombineVcParams {
  const float* part_o = nullptr;    // [splits, tokens * heads, kMlaValueDim]
  const float* part_lse = nullptr;  // [splits, tokens * heads]
  const void* w_vc = nullptr;       // [heads, kMlaValueDim, v] bf16
  void* out = nullptr;              // [tokens, heads, v] bf16
  // Optional, when each token is its own sequence's only query row (decode steps without top-k): token t's
  // position and its sequence's length, step metadata read before the dependency wait to count the splits that
  // attend something (mla_decode_active_splits). A plan made for a longer context than the step's (a CUDA graph's)
  // then still merges in one round. Null: all `splits` are read.
  const int32_t* positions = nullptr;  // [tokens]
  const int32_t* seq_lens = nullptr;   // [tokens]
  int tokens = 0, heads = 0, splits = 0, v = 0;
  // Optional (v % 128 == 0): out's block-FP8 quantization for an FP8 consumer (o_proj) made in the same launch, bit
  // for bit what launch_fp8_quant_act makes from out: e4m3 [tokens, heads * v] and token-major fp32 scales [tokens,
  // heads * v / 128] (ue8m0: power-of-two scales). The launch then runs in clusters of the four blocks that share a
  // 128-column group, which exchange their column maxima through distributed shared memory.
  uint8_t* q = nullptr;
  float* q_scales = nullptr;
  bool q_ue8m0 = false;
};
// How every decode kernel cuts a context into the plan's splits: units of 64 positions (or of 64 top-k entries),
// ceil(units / num_splits) per split; split s takes units [begin, begin + count), count 0 past the context's end.
#ifdef __CUDACC__
#define DS_MLA_HD __host__ __device__
#else
#define DS_MLA_HD
#endif
constexpr int kMlaSplitUnit = 64;
struct MlaSplitUnits {
  int begin = 0, count = 0;
};
DS_MLA_HD inline MlaSplitUnits mla_decode_split_units(int units, int num_splits, int split) {
  const int per = (units + num_splits - 1) / num_splits;
  const int begin = split * per, n = (units < begin + per ? units : begin + per) - begin;
  return {begin, n > 0 ? n : 0};
}
// The splits of a num_splits plan that attend something for a query row whose context ends at kv_end (exclusive);
// the later splits write only a -inf log-sum-exp.
DS_MLA_HD inline int mla_decode_active_splits(int kv_end, int num_splits) {
  const int units = kv_end > 0 ? (kv_end + kMlaSplitUnit - 1) / kMlaSplitUnit : 0;
  if (units == 0 || num_splits < 1) return 0;
  const int per = (units + num_splits - 1) / num_splits;
  return (units + per - 1) / per;
}
#undef DS_MLA_HD
cudaError_t launch_mla_combine_vc(const MlaCombineVcParams& p, cudaStream_t stream);

// Reference kernel: one block per (token, head), CUDA cores, any head_dim/v_dim <= 1024. Ignores
// num_splits and the scratch pointers. Also the "naive" baseline of dserve_mla_bench.
cudaError_t launch_mla_decode_reference(const MlaDecodeParams& p, cudaStream_t stream);

}  // namespace ds::kernels
