// BatchRunner: executes one StepPlan on the model (metadata upload, forward, logits of the rows that need
// them, sampling with penalties, log-probabilities). Policy-free: it does what the plan says.
#pragma once
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/deepseek_model.h"
#include "runner/cuda_graph_runner.h"
#include "runner/engine.h"
#include "runner/mtp_drafter.h"
#include "runner/ngram_drafter.h"
#include "runner/sampler.h"
#include "sched/step_plan.h"

namespace ds {

// What the runner needs to know about a request beyond the plan (set at submit).
struct RunnerRequestInfo {
  bool return_logprob = false;
  int32_t logprob_start_len = -1;
  int32_t top_logprobs_num = 0;
  std::shared_ptr<const TokenFsm> grammar;  // constrained decoding (EngineRequest::grammar)
  std::vector<int32_t> token_ids_logprob;   // EngineRequest::token_ids_logprob
  bool return_hidden_states = false;        // EngineRequest::return_hidden_states
  bool return_routed_experts = false;       // EngineRequest::return_routed_experts
};

struct SeqOutput {
  int32_t token = -1;                       // sampled token (needs_sample rows only)
  TokenLogprob logprob;                     // of `token`, when return_logprob
  // Speculative decoding: the leading drafts that matched the target's own samples (before `token`, the one
  // sampled after them), their logprobs when return_logprob, and the drafts made for the next step.
  std::vector<int32_t> accepted_drafts;
  std::vector<TokenLogprob> accepted_logprobs;
  std::vector<int32_t> next_drafts;
  // (prompt position, its logprob) for prompt positions this step computed, when requested
  std::vector<std::pair<int32_t, TokenLogprob>> input_logprobs;
  // return_hidden_states: (position, final-normed hidden row) of every row this step computed whose token is final
  // (prompt rows, the fed token, accepted drafts; not rejected drafts), in position order.
  std::vector<std::pair<int32_t, std::vector<float>>> hidden_rows;
  // return_routed_experts: (position, its token's routed picks [num_hidden_layers * top_k]) for the same rows.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> routed_rows;
  std::string error;  // non-empty: this sequence's logits were not finite; the engine fails the request
};

// A step whose work is queued on the backend: finish() waits for its sampled ids.
struct LaunchedStep {
  std::vector<SeqOutput> out;                 // [plan.seqs]; prompt logprobs already filled in
  std::unique_ptr<PendingSample> sample;      // null when nothing was sampled
  std::vector<std::pair<size_t, int32_t>> sampled;  // per sampled row: (seq index, position)
  std::vector<uint8_t> want_logprob;          // per sampled row
  std::vector<std::pair<int32_t, int32_t>> id_ranges;  // per sampled row: its [begin, end) of logprob_ids
  std::vector<int32_t> logprob_ids;           // the batch's requested ids (SampleBatch::logprob_ids)
  // Speculative decoding: what finish() needs to verify and draft (the step's target hidden states, the plan,
  // and the samplers of sequences that drew a uniform for every draft, as they were before the step).
  Tensor hidden;                              // [plan tokens, d]
  std::shared_ptr<const StepPlan> plan;
  std::vector<std::pair<size_t, Sampler>> rewind;
  bool graph_verify = false;  // replayed from a verify graph: its hidden rows are the draft graphs' input
  // return_hidden_states / return_routed_experts: the rows of the requests that asked, gathered on the backend at
  // launch (so a later replay cannot overwrite them), and each row's sequence, position and its sequence's first draft
  // position (rows from there on are kept only for accepted drafts).
  struct RowOwner {
    size_t seq = 0;
    int32_t pos = 0;
    int32_t draft_from = 0;
  };
  Tensor hidden_rows;                         // [hidden_owner.size(), d]
  std::vector<RowOwner> hidden_owner;
  Tensor routed_rows;                         // [routed_owner.size(), num_hidden_layers * top_k] I32
  std::vector<RowOwner> routed_owner;
};

class BatchRunner {
 public:
  // Request rows (StepPlan's SeqStep::row) are in [0, max_rows).
  BatchRunner(DeepseekModel& model, Ops& ops, KvCache cache, int32_t max_rows);

  // Queues `plan` on the backend and returns without waiting for the device (unless prompt-row logprobs
  // are requested: those read the log-softmax on the host). Steps must be launched in plan order; a
  // placeholder input (kPlaceholderToken) of a decode takes the token the latest launched step sampled for
  // that row, on the device.
  LaunchedStep launch(const StepPlan& plan, const std::unordered_map<std::string, RunnerRequestInfo>& info);
  // Waits for a launched step; outputs[i] belongs to plan.seqs[i]. Finish in launch order.
  std::vector<SeqOutput> finish(LaunchedStep step);
  // True when launching `plan` would wait for the device (a prefill-sized MoE step, prompt-row logprobs).
  bool launch_waits(const StepPlan& plan, const std::unordered_map<std::string, RunnerRequestInfo>& info) const;
  // launch + finish.
  std::vector<SeqOutput> execute(const StepPlan& plan,
                                 const std::unordered_map<std::string, RunnerRequestInfo>& info) {
    return finish(launch(plan, info));
  }
  // Decode-only steps that fit replay from these CUDA graphs (captured over this runner's cache, with
  // token_store() as their placeholder source).
  void set_cuda_graphs(std::unique_ptr<CudaGraphRunner> graphs) { graphs_ = std::move(graphs); }
  // Speculative decoding with verify graphs: the MTP drafter's graphs (CudaGraphOptions::draft_steps, over the verify
  // graphs' hidden rows), replayed after a graph verify step whose every sequence drafts again.
  void set_draft_graphs(std::unique_ptr<CudaGraphRunner> graphs) { draft_graphs_ = std::move(graphs); }
  CudaGraphRunner* cuda_graphs() const { return graphs_.get(); }
  // Steps replayed from the CUDA graphs so far (any thread).
  uint64_t graph_steps() const { return graph_steps_.load(std::memory_order_relaxed); }
  // [max_rows] I32 on the backend: each row's last sampled token (placeholders read it).
  const Tensor& token_store() const { return token_store_; }
  // Forgets a finished request's sampler state.
  void release(const std::string& rid) {
    samplers_.erase(rid);
    grammar_state_.erase(rid);
    if (ngram_) ngram_->release(rid);
  }
  // MTP speculative decoding (the model has an MTP layer and the cache its layer): every step then also runs the
  // MTP layer over the positions it made valid, and sampling sequences get the plan's draft_steps drafts. Decodes
  // that feed drafts sample every draft's row and keep the longest prefix of drafts that equals the target's own
  // samples, plus the sample after it: the tokens (and, seeded, the draws) of decoding without drafts. CUDA graphs
  // (set_cuda_graphs) are then verify graphs (CudaGraphOptions::tokens_per_seq = steps + 1).
  // num_steps: --speculative-num-steps (data-parallel attention: the drafter's MTP forwards a step, every rank alike).
  // ngram (--speculative-algorithm NGRAM): drafts from each request's own tokens instead (no MTP layer).
  void enable_speculative(int num_steps, const NgramOptions* ngram = nullptr);
  bool speculative() const { return drafter_ || ngram_; }
  // Tensor parallelism: ranks but 0 compute the same rows, which nobody reads: they skip return_hidden_states' and
  // return_routed_experts' gathers.
  void set_reports_rows(bool on) { reports_rows_ = on; }
  // Data-parallel attention: a zero-token forward for a rank with nothing planned, so that its MLP collectives
  // meet the other ranks' (ModelOptions::dp_attention).
  void idle_step();

 private:
  TokenLogprob logprob_at(const float* logprobs, int64_t vocab, int32_t id, int32_t top_k) const;
  // The drafts of a graph verify step from the draft graphs, or false where a sequence does not fit them (a failed
  // one, one that drafts nothing).
  bool graph_drafts(const StepPlan& plan, const std::vector<DraftSeq>& d, std::vector<SeqOutput>& out);
  // Constrained decoding: bans every id of [0, vocab) the grammar does not allow after req's output so far (its
  // state advanced over the outputs not yet read) and, for a verification row, the drafts before it, into pens where
  // the id has an entry, else appended to out.
  void constrain(const TokenFsm& g, const Request& req, std::span<const int32_t> drafts_before, int64_t vocab,
                 std::unordered_map<int32_t, SamplePenalty>& pens, std::vector<SamplePenalty>& out);

  DeepseekModel& model_;
  Ops& ops_;
  KvCache cache_;
  std::unordered_map<std::string, Sampler> samplers_;  // per request: seeded generator state
  struct GrammarState {
    int state = 0;      // TokenFsm state after the first `read` outputs
    size_t read = 0;
  };
  std::unordered_map<std::string, GrammarState> grammar_state_;  // constrained requests
  Tensor token_store_;                 // [max_rows] I32 on the backend
  std::vector<uint8_t> row_sampled_;   // [max_rows] a launched step sampled this row (placeholder check)
  std::unique_ptr<CudaGraphRunner> graphs_;            // null: eager decode
  std::unique_ptr<CudaGraphRunner> draft_graphs_;      // null: the eager drafter only
  std::atomic<uint64_t> graph_steps_{0};
  std::unique_ptr<MtpDrafter> drafter_;                // MTP drafts (null: none)
  std::unique_ptr<NgramDrafter> ngram_;                // NGRAM drafts (null: none)
  bool reports_rows_ = true;                           // set_reports_rows
};

// Attention metadata straight from a plan (positions and slots as the scheduler computed them).
AttnMetadata build_attn_metadata(const StepPlan& plan, Ops& ops);

}  // namespace ds
