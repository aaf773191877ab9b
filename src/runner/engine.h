// Engine: the token-level serving core behind the HTTP API. It owns the scheduler and the model runner on
// one loop thread; API threads submit requests (token ids in) and receive events (token ids out) through
// callbacks. Text (tokenizing, detokenizing, stop strings, chat formats) is the API layer's business.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "runner/expert_recorder.h"
#include "runner/step_profiler.h"
#include "sched/request.h"
#include "text/token_fsm.h"

namespace ds {

struct EngineRequest {
  std::string rid;                   // unique among live requests (the API layer makes one if absent)
  std::vector<int32_t> input_ids;
  SamplingParams sampling;           // sched/request.h: max_new_tokens, stop ids, temperature, ...
  bool return_logprob = false;
  int32_t logprob_start_len = -1;    // -1: output tokens only; k >= 0: also prompt tokens [k, n)
  int32_t top_logprobs_num = 0;      // top-k alternatives per reported position
  std::vector<int32_t> token_ids_logprob;  // also these ids' logprobs at every reported position (SGLang's)
  // Constrained decoding (SGLang's regex / json_schema): only tokens that keep the output a prefix of the grammar's
  // language are sampled, and the end of sequence only once it is a whole match. Null: unconstrained.
  std::shared_ptr<const TokenFsm> grammar;
  // SGLang's return_hidden_states (the engine must be started with it enabled): the final-normed hidden state of
  // every prompt position and of every fed output token, reported in the events (EngineEvent::hidden_*). The prompt
  // is then computed whole (no prefix-cache reuse), so every prompt row exists.
  bool return_hidden_states = false;
  // SGLang's return_routed_experts (the engine must be started with it enabled): the routed experts each fed token
  // picked in every layer (EngineEvent::routed_experts); the prompt is computed whole, as for hidden states.
  bool return_routed_experts = false;
};

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;                            // NaN for prompt token 0 (no prefix to predict it)
  std::vector<std::pair<float, int32_t>> top;      // (logprob, id), top_logprobs_num of them
  std::vector<std::pair<float, int32_t>> ids;      // (logprob, id) of each token_ids_logprob id, in its order
};

struct EngineEvent {
  std::string rid;
  std::vector<int32_t> new_tokens;            // appended since the previous event of this request
  std::vector<TokenLogprob> output_logprobs;  // one per new token, when return_logprob
  std::vector<TokenLogprob> input_logprobs;   // prompt positions [logprob_start_len, n), in the first event
  // return_hidden_states: the prompt's rows [prompt_tokens][hidden] once, in the first event with a token (or the
  // final one), then the rows of the output tokens fed since (output token k's row made output token k + 1; the last
  // output token is never fed): SGLang's meta_info.hidden_states is [prompt rows, then one row a decode step].
  std::vector<std::vector<float>> hidden_prompt;
  std::vector<std::vector<float>> hidden_output;
  // return_routed_experts, in the final event: [prompt_tokens + completion_tokens - 1][num_hidden_layers][top_k]
  // logical expert ids, flat (SGLang's meta_info.routed_experts before its base64): the picks of every fed token
  // (all but the last output token), 0 in dense layers.
  std::vector<int32_t> routed_experts;
  bool finished = false;
  FinishReason reason;                        // meaningful when finished
  std::string error;                          // non-empty: the request failed (reason kind abort)
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  // Speculative decoding (-1 when off): the request's decode steps so far, each a verification of drafts
  // (SGLang's meta_info.spec_verify_ct; completion_tokens / it is the accept length), the drafts they fed and
  // accepted, and how many verify steps accepted n drafts (index n: SGLang's spec_accept_histogram).
  int32_t spec_verify_ct = -1;
  int32_t spec_accepted_drafts = 0;
  int32_t spec_proposed_drafts = 0;
  std::vector<int32_t> spec_accept_histogram;
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int64_t max_total_tokens = 0;      // KV capacity in tokens
  int32_t max_running_requests = 0;  // the limit in effect (--max-running-requests, at most the pool's pages)
  int64_t used_tokens = 0;           // KV slots in use (requests + radix cache)
  int64_t cached_tokens = 0;         // held by the radix cache
  uint64_t prompt_tokens_total = 0;  // admitted prompt tokens (first admissions)
  uint64_t cached_tokens_total = 0;  // of which served from the prefix cache
  uint64_t generation_tokens_total = 0;
  uint64_t num_requests_total = 0;
  uint64_t num_retractions = 0;
  bool paused = false;               // between pause() and resume()
  uint64_t num_steps = 0;
  uint64_t num_steps_planned_ahead = 0;  // overlap scheduling: steps planned while the previous one was in flight
  uint64_t num_graph_steps = 0;  // steps replayed from CUDA graphs (decode, or speculative decoding's verify steps)
  // Speculative decoding: draft tokens per step (0: off), decode steps that verified drafts, the drafts they fed
  // and accepted, and the tokens those steps produced (accepted + one each: / verify steps = the accept length).
  int32_t speculative_num_steps = 0;
  uint64_t spec_verify_steps = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
};

// SGLang's /pause_generation modes: kAbort ends every live request (reason abort) and pauses; kRetract pauses and
// moves the running requests back to the waiting queue (their KV pages freed: they prefill again after resume, from
// the prefix cache while it lasts); kInPlace pauses with every request kept as it is.
enum class PauseMode { kAbort, kRetract, kInPlace };

class Engine {
 public:
  // Called on the engine thread; must not block (hand the event to the connection's executor).
  using Callback = std::function<void(EngineEvent)>;

  virtual ~Engine() = default;
  // Validates and queues a request. Errors (nothing queued) name the problem: empty prompt, token id out of
  // vocabulary, prompt + max_new_tokens beyond the context or the KV capacity, duplicate rid, ...
  virtual Status submit(EngineRequest req, Callback on_event) = 0;
  // Ends a request early: reason abort (client went away) or stop (the API layer matched a stop string).
  // Its pages return to the pool; a final event with finished = true follows. Unknown rids are ignored.
  virtual void abort(const std::string& rid) = 0;
  virtual void finish_with_stop(const std::string& rid, std::string matched_stop) = 0;
  // Ends every live request (reason abort), as abort() each (SGLang's abort_request with abort_all).
  virtual void abort_all() = 0;
  // No step runs from a pause until resume(); requests submitted meanwhile wait (PauseMode says what happens to the
  // live ones). The step in flight, if any, completes first. Both idempotent.
  virtual void pause(PauseMode mode) = 0;
  virtual void resume() = 0;
  // Drops the prefix cache; refused while requests are running or waiting (while paused: while any holds KV pages,
  // so a retracted queue may wait through a flush, as in SGLang).
  virtual Status flush_cache() = 0;
  // SGLang's /start_profile and /stop_profile: while on, a span a step (runner/step_profiler.h), written as a Chrome
  // trace when stopped or after options.num_steps steps; stop_profile gives the files written (one a rank). Errors
  // name the problem: already on / not on, a bad option. Engines without step spans refuse.
  virtual Status start_profile(const ProfileOptions& options) {
    (void)options;
    return error("this engine does not profile");
  }
  virtual Status stop_profile(std::vector<std::string>* paths) {
    (void)paths;
    return error("this engine does not profile");
  }
  // SGLang's /start_, /stop_ and /dump_expert_distribution_record (runner/expert_recorder.h), done on the engine
  // thread between steps; a dump's file in *path. Errors: no recorder (the server was started without
  // --expert-distribution-recorder-mode), a dump that cannot be written.
  virtual Status expert_distribution(ExpertRecordOp op, std::string* path) {
    (void)op;
    (void)path;
    return error(kNoExpertRecorder);
  }
  // SGLang's /update_weights_from_disk: the checkpoint at model_path (the same config as the running model's; its
  // weights loaded and quantized as at start) replaces the weights in place, then the prefix cache is dropped unless
  // !flush_cache (or paused requests still hold KV). Not paused: once the requests sent before it are done (newer ones
  // wait meanwhile). Paused (SGLang's pause_generation, update, continue_generation flow): at once, the paused
  // requests kept as they are, and generation resumes after it unless keep_pause. Errors name the problem: another config,
  // a missing or malformed checkpoint, an engine that cannot (--dp-size > 1), a tensor of another format (the
  // model may then be partly updated: load a good checkpoint again).
  virtual Status update_weights_from_disk(const std::string& model_path, bool flush_cache, bool keep_pause) {
    (void)model_path;
    (void)flush_cache;
    (void)keep_pause;
    return error("this engine cannot update its weights");
  }
  static constexpr const char* kHiddenStatesOff =
      "return_hidden_states: the server was started without --enable-return-hidden-states";
  static constexpr const char* kRoutedExpertsOff =
      "return_routed_experts: the server was started without --enable-return-routed-experts";
  static constexpr const char* kNoExpertRecorder =
      "the expert distribution recorder is off: start the server with --expert-distribution-recorder-mode stat";
  virtual EngineStats stats() const = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual int64_t context_length() const = 0;  // longest prompt + output accepted
  // Stops the loop: pending requests finish with reason abort. Idempotent.
  virtual void shutdown() = 0;
};

}  // namespace ds
