// CudaGraphRunner: decode steps (every sequence adds one token) replayed from CUDA graphs, as SGLang's
// cuda_graph_runner.py: one graph per padded batch size, captured at startup over static input buffers
// (token ids, positions, cache slots, seq lens, block table) that each replay overwrites; padding rows
// write and read only a dummy page. The graph's output is the fp32 logits of every padded row: sampling
// stays outside the graph, except the greedy tokens of CudaGraphOptions::greedy_ids. With tokens_per_seq > 1
// the same for speculative decoding's verification steps (SGLang's target_verify graphs): every sequence adds its
// last token and its drafts, tokens_per_seq rows in the absorbed form, and the graph also keeps the hidden rows
// (the MTP drafter's input). With draft_steps > 0 the graphs are the MTP drafter's instead (SGLang's draft_extend
// and draft decode graphs in one): the MTP layer over every row of a verify step (next tokens, the verify graph's
// hidden rows), each sequence's last accepted row normed and headed into its first greedy draft, then
// draft_steps - 1 one-row MTP steps chained on their own normed output; the drafts come back to the host.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "model/deepseek_model.h"

namespace ds {

// SGLang's capture list: 1, 2, 4, 8, 12, 16..256 step 8, 272..496 step 16, then step 32, up to max_bs (which
// is always included). With speculative decoding (verify graphs) its finer one: 1..8, 10..32 step 2, 40..64 step 4,
// 72..256 step 8, then step 16.
std::vector<int> cuda_graph_batch_sizes(int max_bs, bool speculative = false);
// SGLang's --cuda-graph-max-bs default for one GPU (TP < 4) from its memory in bytes.
int default_cuda_graph_max_bs(double gpu_memory_bytes);
// The sizes captured for --cuda-graph-bs `requested` under a cap of max_bs (the request limit): those up to it,
// sorted and once each, plus max_bs itself where the list went past it (SGLang's get_batch_sizes_to_capture).
// Empty `requested`: cuda_graph_batch_sizes(max_bs, speculative).
std::vector<int> graph_capture_sizes(std::vector<int> requested, int max_bs, bool speculative = false);
// The captured size a batch of `n` pads to (the first >= n), or -1 when n exceeds them all.
int padded_batch_size(const std::vector<int>& sizes, int n);

struct CudaGraphOptions {
  int max_bs = 0;           // largest captured batch (--cuda-graph-max-bs); 0: default from GPU memory
  // --cuda-graph-bs: the sizes captured (each >= 1), capped by max_bs as graph_capture_sizes says; with max_bs 0
  // their largest is max_bs. Empty: SGLang's list up to max_bs.
  std::vector<int> batch_sizes;
  int64_t max_context = 0;  // longest sequence in tokens (sizes the static block table)
  int32_t dummy_page = -1;  // a cache page no sequence owns: padding rows use only it
  int plan_context = 0;     // context the split-KV attention plan is made for (0: min(max_context, 4096))
  bool verbose = true;      // log capture time
  // [rows] I32 on the device (BatchRunner::token_store): decode ids < 0 are placeholders resolved from it
  // inside the graph. Undefined: every id must be a real token.
  Tensor token_store;
  // Each graph ends with the greedy token of every row written into its own ids input (Ops::greedy_to_store_), so
  // replay(seqs, true) decodes the previous replay's tokens without the host seeing them (bench-one-batch keeps its
  // tokens on the device, as sglang.bench_one_batch does). The logits are still the graph's output.
  bool greedy_ids = false;
  // Rows each sequence adds (1: decode; speculative decoding's verify steps: num_steps + 1, the token and drafts).
  int tokens_per_seq = 1;
  // MTP draft graphs (> 0): the drafts each sequence proposes; draft_hidden is the verify runner's hidden() (read in
  // place by every replay: replay a draft graph after its verify step, before the next verify replay).
  int draft_steps = 0;
  Tensor draft_hidden;
  // Keep every replay's final hidden rows (hidden()) at tokens_per_seq 1 too: --enable-return-hidden-states (one
  // device copy a replay, only then). Verify graphs (tokens_per_seq > 1) always keep them.
  bool keep_hidden = false;
};

// One sequence of a decode step.
struct DecodeSeq {
  int32_t token = 0;
  int32_t position = 0;        // of `token`; the sequence's context after the step is position + 1
  int32_t slot = 0;            // cache slot its latent row goes to
  const int32_t* pages = nullptr;  // page table covering [0, position]
  int32_t num_pages = 0;
  // Runners of tokens_per_seq = n > 1: the n tokens (token unused) at positions position .. position + n - 1 and
  // their n cache slots (slot unused); the page table covers the last of them.
  const int32_t* tokens = nullptr;
  const int32_t* slots = nullptr;
  // Draft runners: tokens are the tokens after each row (the next ids the MTP layer embeds), and the first `valid`
  // rows are the accepted ones (>= 1): row valid - 1 drafts, the chained steps at the positions after it. The rows
  // past it are run too (their MTP cache rows are rewritten before anything reads them: the chained steps write
  // positions from valid on, and the next step's MTP forward the rows it accepts).
  int32_t valid = 0;
};

// What the captured graphs hold (summed over batch sizes): kernel nodes, memory (alloc / free) nodes, other nodes,
// and of the edges between two kernel nodes those that are programmatic (the second may start before the first ends,
// kernels/pdl.cuh). With the graph arena (cuda_runtime.h) a decode graph should hold no memory node.
struct CudaGraphStats {
  int64_t kernel_nodes = 0, memory_nodes = 0, other_nodes = 0;
  int64_t kernel_edges = 0, programmatic_edges = 0;
  int64_t arena_fallbacks = 0;  // capture allocations that missed the graph arena (each a memory node pair)
  int64_t arena_recaptures = 0;  // captures repeated on a larger region (the warm-up's guess was short)
  size_t arena_bytes = 0;       // the graph region's size after the captures
  int64_t l2_window_nodes = 0;  // kernel nodes given the arena's L2 window (DSERVE_L2_PERSIST_ARENA)
};

class CudaGraphRunner {
 public:
  // Error when graphs cannot be used: not a CUDA backend, no dummy page, bad options. (V3.2's indexer sizes its
  // grid and scratch by the static block table's capacity, so its graphs replay with any context.)
  static Result<std::unique_ptr<CudaGraphRunner>> create(DeepseekModel& model, Ops& ops, const KvCache& cache,
                                                         CudaGraphOptions opts);
  ~CudaGraphRunner();

  // Captures one graph per batch size (each after an eager warm-up step on padding rows only).
  Status capture();
  double capture_seconds() const { return capture_seconds_; }
  const CudaGraphStats& stats() const { return stats_; }
  int max_bs() const { return sizes_.empty() ? 0 : sizes_.back(); }
  const std::vector<int>& batch_sizes() const { return sizes_; }
  bool can_run(int num_seqs) const { return num_seqs >= 1 && num_seqs <= max_bs(); }
  // Placeholder ids (< 0) are resolved from CudaGraphOptions::token_store inside the graphs.
  bool resolves_placeholders() const { return opts_.token_store.defined(); }

  // Runs one decode step for seqs (1 <= size <= max_bs): the logits [padded_bs * tokens_per_seq, vocab] fp32 on the
  // device, rows [0, seqs.size() * tokens_per_seq) real (sequence after sequence). The tensor is the graph's static
  // output: valid until the next replay.
  // ids_on_device (greedy_ids graphs only): the seqs' tokens are ignored and each row decodes the token the previous
  // replay of the same batch size chose for it.
  Tensor replay(const std::vector<DecodeSeq>& seqs, bool ids_on_device = false);
  // Draft runners: the drafts of seqs (1 <= size <= max_bs), draft_steps each (greedy; a row whose draft logits
  // are not finite drafts token 0: verification rejects it), on the host. Waits for the graph.
  std::vector<std::vector<int32_t>> replay_drafts(const std::vector<DecodeSeq>& seqs);
  // Waits for the last replay (and everything before it on the compute stream).
  void synchronize();
  // The last replay's final hidden rows, [padded_bs * tokens_per_seq, hidden] on the device (laid out as the
  // logits): a static buffer, valid until the next replay.
  Tensor hidden() const;
  bool keeps_hidden() const { return opts_.tokens_per_seq > 1 || opts_.keep_hidden; }
  int tokens_per_seq() const { return opts_.tokens_per_seq; }
  int draft_steps() const { return opts_.draft_steps; }

 private:
  struct Impl;
  CudaGraphRunner(DeepseekModel& model, Ops& ops, const KvCache& cache, CudaGraphOptions opts);
  // The inputs of `seqs`, padded to `bs` rows, into the static device buffers (async, from pinned memory).
  void write_inputs(const std::vector<DecodeSeq>& seqs, int bs, bool keep_ids = false);

  DeepseekModel& model_;
  Ops& ops_;
  KvCache cache_;
  CudaGraphOptions opts_;
  std::vector<int> sizes_;
  double capture_seconds_ = 0;
  CudaGraphStats stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds
