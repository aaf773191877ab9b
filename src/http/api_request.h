// Parsing and validation of the JSON bodies of /generate, /v1/completions and /v1/chat/completions into
// typed requests, with OpenAI-shaped errors (status, message, param) for everything a client can get wrong.
// Limits that need the model (vocabulary, context length) are checked later by the API server.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "core/status.h"
#include "http/sessions.h"
#include "runner/engine.h"
#include "sched/request.h"

namespace ds {

using Json = nlohmann::ordered_json;

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// {"error": {"message", "type", "param", "code"}}
Json error_json(const ApiError& e);
ApiError bad_request(std::string message, std::string param = "");

// Text handling of one generated sequence (applied by the API layer, not the engine).
struct TextOptions {
  std::vector<std::string> stop;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = false;  // SGLang's default True has no effect with fast tokenizers
  bool no_stop_trim = false;
};

struct SamplingSpec {
  SamplingParams engine;            // max_new_tokens, min_new_tokens, stop ids, ignore_eos, temperature, ...
  bool max_new_tokens_set = false;  // false: the endpoint's default applies
  bool seed_set = false;
  // Given by the request (not null): a model default (SamplingDefaults) does not replace them.
  bool temperature_set = false, top_p_set = false, top_k_set = false, min_p_set = false,
       repetition_penalty_set = false;
  float repetition_penalty = 1.0f;
  TextOptions text;
  int32_t n = 1;
  // Constrained decoding (SGLang's sampling parameters; OpenAI's response_format): at most one of them.
  std::string regex;
  std::string json_schema;  // the schema's JSON text
  std::string ebnf;         // an EBNF (GBNF) grammar from its `root` rule (text/ebnf_regex.h)
  std::string structural_tag;  // {"structures", "triggers"} as JSON text (text/structural_tag.h)
  bool structural_tag_from_response_format = false;
  int constraints() const {
    return !regex.empty() + !json_schema.empty() + !ebnf.empty() + !structural_tag.empty();
  }
  bool json_schema_from_response_format = false;  // (the server re-reads it in the body's own property order)
  bool regex_with_tool_markers = false;  // tool_choice's constraint: the tool-call marker tokens may spell it
};

struct PromptSpec {
  bool is_text = false;
  std::string text;
  std::vector<int32_t> ids;
};

struct GenerateRequest {
  std::vector<PromptSpec> prompts;
  bool batch = false;                  // text/input_ids was a list: the response is a list
  std::vector<SamplingSpec> sampling;  // one per prompt
  std::vector<std::string> rids;       // one per prompt; "" = the server makes one
  bool stream = false;
  bool return_logprob = false;
  int32_t logprob_start_len = -1;
  int32_t top_logprobs_num = 0;
  bool return_text_in_logprobs = false;
  // SGLang's token_ids_logprob: ids whose logprobs every reported position also gives, one list per prompt
  // (empty: none). The request holds one list for every prompt or a list of lists, one per prompt.
  std::vector<std::vector<int32_t>> token_ids_logprob;
  // SGLang's return_hidden_states (the server needs --enable-return-hidden-states): meta_info.hidden_states.
  bool return_hidden_states = false;
  // SGLang's return_routed_experts (the server needs --enable-return-routed-experts): meta_info.routed_experts.
  bool return_routed_experts = false;
  // SGLang's session_params: continue a request of an open session (one prompt, n = 1; see http/sessions.h).
  std::optional<SessionParams> session;
};

struct CompletionRequest {
  std::string model;  // "" when absent
  std::vector<PromptSpec> prompts;
  SamplingSpec sampling;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage_stats = false;
  int32_t logprobs = -1;  // -1: none; k >= 0: token logprobs with k alternatives
  bool echo = false;
  bool return_hidden_states = false;  // SGLang's: each choice's hidden_states (its last fed token's row)
  std::string rid;
};

struct ChatRequest {
  std::string model;
  Json messages;            // array (validated further by the chat renderer)
  Json tools;               // null or array
  std::string tool_choice;  // "auto" (default), "none", "required" (at least one call), or "function" (one call of
                            // tool_choice_name); the last two constrain the output to the tool-call format
  std::string tool_choice_name;
  SamplingSpec sampling;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage_stats = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool thinking = false;    // chat_template_kwargs {"thinking": true} (or "enable_thinking")
  bool separate_reasoning = true;
  // The last message (the assistant's) is a prefix of the reply to continue: the prompt is the conversation before
  // it with the generation prompt, then its content's tokens (SGLang's and vLLM's continue_final_message).
  bool continue_final_message = false;
  bool return_hidden_states = false;  // SGLang's: each choice's hidden_states (its last fed token's row)
  std::string rid;
};

// SGLang's /v1/score: for each item, the probabilities of label_token_ids as the next token after query + item
// (item + query with item_first). query is a string or token ids, items a string, strings or token-id lists, of the
// same kind as query.
struct ScoreRequest {
  std::string model;  // "" when absent
  PromptSpec query;
  std::vector<PromptSpec> items;
  std::vector<int32_t> label_token_ids;
  bool apply_softmax = false;  // renormalise over the labels (softmax of their logprobs) instead of exp(logprob)
  bool item_first = false;
};
// The prompt of item i: the two strings or id lists joined in the request's order.
PromptSpec score_prompt(const ScoreRequest& r, size_t item);
// One item's scores from its labels' next-token logprobs (in label order; -inf where absent): exp of each, or their
// softmax. A label with logprob -inf scores 0; with apply_softmax and every label -inf, all score 0.
std::vector<double> label_scores(const std::vector<double>& logprobs, bool apply_softmax);

// The sampling fields a model's generation_config.json recommends, which chat requests that leave them unset take
// (SGLang's --sampling-defaults model: temperature, top_p, top_k, min_p, repetition_penalty; other fields ignored).
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;  // -1: off (a generation_config top_k of 0 means off too)
  bool empty() const { return !temperature && !top_p && !min_p && !repetition_penalty && !top_k; }
  std::string describe() const;  // "temperature=0.6 top_p=0.95", or "none"
};
// generation_config.json's text -> its sampling fields; an error names `what` and the field (a wrong type or a value
// outside what a request may give).
Result<SamplingDefaults> parse_sampling_defaults(const std::string& json_text, const std::string& what);
// Fills the fields `s` left unset from `d`.
void apply_sampling_defaults(const SamplingDefaults& d, SamplingSpec* s);

// SGLang's --preferred-sampling-params: a JSON object of /generate sampling_params that every /generate request
// takes where its own sampling_params (each of a list) lack the key. parse_preferred_sampling_params checks the text
// is such an object and that /generate accepts it (the error names the field).
Result<Json> parse_preferred_sampling_params(const std::string& text);
void merge_preferred_sampling(const Json& preferred, Json* generate_body);

// The entries of a request's 'tools' array (chat completions, /parse_function_call): each an object with a
// 'function' object naming it ('name', a string); 'type', where given, must be "function" (SGLang's Tool model
// defaults it). The names in order into *names when given; the error names the entry (param "tools[i]").
std::optional<ApiError> check_tools(const Json& tools, std::vector<std::string>* names = nullptr);

// The most sequences (prompts x n, or /v1/score items) one request may start: each holds a few KB of state until it
// ends, so a 32 MB body of 6 million tiny prompts held tens of GB.
constexpr size_t kMaxSequencesPerRequest = 65536;
// The most logprob entries (positions x (1 + top_logprobs_num + token_ids_logprob ids)) one /generate may ask for:
// a 160K-token prompt with top_logprobs_num 1000 would hold 160M of them (GBs on the host and in the response).
constexpr int64_t kMaxLogprobEntries = int64_t{32} << 20;

// Each returns nullopt on success.
std::optional<ApiError> parse_generate_request(const Json& body, GenerateRequest* out);
std::optional<ApiError> parse_completion_request(const Json& body, CompletionRequest* out);
// /open_session's body (SGLang's OpenSessionReqInput): capacity_of_str_len (accepted, unused) and an optional
// session_id (*session_id: "" when absent).
std::optional<ApiError> parse_open_session(const Json& body, std::string* session_id);
std::optional<ApiError> parse_chat_request(const Json& body, ChatRequest* out);
std::optional<ApiError> parse_score_request(const Json& body, ScoreRequest* out);
// /pause_generation's body: empty, or {"mode": "abort" | "retract" | "in_place"} (SGLang's default: abort).
std::optional<ApiError> parse_pause_mode(const std::string& body, PauseMode* mode);
// /start_profile's body: empty, or SGLang's ProfileReqInput: output_dir, num_steps, activities (checked by the
// engine's StepProfiler); with_stack / record_shapes / profile_by_stage / merge_profiles accepted and without effect.
std::optional<ApiError> parse_profile_request(const std::string& body, ProfileOptions* out);

// /update_weights_from_disk's body: SGLang's UpdateWeightFromDiskReqInput. model_path (required); load_format null or
// "auto"; flush_cache (default true); abort_all_requests; weight_version (what responses then report);
// keep_pause; recapture_cuda_graph / torch_empty_cache / token_step accepted and ignored (the weights change in
// place: the graphs stay valid); is_async refused.
struct UpdateWeightsRequest {
  std::string model_path;
  bool flush_cache = true;
  bool abort_all_requests = false;
  bool keep_pause = false;     // a paused engine stays paused after the update
  std::string weight_version;  // empty: unchanged
};
std::optional<ApiError> parse_update_weights_request(const std::string& body, UpdateWeightsRequest* out);

// n random hex digits (request, response and item ids).
std::string random_hex(size_t n);

// obj[key] when obj is an object holding a string there, else `fallback` (a wrong type reads as the fallback, which
// callers then refuse by name; nlohmann's value() would throw on it).
std::string string_field(const Json& obj, const char* key, const std::string& fallback = "");

// Parses request body text (400 for malformed JSON, JSON nested deeper than kMaxJsonDepth, or a top-level value that
// is not an object).
std::optional<ApiError> parse_json_body(const std::string& body, Json* out);

// JSON text for responses; invalid UTF-8 (never expected) becomes U+FFFD instead of throwing.
std::string dump_json(const Json& j);

}  // namespace ds
