// MtpDrafter: the draft half of MTP speculative decoding. After a step's target forward and verification it
// runs the MTP (NextN) layer over the positions the step made valid (filling the MTP layer's own KV cache,
// prompts included) and, for sequences that asked for drafts, chains the layer on its own output to propose
// the next step's draft tokens (greedy, one chain: SGLang's EAGLE with topk 1).
#pragma once
#include <cstdint>
#include <vector>

#include "model/deepseek_model.h"
#include "sched/step_plan.h"

namespace ds {

// Per plan sequence: the step made the target KV of tokens [start_pos, start_pos + valid) final (0: skip the
// sequence, e.g. its logits were not finite), `next_token` follows them (the sampled / bonus token, or for a
// prompt chunk that samples nothing the next prompt token), and draft_steps drafts are wanted (<= the plan's).
struct DraftSeq {
  int32_t valid = 0;
  int32_t next_token = -1;
  int32_t draft_steps = 0;
};

class MtpDrafter {
 public:
  // lockstep_steps > 0 (data-parallel attention, where the MTP layer's MLP is a collective): every run() and idle()
  // makes exactly 1 + (lockstep_steps - 1) MTP forwards, zero-token ones where this rank has nothing to draft, so
  // that the ranks' collectives meet; draft_steps never exceed it.
  MtpDrafter(DeepseekModel& model, Ops& ops, KvCache& cache, int lockstep_steps = 0)
      : model_(model), ops_(ops), cache_(cache), lockstep_steps_(lockstep_steps) {}
  // hidden: the step's target hidden states after model.norm, [plan.num_tokens(), d] on the backend. Returns the
  // drafts per plan sequence (empty where none were wanted; shorter where the draft logits were not finite).
  std::vector<std::vector<int32_t>> run(const StepPlan& plan, const Tensor& hidden, const std::vector<DraftSeq>& seqs);
  // A rank's idle step (lockstep only): the zero-token forwards of a run.
  void idle() { idle_forwards(0); }

 private:
  Tensor upload_ids(const std::vector<int32_t>& ids);
  // Lockstep: the zero-token MTP forwards left after `done` of a run's.
  void idle_forwards(int done);

  DeepseekModel& model_;
  Ops& ops_;
  KvCache& cache_;
  int lockstep_steps_ = 0;
};

}  // namespace ds
