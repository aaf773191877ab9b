// BatchRunner: executes one StepPlan on the model (metadata upload, forward, logits of the rows that need
// them, sampling with penalties, log-probabilities). Policy-free: it does what the plan says.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/deepseek_model.h"
#include "runner/cuda_graph_runner.h"
#include "runner/engine.h"
#include "runner/sampler.h"
#include "sched/step_plan.h"

namespace ds {

// What the runner needs to know about a request beyond the plan (set at submit).
struct RunnerRequestInfo {
  bool return_logprob = false;
  int32_t logprob_start_len = -1;
  int32_t top_logprobs_num = 0;
};

struct SeqOutput {
  int32_t token = -1;                       // sampled token (needs_sample rows only)
  TokenLogprob logprob;                     // of `token`, when return_logprob
  // (prompt position, its logprob) for prompt positions this step computed, when requested
  std::vector<std::pair<int32_t, TokenLogprob>> input_logprobs;
  std::string error;  // non-empty: this sequence's logits were not finite; the engine fails the request
};

class BatchRunner {
 public:
  BatchRunner(DeepseekModel& model, Ops& ops, KvCache cache);

  // Runs `plan`; outputs[i] belongs to plan.seqs[i].
  std::vector<SeqOutput> execute(const StepPlan& plan,
                                 const std::unordered_map<std::string, RunnerRequestInfo>& info);
  // Decode-only steps that fit replay from these CUDA graphs (captured over this runner's cache).
  void set_cuda_graphs(std::unique_ptr<CudaGraphRunner> graphs) { graphs_ = std::move(graphs); }
  // Forgets a finished request's sampler state.
  void release(const std::string& rid) { samplers_.erase(rid); }

 private:
  TokenLogprob logprob_at(const float* logprobs, int64_t vocab, int32_t id, int32_t top_k) const;

  DeepseekModel& model_;
  Ops& ops_;
  KvCache cache_;
  std::unordered_map<std::string, Sampler> samplers_;  // per request: seeded generator state
  std::unordered_map<int32_t, int32_t> last_token_by_row_;  // the last sampled token per request row (overlap)
  std::unique_ptr<CudaGraphRunner> graphs_;            // null: eager decode
};

// Attention metadata straight from a plan (positions and slots as the scheduler computed them).
AttnMetadata build_attn_metadata(const StepPlan& plan, Ops& ops);

}  // namespace ds
