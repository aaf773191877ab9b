// bench-serving backends: the request body each API takes (SGLang native /generate, OpenAI completions
// and chat completions as served by SGLang or vLLM) and the reading of its response, streamed (SSE) or
// whole, into a RequestOutput with TTFT, inter-token latencies and the server's token counts.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/sse.h"
#include "bench/stats.h"
#include "core/status.h"

namespace ds::bench {

enum class Backend { kSglang, kSglangOai, kSglangOaiChat, kVllm, kVllmChat };

Result<Backend> parse_backend(const std::string& name);
std::string backend_name(Backend b);
bool is_chat(Backend b);
bool is_native(Backend b);  // SGLang's /generate
const char* api_path(Backend b);
int default_port(Backend b);  // SGLang's defaults: 30000 for sglang*, 8000 for vllm*

// One prompt of the dataset: text, or token ids (sent as input_ids / an OpenAI id-list prompt).
struct DatasetRow {
  std::string text;
  std::vector<int32_t> ids;
  bool use_ids = false;
  int64_t prompt_len = 0;
  int64_t output_len = 0;
};

struct RequestOptions {
  std::string model;           // the "model" field of OpenAI requests
  bool stream = true;          // !--disable-stream
  bool ignore_eos = true;      // !--disable-ignore-eos
  bool return_logprob = false;
  nlohmann::json extra_body = nlohmann::json::object();  // --extra-request-body, merged last (top level)
};

// The JSON body, following sglang.bench_serving's payloads (temperature 0; ignore_eos unless disabled).
// Streaming OpenAI requests also ask for stream_options.include_usage so that the server's completion
// token count arrives in the stream. Chat requests need row.text.
std::string build_request_body(Backend backend, const DatasetRow& row, int64_t output_len,
                               const RequestOptions& options);

// Collects one response. Call on_headers once, on_bytes for each piece of the body as it arrives (t:
// seconds since the request was sent), then finish with the end time and the transport outcome.
class ResponseReader {
 public:
  ResponseReader(Backend backend, int64_t requested_output_len);
  void on_headers(int status, std::string content_type);
  void on_bytes(std::string_view bytes, double t);
  // Fills and returns the output (success, error, latency, ttft, itl, generated_text, counts).
  RequestOutput finish(double t, const Status& transport);

 private:
  void on_event(const std::string& payload, double t);
  void on_json(const nlohmann::json& j, double t);
  void token_event(double t, int64_t new_tokens);
  void fail(std::string message);

  Backend backend_;
  int status_ = 0;
  bool sse_ = false;
  std::string body_;  // whole non-streamed body, or the error body of a non-200 reply
  SseReader sse_reader_;
  std::vector<std::string> events_;
  RequestOutput out_;
  bool got_first_ = false;
  double last_token_t_ = 0;
  int64_t last_completion_tokens_ = 0;
  std::optional<std::string> error_;
};

}  // namespace ds::bench
