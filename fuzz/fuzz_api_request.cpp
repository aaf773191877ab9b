// libFuzzer target: arbitrary bytes as the JSON body of /generate, /v1/completions, /v1/chat/completions, /v1/score,
// /v1/responses (and the chat request it becomes),
// /separate_reasoning and /parse_function_call (src/http/api_request.*, text_endpoints.*), and as a
// generation_config.json / --preferred-sampling-params. A body is either refused with a 4xx error naming a message,
// or accepted with values the engine can use: finite sampling values in range, n and logprobs within their limits,
// also after a model's sampling defaults or the preferred sampling params that were accepted are applied.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "http/api_request.h"
#include "http/responses_api.h"
#include "http/text_endpoints.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_api_request: invariant violated: %s\n", what);
  std::abort();
}

void check_error(const ds::ApiError& e) {
  require(e.status >= 400 && e.status < 500, "a refused body gets a 4xx status");
  require(!e.message.empty(), "a refused body gets a message");
  (void)ds::dump_json(ds::error_json(e));  // must serialize whatever the message holds
}

void check_sampling(const ds::SamplingSpec& s) {
  const ds::SamplingParams& e = s.engine;
  require(e.max_new_tokens >= 0 && e.min_new_tokens >= 0, "token counts are non-negative");
  require(!s.max_new_tokens_set || e.min_new_tokens <= e.max_new_tokens, "min_new_tokens <= max_new_tokens");
  require(std::isfinite(e.temperature) && e.temperature >= 0.0f, "temperature finite and >= 0");
  require(std::isfinite(e.top_p) && e.top_p > 0.0f && e.top_p <= 1.0f, "top_p in (0, 1]");
  require(e.top_k == -1 || e.top_k >= 1, "top_k -1 or >= 1");
  require(std::isfinite(e.min_p) && e.min_p >= 0.0f && e.min_p <= 1.0f, "min_p in [0, 1]");
  require(std::isfinite(e.frequency_penalty) && std::isfinite(e.presence_penalty), "penalties finite");
  require(std::isfinite(s.repetition_penalty) && std::isfinite(e.repetition_penalty), "repetition_penalty finite");
  require(s.n >= 1 && s.n <= 128, "n in [1, 128]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ds::Json body;
  if (auto e = ds::parse_json_body(text, &body)) {
    check_error(*e);
    return 0;
  }
  require(body.is_object(), "an accepted body is an object");
  {
    ds::GenerateRequest g;
    if (auto e = ds::parse_generate_request(body, &g)) {
      check_error(*e);
    } else {
      require(!g.prompts.empty(), "a generate request has a prompt");
      require(g.sampling.size() == g.prompts.size(), "one sampling spec per prompt");
      require(g.rids.empty() || g.rids.size() == g.prompts.size(), "one rid per prompt");
      for (const auto& s : g.sampling) check_sampling(s);
      require(g.top_logprobs_num >= 0 && g.top_logprobs_num <= 1000, "top_logprobs_num in [0, 1000]");
      require(g.logprob_start_len >= -1, "logprob_start_len >= -1");
    }
  }
  {
    ds::CompletionRequest c;
    if (auto e = ds::parse_completion_request(body, &c)) {
      check_error(*e);
    } else {
      require(!c.prompts.empty(), "a completion request has a prompt");
      check_sampling(c.sampling);
      require(c.logprobs >= -1 && c.logprobs <= 20, "logprobs in [-1, 20]");
    }
  }
  {
    ds::ScoreRequest sr;
    if (auto e = ds::parse_score_request(body, &sr)) {
      check_error(*e);
    } else {
      require(!sr.items.empty() && !sr.label_token_ids.empty(), "a score request has items and labels");
      for (size_t i = 0; i < sr.items.size(); ++i) {
        require(sr.items[i].is_text == sr.query.is_text, "query and items of one kind");
        const ds::PromptSpec p = ds::score_prompt(sr, i);
        require(p.is_text ? p.text.size() == sr.query.text.size() + sr.items[i].text.size()
                          : p.ids.size() == sr.query.ids.size() + sr.items[i].ids.size(),
                "a score prompt joins query and item");
      }
      for (int32_t id : sr.label_token_ids) require(id >= 0, "label ids non-negative");
    }
  }
  {
    ds::ResponsesRequest rr;
    if (auto e = ds::parse_responses_request(body, &rr)) {
      check_error(*e);
    } else {
      require(rr.input_messages.is_array(), "a Responses request's input becomes messages");
      ds::Json chat = rr.chat_body;
      chat["messages"] = rr.input_messages;
      ds::ChatRequest c;  // what the server then parses: refused with a 4xx or accepted in range
      if (auto ce = ds::parse_chat_request(chat, &c)) check_error(*ce);
      else check_sampling(c.sampling);
    }
  }
  // The same bytes as a generation_config.json: accepted defaults keep a chat request's sampling in range.
  ds::Result<ds::SamplingDefaults> defaults = ds::parse_sampling_defaults(text, "generation_config.json");
  require(defaults.is_ok() || !defaults.status().message().empty(), "a refused generation_config names why");
  {
    ds::ChatRequest c;
    if (auto e = ds::parse_chat_request(body, &c)) {
      check_error(*e);
    } else {
      require(c.messages.is_array(), "chat messages are an array");
      check_sampling(c.sampling);
      require(c.top_logprobs >= 0 && c.top_logprobs <= 20, "top_logprobs in [0, 20]");
      (void)ds::dump_json(c.messages);
      if (defaults.is_ok()) {
        ds::apply_sampling_defaults(*defaults, &c.sampling);
        check_sampling(c.sampling);
      }
    }
  }
  // The same bytes as --preferred-sampling-params: once accepted, a bare /generate request takes them and passes.
  if (ds::Result<ds::Json> preferred = ds::parse_preferred_sampling_params(text); preferred.is_ok()) {
    ds::Json g = ds::Json{{"input_ids", ds::Json::array({1})}};
    ds::merge_preferred_sampling(*preferred, &g);
    ds::GenerateRequest r;
    require(!ds::parse_generate_request(g, &r), "accepted preferred sampling params make a valid request");
    check_sampling(r.sampling[0]);
  }
  {
    ds::Json out;
    if (auto e = ds::separate_reasoning(body, &out)) {
      check_error(*e);
    } else {
      require(out["reasoning_text"].is_string() && out["text"].is_string(), "separate_reasoning's two strings");
      (void)ds::dump_json(out);
    }
    if (auto e = ds::parse_function_call(body, &out)) {
      check_error(*e);
    } else {
      require(out["normal_text"].is_string() && out["calls"].is_array(), "parse_function_call's text and calls");
      (void)ds::dump_json(out);
    }
  }
  return 0;
}
