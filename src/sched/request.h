// Request: one generation request as the scheduler sees it: token ids (prompt + output so far), sampling
// and stop parameters, progress through prefill, its KV pages, and how it finished.
#pragma once
#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cache/page_pool.h"

namespace ds {

struct RadixNode;

// The scheduler reads only the stop fields (first block); the rest travels untouched to the runner's
// sampler through StepPlan::SeqStep::req.
struct SamplingParams {
  int32_t max_new_tokens = 128;
  int32_t min_new_tokens = 0;          // stop tokens / EOS do not end the request before this many
  std::vector<TokenId> stop_token_ids;  // end the request (reason stop) even with ignore_eos
  bool ignore_eos = false;              // model EOS ids (SchedulerConfig::eos_token_ids) do not end it

  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = -1;
  float min_p = 0.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // > 1 discourages every token already in the prompt or output
  uint64_t seed = 0;
  std::vector<std::pair<TokenId, float>> logit_bias;  // OpenAI logit_bias: added to those tokens' logits (sampling)
};

// SGLang's meta_info.finish_reason: {type: stop|length|abort, matched}.
struct FinishReason {
  enum class Kind { kStop, kLength, kAbort };
  Kind kind = Kind::kStop;
  TokenId matched_token = -1;  // the stop/EOS token that ended it, when one did
  std::string matched_text;    // a stop string (decided by the caller) or the abort message
};
inline const char* finish_kind_name(FinishReason::Kind kind) {
  switch (kind) {
    case FinishReason::Kind::kStop: return "stop";
    case FinishReason::Kind::kLength: return "length";
    case FinishReason::Kind::kAbort: return "abort";
  }
  return "?";
}

enum class RequestStatus { kWaiting, kRunning, kFinished };

struct Request {
  std::string rid;
  std::vector<TokenId> tokens;  // prompt followed by the output so far
  int32_t num_prompt = 0;
  SamplingParams sampling;
  RequestStatus status = RequestStatus::kWaiting;
  uint64_t arrival = 0;  // add_request order: the fcfs key; a retracted request keeps its place

  // KV state. tokens[0, kv_len) have KV written, or scheduled in the step in flight; page_table covers
  // exactly those tokens. Prefill and decode are the same thing here: a step feeds tokens[kv_len, ...),
  // and the request is decoding once only its last (sampled, not yet fed) token lacks KV. After a
  // retraction kv_len drops to 0 and the re-admitted request re-prefills prompt + output so far.
  std::vector<PageId> page_table;
  int32_t kv_len = 0;
  RadixNode* prefix_node = nullptr;  // locked radix node; page_table[0, tree_tokens / page_size) are its path's pages
  int32_t tree_tokens = 0;
  int32_t cached_tokens = 0;  // prefix reused from the radix cache at first admission (meta_info.cached_tokens)
  int32_t row = -1;           // stable slot in [0, max_running_requests) while running: index of the
                              // runner's per-request device state (sampling state, MTP hidden states)
  int32_t num_retractions = 0;
  // Prefix reuse from the radix cache stops here: prompt logprobs from position k need logits of the tokens
  // before k, so a request asking for them (logprob_start_len = k) recomputes from min(k, ...) on.
  int32_t max_prefix_reuse = INT32_MAX;

  // Overlap scheduling (two steps in flight): issued steps that include this request (its pages must not
  // change until they complete), the sampled tokens of those steps not appended yet, and the KV length that
  // completed steps wrote (what may go into the radix cache).
  int32_t in_flight = 0;
  int32_t pending = 0;
  int32_t kv_done = 0;
  bool abort_requested = false;
  std::string abort_message;
  std::optional<FinishReason> finish;
  // Speculative decoding: the MTP drafts the last step made, fed after the last token by the next decode and
  // verified there (accepted ones become output tokens, the KV of the others is rolled back).
  std::vector<TokenId> drafts;

  std::span<const TokenId> prompt() const { return std::span<const TokenId>(tokens).first(num_prompt); }
  std::span<const TokenId> output() const { return std::span<const TokenId>(tokens).subspan(num_prompt); }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output() const { return num_tokens() - num_prompt; }
  // Tokens still to feed, counting sampled tokens of steps in flight (>= 1 while live).
  int32_t uncomputed() const { return num_tokens() + pending - kv_len; }
  bool is_decoding() const { return num_output() + pending > 0 && uncomputed() == 1; }
};

}  // namespace ds
