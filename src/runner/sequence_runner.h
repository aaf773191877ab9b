// SequenceRunner: drives one sequence at a time through the model with its own pages (no scheduler):
// teacher-forced scoring and prefill-then-decode generation for the `score` / `generate` commands and
// for model tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/deepseek_model.h"
#include "runner/sampler.h"

namespace ds {

struct ScoreResult {
  std::vector<float> token_logprobs;                                // [n]; entry 0 unused (no prefix)
  std::vector<std::vector<std::pair<float, int32_t>>> top_logprobs;  // [n] entry i predicts token i
  std::vector<std::pair<float, int32_t>> next_top;                   // after the last token
};

struct GenerateResult {
  std::vector<int32_t> output_ids;
  std::vector<float> output_logprobs;
  std::string finish_reason;  // "length" or "stop"
};

struct GenerateOptions {
  int max_new_tokens = 16;
  SamplingParams sampling;  // temperature, top-k/p, min-p, seed; stop ids and ignore_eos
};

class SequenceRunner {
 public:
  SequenceRunner(DeepseekModel& model, Ops& ops, int page_size = 64, KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

  // Log-probabilities of every token given its prefix. chunk > 0 prefills in chunks of that many tokens
  // (each chunk attends to the cached prefix), else in one step.
  ScoreResult score(const std::vector<int32_t>& ids, int top_k, AttnMode mode = AttnMode::kAuto, int chunk = 0);
  // The final-normed hidden rows of `ids` in one prefill ([n, d] fp32 on the host): return_hidden_states' reference.
  Tensor hidden_states(const std::vector<int32_t>& ids, AttnMode mode = AttnMode::kAuto);
  // The routed experts of `ids` in one prefill ([n, layers * top_k] I32 on the host; the model's routed capture is
  // turned on here): return_routed_experts' reference.
  Tensor routed_experts(const std::vector<int32_t>& ids);
  // generate() decodes through a CUDA graph (batch size 1, captured per call) on the CUDA backend.
  void set_use_cuda_graphs(bool on) { use_cuda_graphs_ = on; }
  // Prefill the prompt, then decode one token per step over the latent cache.
  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                          AttnMode decode_mode = AttnMode::kAuto);

 private:
  // Runs `ids` as new tokens at positions [start, start + n); returns final hidden [n, d].
  Tensor step(const std::vector<int32_t>& ids, int64_t start, AttnMode mode);
  void reset(int64_t max_tokens);

  DeepseekModel& model_;
  Ops& ops_;
  int page_size_;
  KvCacheDtype kv_dtype_;
  KvCache cache_;
  std::vector<int32_t> pages_;
  bool use_cuda_graphs_ = false;
};

}  // namespace ds
