// The Responses API's translation to and from chat completions (responses_api.h).
#include "http/responses_api.h"

#include <set>

namespace ds {
namespace {

std::string item_id(const char* prefix) { return prefix + random_hex(32); }

ApiError field_error(const std::string& param, const std::string& message) { return bad_request(message, param); }

// A content value as text: a string, or parts {type: input_text | output_text | text, text}.
std::optional<ApiError> content_text(const Json& c, const std::string& where, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return field_error("input", "'" + where + "' must be a string or a list of text parts");
  for (size_t j = 0; j < c.size(); ++j) {
    const Json& p = c[j];
    const std::string type = string_field(p, "type");
    if (type == "input_image" || type == "input_file" || type == "input_audio")
      return field_error("input", "'" + where + "[" + std::to_string(j) + "]' is " + type +
                                      ": this server serves a text-only model");
    if ((type != "input_text" && type != "output_text" && type != "text") || !p.contains("text") ||
        !p["text"].is_string())
      return field_error("input", "'" + where + "[" + std::to_string(j) +
                                      "]' must be a text part ({\"type\": \"input_text\", \"text\": ...})");
    *out += p["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> input_messages(const Json& input, Json* messages) {
  if (input.is_string()) {
    messages->push_back(Json{{"role", "user"}, {"content", input.get<std::string>()}});
    return std::nullopt;
  }
  if (!input.is_array()) return field_error("input", "'input' must be a string or a list of input items");
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& it = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!it.is_object()) return field_error("input", "'" + where + "' must be an object");
    const std::string type = string_field(it, "type", "message");
    if (type == "message") {
      const std::string role = string_field(it, "role");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        return field_error("input", "'" + where + ".role' must be user, assistant, system or developer");
      std::string text;
      if (!it.contains("content")) return field_error("input", "'" + where + ".content' is required");
      if (auto e = content_text(it["content"], where + ".content", &text)) return e;
      messages->push_back(Json{{"role", role == "developer" ? "system" : role}, {"content", text}});
    } else if (type == "function_call") {
      for (const char* k : {"call_id", "name", "arguments"})
        if (!it.contains(k) || !it[k].is_string())
          return field_error("input", "'" + where + "." + k + "' must be a string");
      Json call = {{"id", it["call_id"]},
                   {"type", "function"},
                   {"function", Json{{"name", it["name"]}, {"arguments", it["arguments"]}}}};
      // Consecutive calls are one assistant turn.
      if (!messages->empty() && string_field(messages->back(), "role") == "assistant" &&
          messages->back().contains("tool_calls"))
        messages->back()["tool_calls"].push_back(std::move(call));
      else
        messages->push_back(Json{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}});
    } else if (type == "function_call_output") {
      if (!it.contains("call_id") || !it["call_id"].is_string())
        return field_error("input", "'" + where + ".call_id' must be a string");
      std::string text;
      if (!it.contains("output")) return field_error("input", "'" + where + ".output' is required");
      if (auto e = content_text(it["output"], where + ".output", &text)) return e;
      messages->push_back(Json{{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", text}});
    } else if (type == "reasoning") {
      continue;  // earlier reasoning is not part of the prompt (DeepSeek's templates drop it too)
    } else {
      return field_error("input", "'" + where + ".type' " + type +
                                      " is not supported (message, function_call, function_call_output, reasoning)");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_responses_request(const Json& body, ResponsesRequest* out) {
  // Chat fields that mean the same here (SGLang's sampling extras included).
  static const std::set<std::string> kSame = {
      "model", "temperature", "top_p", "stream", "seed", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
      "presence_penalty", "stop", "regex", "json_schema", "ebnf", "structural_tag", "ignore_eos", "min_tokens",
      "skip_special_tokens", "logit_bias"};
  static const std::set<std::string> kIgnored = {"user", "include", "service_tier", "prompt_cache_key",
                                                 "safety_identifier", "max_tool_calls"};
  Json& chat = out->chat_body;
  Json& echo = out->echo;
  echo = Json{{"instructions", nullptr}, {"max_output_tokens", nullptr}, {"metadata", Json::object()},
              {"parallel_tool_calls", true}, {"previous_response_id", nullptr},
              {"reasoning", Json{{"effort", nullptr}, {"summary", nullptr}}}, {"store", true},
              {"temperature", 1.0}, {"text", Json{{"format", Json{{"type", "text"}}}}}, {"tool_choice", "auto"},
              {"tools", Json::array()}, {"top_p", 1.0}, {"truncation", "disabled"}, {"user", nullptr}};
  if (!body.contains("input") || body["input"].is_null())
    return field_error("input", "'input' (a string or a list of input items) is required");
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (v.is_null()) continue;
    if (k == "input") {
      if (auto e = input_messages(v, &out->input_messages)) return e;
    } else if (k == "instructions") {
      if (!v.is_string()) return field_error(k, "'instructions' must be a string");
      out->instructions = v.get<std::string>();
      echo[k] = v;
    } else if (k == "tools") {
      if (!v.is_array()) return field_error(k, "'tools' must be a list of function tools");
      Json tools = Json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        const Json& t = v[i];
        const std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object() || string_field(t, "type") != "function")
          return field_error(where, "'" + where + "': only function tools ({\"type\": \"function\", \"name\", "
                                    "\"parameters\"}) are supported");
        if (!t.contains("name") || !t["name"].is_string()) return field_error(where, "'" + where + ".name' must be a string");
        Json fn = {{"name", t["name"]}};
        for (const char* f : {"description", "parameters", "strict"})
          if (t.contains(f) && !t[f].is_null()) fn[f] = t[f];
        tools.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
      }
      chat["tools"] = std::move(tools);
      echo[k] = v;
    } else if (k == "tool_choice") {
      if (v.is_string()) {
        chat[k] = v;
      } else if (v.is_object() && string_field(v, "type") == "function" && v.contains("name") && v["name"].is_string()) {
        chat[k] = Json{{"type", "function"}, {"function", Json{{"name", v["name"]}}}};
      } else {
        return field_error(k, "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
      }
      echo[k] = v;
    } else if (k == "max_output_tokens") {
      chat["max_tokens"] = v;
      echo[k] = v;
    } else if (k == "text") {
      if (!v.is_object()) return field_error(k, "'text' must be an object ({\"format\": ...})");
      if (const auto f = v.find("format"); f != v.end() && !f->is_null()) {
        const std::string type = string_field(*f, "type");
        if (type == "json_schema") {
          if (!f->contains("schema") || !(*f)["schema"].is_object())
            return field_error(k, "'text.format.schema' must be a JSON schema object");
          chat["response_format"] = Json{{"type", "json_schema"},
                                         {"json_schema", Json{{"name", string_field(*f, "name", "response")},
                                                              {"schema", (*f)["schema"]}}}};
        } else if (type == "json_object") {
          chat["response_format"] = Json{{"type", "json_object"}};
        } else if (type != "text") {
          return field_error(k, "'text.format.type' must be text, json_object or json_schema");
        }
      }
      echo[k] = v;
    } else if (k == "reasoning") {
      if (!v.is_object()) return field_error(k, "'reasoning' must be an object ({\"effort\": ...})");
      const Json effort = v.value("effort", Json(nullptr));
      if (!effort.is_null() && !effort.is_string()) return field_error(k, "'reasoning.effort' must be a string");
      const std::string e = effort.is_string() ? effort.get<std::string>() : "";
      if (e == "low" || e == "medium" || e == "high") chat["chat_template_kwargs"] = Json{{"thinking", true}};
      else if (!e.empty() && e != "minimal" && e != "none")
        return field_error(k, "'reasoning.effort' must be none, minimal, low, medium or high");
      echo[k] = Json{{"effort", effort}, {"summary", v.value("summary", Json(nullptr))}};
    } else if (k == "previous_response_id") {
      if (!v.is_string() || v.get<std::string>().empty())
        return field_error(k, "'previous_response_id' must be a response id");
      out->previous_response_id = v.get<std::string>();
      echo[k] = v;
    } else if (k == "store") {
      if (!v.is_boolean()) return field_error(k, "'store' must be a boolean");
      out->store = v.get<bool>();
      echo[k] = v;
    } else if (k == "metadata") {
      if (!v.is_object()) return field_error(k, "'metadata' must be an object of strings");
      echo[k] = v;
    } else if (k == "parallel_tool_calls") {
      if (!v.is_boolean()) return field_error(k, "'parallel_tool_calls' must be a boolean");
      echo[k] = v;
    } else if (k == "truncation") {
      if (v != "disabled" && v != "auto") return field_error(k, "'truncation' must be disabled or auto");
      echo[k] = v;
    } else if (k == "background") {
      if (v != false) return field_error(k, "'background' responses are not supported by this server");
    } else if (k == "top_logprobs") {
      if (v != 0) return field_error(k, "'top_logprobs' is not supported by this server's Responses API");
    } else if (k == "conversation" || k == "prompt") {
      return field_error(k, "'" + k + "' is not supported by this server (use input and previous_response_id)");
    } else if (kSame.count(k)) {
      chat[k] = v;
      if (k == "temperature" || k == "top_p") echo[k] = v;
    } else if (!kIgnored.count(k)) {
      return field_error(k, "Unrecognized request argument supplied: " + k);
    }
  }
  return std::nullopt;
}

void ResponseItems::open(Open kind) {
  close();
  open_ = kind;
  if (kind == Open::kReasoning) {
    items_.push_back(Json{{"id", item_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()},
                          {"content", Json::array({Json{{"type", "reasoning_text"}, {"text", ""}}})},
                          {"status", "in_progress"}});
    Json added = items_.back();
    added["content"] = Json::array();
    emit("response.output_item.added", Json{{"output_index", items_.size() - 1}, {"item", added}});
  } else if (kind == Open::kMessage) {
    items_.push_back(Json{{"id", item_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                          {"content", Json::array({Json{{"type", "output_text"}, {"text", ""},
                                                        {"annotations", Json::array()}}})}});
    Json added = items_.back();
    added["content"] = Json::array();
    const size_t at = items_.size() - 1;
    emit("response.output_item.added", Json{{"output_index", at}, {"item", added}});
    emit("response.content_part.added", Json{{"item_id", items_[at]["id"]}, {"output_index", at}, {"content_index", 0},
                                             {"part", items_[at]["content"][0]}});
  }
}

void ResponseItems::feed(const ChatDelta& d) {
  if (!d.reasoning.empty()) {
    if (open_ != Open::kReasoning) open(Open::kReasoning);
    const size_t at = items_.size() - 1;
    Json& text = items_[at]["content"][0]["text"];
    text = text.get<std::string>() + d.reasoning;
    emit("response.reasoning_text.delta",
         Json{{"item_id", items_[at]["id"]}, {"output_index", at}, {"content_index", 0}, {"delta", d.reasoning}});
  }
  if (!d.content.empty()) {
    if (open_ != Open::kMessage) open(Open::kMessage);
    const size_t at = items_.size() - 1;
    Json& text = items_[at]["content"][0]["text"];
    text = text.get<std::string>() + d.content;
    emit("response.output_text.delta", Json{{"item_id", items_[at]["id"]}, {"output_index", at}, {"content_index", 0},
                                            {"delta", d.content}, {"logprobs", Json::array()}});
  }
  for (const ToolCallDelta& t : d.tool_calls) {
    auto it = calls_.find(t.index);
    if (it == calls_.end()) {
      if (open_ != Open::kCalls) {
        close();
        open_ = Open::kCalls;
      }
      items_.push_back(Json{{"id", item_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
                            {"call_id", t.id.empty() ? item_id("call_") : t.id}, {"name", t.name},
                            {"arguments", ""}});
      it = calls_.emplace(t.index, items_.size() - 1).first;
      emit("response.output_item.added", Json{{"output_index", it->second}, {"item", items_[it->second]}});
    }
    if (t.arguments.empty()) continue;
    Json& item = items_[it->second];
    item["arguments"] = item["arguments"].get<std::string>() + t.arguments;
    emit("response.function_call_arguments.delta",
         Json{{"item_id", item["id"]}, {"output_index", it->second}, {"delta", t.arguments}});
  }
}

void ResponseItems::close() {
  const Open was = open_;
  open_ = Open::kNone;
  if (was == Open::kNone) return;
  if (was == Open::kCalls) {
    for (size_t at = 0; at < items_.size(); ++at) {
      Json& item = items_[at];
      if (item["type"] != "function_call" || item["status"] != "in_progress") continue;
      item["status"] = "completed";
      emit("response.function_call_arguments.done",
           Json{{"item_id", item["id"]}, {"output_index", at}, {"arguments", item["arguments"]}});
      emit("response.output_item.done", Json{{"output_index", at}, {"item", item}});
    }
    return;
  }
  const size_t at = items_.size() - 1;
  Json& item = items_[at];
  item["status"] = "completed";
  const Json& part = item["content"][0];
  if (was == Open::kReasoning) {
    emit("response.reasoning_text.done",
         Json{{"item_id", item["id"]}, {"output_index", at}, {"content_index", 0}, {"text", part["text"]}});
  } else {
    emit("response.output_text.done", Json{{"item_id", item["id"]}, {"output_index", at}, {"content_index", 0},
                                           {"text", part["text"]}, {"logprobs", Json::array()}});
    emit("response.content_part.done",
         Json{{"item_id", item["id"]}, {"output_index", at}, {"content_index", 0}, {"part", part}});
  }
  emit("response.output_item.done", Json{{"output_index", at}, {"item", item}});
}

Json ResponseItems::as_messages() const {
  std::string text;
  Json calls = Json::array();
  for (const Json& item : items_) {
    if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
    if (item["type"] == "function_call")
      calls.push_back(Json{{"id", item["call_id"]},
                           {"type", "function"},
                           {"function", Json{{"name", item["name"]}, {"arguments", item["arguments"]}}}});
  }
  if (text.empty() && calls.empty()) return Json::array();
  Json m = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? Json(text) : Json(nullptr)}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return Json::array({std::move(m)});
}

Json response_object(const std::string& id, int64_t created_at, const std::string& model, const std::string& status,
                     const Json& output, const Json& usage, const ResponsesRequest& r) {
  Json o = Json::object();
  o["id"] = id;
  o["object"] = "response";
  o["created_at"] = created_at;
  o["status"] = status;
  o["error"] = nullptr;
  o["incomplete_details"] = status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  o["model"] = model;
  o["output"] = output;
  o["usage"] = usage;
  for (auto it = r.echo.begin(); it != r.echo.end(); ++it) o[it.key()] = it.value();
  return o;
}

Json responses_usage(const Json& chat_usage, int64_t reasoning_tokens) {
  if (chat_usage.is_null()) return nullptr;
  const int64_t in = chat_usage.value("prompt_tokens", 0), out = chat_usage.value("completion_tokens", 0);
  const int64_t cached = chat_usage.contains("prompt_tokens_details")
                             ? chat_usage["prompt_tokens_details"].value("cached_tokens", 0)
                             : 0;
  return Json{{"input_tokens", in},
              {"input_tokens_details", Json{{"cached_tokens", cached}}},
              {"output_tokens", out},
              {"output_tokens_details", Json{{"reasoning_tokens", reasoning_tokens}}},
              {"total_tokens", in + out}};
}

void ResponseStore::drop(std::unordered_map<std::string, Slot>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.at);
  map_.erase(it);
}

bool ResponseStore::put(const std::string& id, Entry e) {
  const size_t bytes = e.response.dump().size() + e.conversation.dump().size();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = map_.find(id); it != map_.end()) drop(it);
  if (bytes > max_bytes_) return false;
  lru_.push_front(id);
  map_.emplace(id, Slot{std::move(e), bytes, lru_.begin()});
  bytes_ += bytes;
  while (map_.size() > capacity_ || bytes_ > max_bytes_) drop(map_.find(lru_.back()));
  return true;
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.at);
  return it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return false;
  drop(it);
  return true;
}

}  // namespace ds
