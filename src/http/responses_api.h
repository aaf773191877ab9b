// OpenAI's Responses API (POST /v1/responses, GET / DELETE /v1/responses/{id}) over chat completions: a request
// becomes a chat request (input items -> messages, instructions -> a system message first, flat function tools ->
// chat tools, text.format -> response_format, max_output_tokens -> max_tokens, reasoning.effort -> thinking), the
// chat output becomes output items (reasoning, message, function_call; streamed as response.* events), and a stored
// response (store, the default) is continued by previous_response_id from an in-memory store.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "http/api_request.h"
#include "text/chat_output_parser.h"

namespace ds {

struct ResponsesRequest {
  Json chat_body = Json::object();  // the /v1/chat/completions body; its messages hold this request's input only
  Json input_messages = Json::array();  // those messages (what a stored conversation appends)
  std::string instructions;
  std::string previous_response_id;
  bool store = true;
  Json echo = Json::object();  // request fields the response object repeats (model, tools, text, metadata, ...)
};

// Errors are 400s naming the Responses field (input[i], tools[i], text, max_output_tokens, ...).
std::optional<ApiError> parse_responses_request(const Json& body, ResponsesRequest* out);

// Output items built from a reply, whole or as streamed deltas. With an emitter each change is an event:
// emit(type, payload) for response.output_item.added / .done, response.content_part.added / .done,
// response.output_text.delta / .done, response.reasoning_text.delta / .done, response.function_call_arguments.delta /
// .done (the caller adds "type" and "sequence_number").
class ResponseItems {
 public:
  using Emit = std::function<void(const char* type, Json payload)>;
  explicit ResponseItems(Emit emit = nullptr) : emit_(std::move(emit)) {}
  void feed(const ChatDelta& d);
  void close();  // finishes the open items (idempotent)
  const Json& items() const { return items_; }
  // The reply as chat messages (an assistant message with its content and tool calls; none for an empty reply), for
  // the conversation a stored response continues.
  Json as_messages() const;

 private:
  enum class Open { kNone, kReasoning, kMessage, kCalls };
  void open(Open kind);
  void emit(const char* type, Json payload) {
    if (emit_) emit_(type, std::move(payload));
  }
  Emit emit_;
  Json items_ = Json::array();
  Open open_ = Open::kNone;
  std::unordered_map<int, size_t> calls_;  // tool-call delta index -> item index
};

// The response object (status completed, incomplete past max_output_tokens, or in_progress while streaming).
Json response_object(const std::string& id, int64_t created_at, const std::string& model, const std::string& status,
                     const Json& output, const Json& usage, const ResponsesRequest& r);
// Chat usage {prompt_tokens, completion_tokens, prompt_tokens_details} as the Responses usage object.
Json responses_usage(const Json& chat_usage, int64_t reasoning_tokens);

// Stored responses and the conversations they continue: the least recently used dropped past `capacity` entries or
// `max_bytes` of JSON (a chain's every response holds the whole conversation so far, so entries grow with it); an
// entry larger than max_bytes alone is not kept.
class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = 1024, size_t max_bytes = size_t{256} << 20)
      : capacity_(capacity), max_bytes_(max_bytes) {}
  struct Entry {
    Json response;
    Json conversation;  // messages: earlier input and replies, this response's reply last (no instructions)
  };
  bool put(const std::string& id, Entry e);  // false: too large to keep
  std::optional<Entry> get(const std::string& id);
  bool erase(const std::string& id);

 private:
  struct Slot {
    Entry entry;
    size_t bytes = 0;
    std::list<std::string>::iterator at;
  };
  void drop(std::unordered_map<std::string, Slot>::iterator it);
  std::mutex mu_;
  size_t capacity_, max_bytes_, bytes_ = 0;
  std::list<std::string> lru_;
  std::unordered_map<std::string, Slot> map_;
};

}  // namespace ds
