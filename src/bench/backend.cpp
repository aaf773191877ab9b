// bench-serving backends (see backend.h).
#include "bench/backend.h"

#include <algorithm>
#include <cctype>

namespace ds::bench {

using json = nlohmann::json;

Result<Backend> parse_backend(const std::string& name) {
  if (name == "sglang" || name == "sglang-native") return Backend::kSglang;
  if (name == "sglang-oai") return Backend::kSglangOai;
  if (name == "sglang-oai-chat") return Backend::kSglangOaiChat;
  if (name == "vllm") return Backend::kVllm;
  if (name == "vllm-chat") return Backend::kVllmChat;
  return error("--backend '", name, "' is not one of sglang, sglang-oai, sglang-oai-chat, vllm, vllm-chat");
}

std::string backend_name(Backend b) {
  switch (b) {
    case Backend::kSglang: return "sglang";
    case Backend::kSglangOai: return "sglang-oai";
    case Backend::kSglangOaiChat: return "sglang-oai-chat";
    case Backend::kVllm: return "vllm";
    case Backend::kVllmChat: return "vllm-chat";
  }
  return "?";
}

bool is_chat(Backend b) { return b == Backend::kSglangOaiChat || b == Backend::kVllmChat; }
bool is_native(Backend b) { return b == Backend::kSglang; }

const char* api_path(Backend b) {
  if (is_native(b)) return "/generate";
  return is_chat(b) ? "/v1/chat/completions" : "/v1/completions";
}

int default_port(Backend b) { return (b == Backend::kVllm || b == Backend::kVllmChat) ? 8000 : 30000; }

std::string build_request_body(Backend backend, const DatasetRow& row, int64_t output_len,
                               const RequestOptions& o) {
  json j = json::object();
  if (is_native(backend)) {
    if (row.use_ids) {
      j["input_ids"] = row.ids;
    } else {
      j["text"] = row.text;
    }
    j["sampling_params"] = {{"temperature", 0.0}, {"max_new_tokens", output_len}, {"ignore_eos", o.ignore_eos}};
    j["stream"] = o.stream;
    j["return_logprob"] = o.return_logprob;
    j["logprob_start_len"] = -1;
  } else {
    j["model"] = o.model;
    if (is_chat(backend)) {
      j["messages"] = json::array({{{"role", "user"}, {"content", row.text}}});
      j["max_completion_tokens"] = output_len;
    } else {
      if (row.use_ids) {
        j["prompt"] = row.ids;
      } else {
        j["prompt"] = row.text;
      }
      j["best_of"] = 1;
      j["max_tokens"] = output_len;
    }
    j["stream"] = o.stream;
    // Without this, OpenAI-style servers send no usage while streaming and the client would have to
    // assume the requested length was generated.
    if (o.stream) j["stream_options"] = {{"include_usage", true}};
    j["temperature"] = 0.0;
    j["ignore_eos"] = o.ignore_eos;
  }
  if (o.extra_body.is_object()) j.update(o.extra_body);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

ResponseReader::ResponseReader(Backend backend, int64_t requested_output_len) : backend_(backend) {
  out_.output_len = requested_output_len;
}

void ResponseReader::on_headers(int status, std::string content_type) {
  status_ = status;
  for (char& c : content_type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  sse_ = status == 200 && content_type.rfind("text/event-stream", 0) == 0;
}

void ResponseReader::fail(std::string message) {
  if (!error_) error_ = std::move(message);
}

void ResponseReader::on_bytes(std::string_view bytes, double t) {
  if (!sse_) {
    // Cap what a huge error page can cost; successful non-streamed bodies are kept whole.
    if (status_ == 200 || body_.size() < 4096) body_.append(bytes);
    return;
  }
  events_.clear();
  sse_reader_.feed(bytes, &events_);
  for (const std::string& e : events_) on_event(e, t);
}

void ResponseReader::on_event(const std::string& payload, double t) {
  if (payload == "[DONE]") return;
  json j = json::parse(payload, nullptr, false);
  if (j.is_discarded()) {
    // A server that separates events by single newlines joins them into one event: read line by line.
    if (payload.find('\n') != std::string::npos) {
      size_t start = 0;
      while (start <= payload.size()) {
        size_t nl = payload.find('\n', start);
        if (nl == std::string::npos) nl = payload.size();
        std::string l = payload.substr(start, nl - start);
        if (l.rfind("data:", 0) == 0) l.erase(0, l.size() > 5 && l[5] == ' ' ? 6 : 5);
        if (!l.empty()) on_event(l, t);
        start = nl + 1;
      }
      return;
    }
    fail("stream chunk is not JSON: " + payload.substr(0, 200));
    return;
  }
  on_json(j, t);
}

namespace {

std::string error_message(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
  return e.dump();
}

const json* field(const json& j, const char* name) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> int_field(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f && f->is_number()) return f->get<int64_t>();
  return std::nullopt;
}

std::string string_field(const json& j, const char* name) {
  const json* f = field(j, name);
  return f && f->is_string() ? f->get<std::string>() : std::string();
}

}  // namespace

void ResponseReader::token_event(double t, int64_t new_tokens) {
  if (!got_first_) {
    got_first_ = true;
    out_.ttft = t;
  } else if (new_tokens > 0) {
    // SGLang spreads a chunk carrying several tokens evenly over them.
    const double gap = (t - last_token_t_) / static_cast<double>(new_tokens);
    out_.itl.insert(out_.itl.end(), static_cast<size_t>(new_tokens), gap);
  }
  last_token_t_ = t;
}

void ResponseReader::on_json(const json& j, double t) {
  if (const json* e = field(j, "error")) {
    fail("server error: " + error_message(*e));
    return;
  }
  if (is_native(backend_)) {
    const json* meta = field(j, "meta_info");
    std::optional<int64_t> ct;
    if (meta) ct = int_field(*meta, "completion_tokens");
    const std::string text = string_field(j, "text");
    const bool text_grew = !text.empty() && text != out_.generated_text;
    // /generate streams cumulative text by default, disjoint pieces with --incremental-streaming-output.
    if (!text.empty()) {
      if (text.rfind(out_.generated_text, 0) == 0) {
        out_.generated_text = text;
      } else {
        out_.generated_text += text;
      }
    }
    // New tokens are counted by meta_info.completion_tokens, so servers that send only output_ids
    // (--skip-tokenizer-init) are timed too.
    const int64_t new_tokens = ct ? *ct - last_completion_tokens_ : (text_grew ? 1 : 0);
    if (new_tokens > 0) token_event(t, new_tokens);
    if (ct) {
      last_completion_tokens_ = std::max(last_completion_tokens_, *ct);
      out_.output_len = *ct;
      out_.output_len_from_server = true;
    }
    if (meta) {
      if (auto pt = int_field(*meta, "prompt_tokens")) out_.server_prompt_tokens = *pt;
      if (const json* a = field(*meta, "spec_accept_length"); a && a->is_number())
        out_.spec_accept_length = a->get<double>();
      if (auto v = int_field(*meta, "spec_verify_ct")) out_.spec_verify_ct = *v;
    }
    return;
  }
  // OpenAI completions / chat completions.
  if (const json* choices = field(j, "choices"); choices && choices->is_array() && !choices->empty()) {
    const json& c = (*choices)[0];
    std::string piece;
    if (is_chat(backend_)) {
      const json* msg = field(c, "delta");
      if (!msg) msg = field(c, "message");  // non-streamed reply
      if (msg) {
        // Reasoning models (DeepSeek-R1 behind a reasoning parser) stream their thinking separately.
        piece = string_field(*msg, "reasoning_content") + string_field(*msg, "content");
      }
    } else {
      piece = string_field(c, "text");
    }
    if (!piece.empty()) {
      token_event(t, 1);
      out_.generated_text += piece;
    }
  }
  if (const json* usage = field(j, "usage")) {
    if (auto ct = int_field(*usage, "completion_tokens")) {
      out_.output_len = *ct;
      out_.output_len_from_server = true;
    }
    if (auto pt = int_field(*usage, "prompt_tokens")) out_.server_prompt_tokens = *pt;
  }
}

RequestOutput ResponseReader::finish(double t, const Status& transport) {
  out_.latency = t;
  if (!transport.is_ok()) {
    fail(transport.message());
  } else if (status_ != 200) {
    std::string body = body_.substr(0, 300);
    for (char& c : body)
      if (c == '\n' || c == '\r') c = ' ';
    fail("HTTP " + std::to_string(status_) + (body.empty() ? "" : ": " + body));
  } else if (sse_) {
    events_.clear();
    sse_reader_.finish(&events_);
    for (const std::string& e : events_) on_event(e, t);
  } else {
    json j = json::parse(body_, nullptr, false);
    if (j.is_discarded()) {
      fail("response is not JSON: " + body_.substr(0, 200));
    } else {
      on_json(j, t);
      // Without streaming the first token is only seen with the whole reply.
      out_.ttft = t;
      out_.itl.clear();
    }
  }
  out_.success = !error_.has_value();
  if (error_) out_.error = *error_;
  return std::move(out_);
}

}  // namespace ds::bench
