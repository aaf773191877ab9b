// ApiServer: the SGLang/OpenAI-compatible HTTP API over an Engine. Routes requests, turns text into token
// ids and back (tokenizer, streaming detokenizer with stop strings, chat formats, reasoning and tool-call
// parsers), submits to the engine, and shapes responses (JSON or SSE). Engine events are handled on the
// connection's strand; the engine thread only posts them.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "http/api_request.h"
#include "http/http_server.h"
#include "http/metrics.h"
#include "runner/engine.h"
#include "text/tokenizer.h"

namespace ds {

struct ApiServerOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string served_model_name;  // the `model` clients must name ("" accepted too)
  std::string api_key;            // non-empty: Bearer token required everywhere except /health
  bool enable_metrics = false;
  std::string reasoning_parser;   // "" | deepseek-r1 | deepseek-v3
  std::string tool_call_parser;   // "" | deepseekv3 | deepseekv31 | deepseekv32
  std::string chat_template;      // "" (detect from the tokenizer directory) or a format name (v3, r1, ...)
  uint64_t seed = 0;              // base of the per-request seeds when a request gives none
  int64_t max_queued_requests = 0;  // > 0: 503 while the engine has this many requests waiting
  int health_timeout_ms = 20000;
  int64_t request_timeout_ms = 0;   // > 0 (--request-timeout): generation requests still running are aborted
                                    // with an error after this long (their pages freed)
  // --stream-interval: a streamed sequence sends a chunk for its first token, then once this many more tokens are
  // out, and at its end (SGLang's default 1: every token).
  int64_t stream_interval = 1;
  // --incremental-streaming-output: /generate's stream chunks carry the new text, output_ids and output logprobs
  // since the previous chunk instead of everything so far (the prompt's logprobs in the first; counts cumulative).
  bool incremental_streaming_output = false;
  // --sampling-defaults model: the model's generation_config.json sampling fields, which chat requests that leave
  // them unset take (as SGLang's chat API; /generate and /v1/completions keep the protocol defaults).
  SamplingDefaults chat_sampling_defaults;
  // --preferred-sampling-params (parse_preferred_sampling_params): /generate's sampling_params defaults; an empty
  // object for none.
  nlohmann::ordered_json preferred_sampling_params = nlohmann::ordered_json::object();
  // --log-requests (SGLang's): one INFO line a finished sequence; level (--log-requests-level) 0: ids, counts, finish
  // reason and latency; 1: + sampling; 2: + prompt and output text cut to 2048 bytes; 3: + the whole text. -1: off.
  int log_requests_level = -1;
  nlohmann::ordered_json server_args = nlohmann::ordered_json::object();  // shown by /get_server_info
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Checks the parser and chat-template names (errors name the flag). Call before serving.
  Status init();
  // Makes the server ready; until then every route answers 503. `tokenizer` is null with
  // --skip-tokenizer-init (requests must then carry token ids). Both must outlive the server's use.
  Status set_backend(Engine* engine, const Tokenizer* tokenizer);
  bool ready() const;
  // While draining for shutdown: new generation requests get 503, and admin jobs not started yet (a queued weight
  // update) answer 503 without touching the engine.
  void set_shutting_down();
  // Waits for the admin job that is running (a weight update inside the engine) to return. Call after the engine's
  // shutdown (which ends its wait) and before the engine is destroyed.
  void wait_admin_idle();

  // The HttpHandler.
  void handle(HttpRequest req, std::shared_ptr<HttpResponder> out);

  const ServerMetrics& metrics() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ds
