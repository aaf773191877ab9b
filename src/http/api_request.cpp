// Request parsing (see api_request.h): a field reader that checks JSON types and ranges and rejects unknown
// or unsupported fields by name, and the three endpoint schemas on top of it.
#include "http/api_request.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace ds {

Json error_json(const ApiError& e) {
  Json err = Json::object();
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? Json(nullptr) : Json(e.param);
  err["code"] = e.code.empty() ? Json(nullptr) : Json(e.code);
  Json out = Json::object();
  out["error"] = std::move(err);
  return out;
}

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())
                                    << 1)};
  static const char* kHex = "0123456789abcdef";
  std::string s(n, '0');
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) bits = rng();
    s[i] = kHex[bits & 15];
    bits >>= 4;
  }
  return s;
}

std::string string_field(const Json& obj, const char* key, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<ApiError> parse_json_body(const std::string& body, Json* out) {
  if (body.empty()) return bad_request("the request body is empty; expected a JSON object");
  if (json_nests_deeper(body))
    return bad_request("the request body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) +
                       " levels");
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad_request("the request body is not valid JSON");
  if (!j.is_object()) return bad_request("the request body must be a JSON object");
  *out = std::move(j);
  return std::nullopt;
}

namespace {

const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a float";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    default: return "an unsupported value";
  }
}

// Integral JSON number (an integer, or a float with an integral value) within int64.
bool as_int64(const Json& v, int64_t* out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    *out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

// Reads the fields of one JSON object; remembers the first error and which keys were consumed.
class Reader {
 public:
  Reader(const Json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  std::optional<ApiError> err;

  std::string param(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  void fail(std::string message, const std::string& key) {
    if (!err) err = bad_request(std::move(message), param(key));
  }
  // Present and not null (null means absent, as in OpenAI's SDKs).
  const Json* find(const std::string& key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  void ignore(const std::string& key) { seen_.insert(key); }

  bool get_bool(const std::string& key, bool* out) {
    const Json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) {
      fail("'" + param(key) + "' must be a boolean, got " + type_name(*v), key);
      return false;
    }
    *out = v->get<bool>();
    return true;
  }
  bool get_int(const std::string& key, int64_t lo, int64_t hi, int64_t* out, const char* range_text = nullptr) {
    const Json* v = find(key);
    if (!v) return false;
    int64_t x = 0;
    if (!as_int64(*v, &x)) {
      fail("'" + param(key) + "' must be an integer, got " + (v->is_number() ? v->dump() : type_name(*v)), key);
      return false;
    }
    if (x < lo || x > hi) {
      fail("'" + param(key) + "' must be " +
               (range_text ? std::string(range_text)
                           : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]") +
               ", got " + std::to_string(x),
           key);
      return false;
    }
    *out = x;
    return true;
  }
  template <class T>
  bool get_int_as(const std::string& key, int64_t lo, int64_t hi, T* out, const char* range_text = nullptr) {
    int64_t x = 0;
    if (!get_int(key, lo, hi, &x, range_text)) return false;
    *out = static_cast<T>(x);
    return true;
  }
  bool get_float(const std::string& key, double* out) {
    const Json* v = find(key);
    if (!v) return false;
    if (!v->is_number()) {
      fail("'" + param(key) + "' must be a number, got " + type_name(*v), key);
      return false;
    }
    const double d = v->get<double>();
    if (!std::isfinite(d)) {
      fail("'" + param(key) + "' must be finite", key);
      return false;
    }
    *out = d;
    return true;
  }
  // A float in [lo, hi] (open ends with lo_open / hi_open).
  bool get_float_range(const std::string& key, double lo, double hi, bool lo_open, bool hi_open, float* out) {
    double d = 0;
    if (!get_float(key, &d)) return false;
    // The bounds hold for the float the engine gets too: 1e-300 is > 0 but rounds to 0.0f.
    const double f = static_cast<float>(d);
    if ((lo_open ? d <= lo || f <= lo : d < lo) || (hi_open ? d >= hi || f >= hi : d > hi)) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "'%s' must be in %c%g, %g%c, got %g", param(key).c_str(), lo_open ? '(' : '[',
                    lo, hi, hi_open ? ')' : ']', d);
      fail(buf, key);
      return false;
    }
    *out = static_cast<float>(f);
    return true;
  }
  bool get_string(const std::string& key, std::string* out) {
    const Json* v = find(key);
    if (!v) return false;
    if (!v->is_string()) {
      fail("'" + param(key) + "' must be a string, got " + type_name(*v), key);
      return false;
    }
    *out = v->get<std::string>();
    return true;
  }
  // A feature dserve does not implement: an error when the field carries a value.
  void unsupported(const std::string& key, const char* what = nullptr) {
    const Json* v = find(key);
    if (!v) return;
    if ((v->is_array() || v->is_object() || v->is_string()) && v->empty()) return;
    if (v->is_boolean() && !v->get<bool>()) return;
    fail("'" + param(key) + "' is not supported by this server" + (what ? std::string(" (") + what + ")" : ""), key);
  }
  // Any key not consumed is an error ("Unrecognized request argument supplied", as OpenAI says).
  void reject_unknown() {
    if (err) return;
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!seen_.count(it.key())) {
        fail("Unrecognized request argument supplied: " + param(it.key()), it.key());
        return;
      }
    }
  }

 private:
  const Json& obj_;
  std::string prefix_;
  std::set<std::string> seen_;
};

constexpr int64_t kMaxTokensCap = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxN = 128;
constexpr size_t kMaxStops = 64;

void read_stop(Reader& r, const std::string& key, std::vector<std::string>* out) {
  const Json* v = r.find(key);
  if (!v) return;
  auto add = [&](const Json& s) {
    if (!s.is_string()) {
      r.fail("'" + r.param(key) + "' must be a string or a list of strings", key);
      return;
    }
    std::string str = s.get<std::string>();
    if (str.empty()) {
      r.fail("'" + r.param(key) + "' must not contain an empty string", key);
      return;
    }
    out->push_back(std::move(str));
  };
  if (v->is_string()) {
    add(*v);
  } else if (v->is_array()) {
    if (v->size() > kMaxStops) return r.fail("'" + r.param(key) + "' has more than 64 entries", key);
    for (const Json& s : *v) add(s);
  } else {
    r.fail("'" + r.param(key) + "' must be a string or a list of strings, got " + type_name(*v), key);
  }
}

void read_stop_ids(Reader& r, const std::string& key, std::vector<TokenId>* out) {
  const Json* v = r.find(key);
  if (!v) return;
  if (!v->is_array()) return r.fail("'" + r.param(key) + "' must be a list of token ids", key);
  for (const Json& x : *v) {
    int64_t id = 0;
    if (!as_int64(x, &id) || id < 0 || id > std::numeric_limits<int32_t>::max())
      return r.fail("'" + r.param(key) + "' must be a list of non-negative token ids", key);
    out->push_back(static_cast<TokenId>(id));
  }
}

// OpenAI's logit_bias: {"<token id>": bias in [-100, 100], ...}, at most kMaxLogitBias entries (ids past the
// vocabulary are refused by the engine, which knows it).
constexpr size_t kMaxLogitBias = 1024;
void read_logit_bias(Reader& r, const std::string& key, std::vector<std::pair<TokenId, float>>* out) {
  const Json* v = r.find(key);
  if (!v || v->is_null()) return;
  if (!v->is_object()) return r.fail("'" + r.param(key) + "' must be an object of token id -> bias", key);
  if (v->size() > kMaxLogitBias)
    return r.fail("'" + r.param(key) + "' has more than " + std::to_string(kMaxLogitBias) + " entries", key);
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& id_text = it.key();
    int64_t id = -1;
    const bool digits = !id_text.empty() && id_text.size() <= 10 &&
                        std::all_of(id_text.begin(), id_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(id_text);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      return r.fail("'" + r.param(key) + "' keys must be token ids (non-negative integers), got '" + id_text + "'", key);
    if (!it.value().is_number() || !std::isfinite(it.value().get<double>()) || it.value().get<double>() < -100.0 ||
        it.value().get<double>() > 100.0)
      return r.fail("'" + r.param(key) + "' values must be numbers in [-100, 100] (token " + id_text + ")", key);
    out->emplace_back(static_cast<TokenId>(id), static_cast<float>(it.value().get<double>()));
  }
}

// Sampling and text fields shared by the endpoints. `openai`: OpenAI names (max_tokens, min_tokens) and
// max_tokens >= 1; otherwise SGLang's sampling_params names (max_new_tokens >= 0).
void read_sampling(Reader& r, bool openai, SamplingSpec* s) {
  SamplingParams& e = s->engine;
  if (openai) {
    int64_t max_tokens = 0;
    if (r.get_int("max_tokens", 1, kMaxTokensCap, &max_tokens, "at least 1")) {
      e.max_new_tokens = static_cast<int32_t>(max_tokens);
      s->max_new_tokens_set = true;
    }
    if (r.get_int("max_completion_tokens", 1, kMaxTokensCap, &max_tokens, "at least 1")) {
      e.max_new_tokens = static_cast<int32_t>(max_tokens);
      s->max_new_tokens_set = true;
    }
    r.get_int_as("min_tokens", 0, kMaxTokensCap, &e.min_new_tokens);
  } else {
    int64_t max_tokens = 0;
    if (r.get_int("max_new_tokens", 0, kMaxTokensCap, &max_tokens, ">= 0")) {
      e.max_new_tokens = static_cast<int32_t>(max_tokens);
      s->max_new_tokens_set = true;
    }
    r.get_int_as("min_new_tokens", 0, kMaxTokensCap, &e.min_new_tokens);
  }
  if (s->max_new_tokens_set && e.min_new_tokens > e.max_new_tokens)
    r.fail("'" + r.param(openai ? "min_tokens" : "min_new_tokens") + "' must not exceed the maximum number of new tokens",
           openai ? "min_tokens" : "min_new_tokens");
  s->temperature_set = r.get_float_range("temperature", 0.0, 1e6, false, false, &e.temperature);
  s->top_p_set = r.get_float_range("top_p", 0.0, 1.0, true, false, &e.top_p);
  {
    int64_t k = 0;
    if (r.get_int("top_k", -1, kMaxTokensCap, &k, "-1 (off) or at least 1")) {
      if (k == 0) {
        r.fail("'" + r.param("top_k") + "' must be -1 (off) or at least 1, got 0", "top_k");
      } else {
        e.top_k = static_cast<int32_t>(k);
        s->top_k_set = true;
      }
    }
  }
  s->min_p_set = r.get_float_range("min_p", 0.0, 1.0, false, false, &e.min_p);
  r.get_float_range("frequency_penalty", -2.0, 2.0, false, false, &e.frequency_penalty);
  r.get_float_range("presence_penalty", -2.0, 2.0, false, false, &e.presence_penalty);
  if (r.get_float_range("repetition_penalty", 0.0, 2.0, true, false, &s->repetition_penalty)) {
    e.repetition_penalty = s->repetition_penalty;
    s->repetition_penalty_set = true;
  }
  read_stop(r, "stop", &s->text.stop);
  read_stop_ids(r, "stop_token_ids", &e.stop_token_ids);
  r.get_bool("ignore_eos", &e.ignore_eos);
  r.get_bool("skip_special_tokens", &s->text.skip_special_tokens);
  r.get_bool("spaces_between_special_tokens", &s->text.spaces_between_special_tokens);
  r.get_bool("no_stop_trim", &s->text.no_stop_trim);
  r.get_int_as("n", 1, kMaxN, &s->n);
  {
    int64_t seed = 0;
    const std::string key = (!openai && r.has("sampling_seed")) ? "sampling_seed" : "seed";
    if (!openai) r.ignore(key == "seed" ? "sampling_seed" : "seed");
    if (r.get_int(key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &seed)) {
      e.seed = static_cast<uint64_t>(seed);
      s->seed_set = true;
    }
  }
  r.get_string("regex", &s->regex);
  if (const Json* js = r.find("json_schema"); js && !js->is_null()) {  // SGLang: a string; an object is taken too
    if (js->is_string())
      s->json_schema = js->get<std::string>();
    else if (js->is_object())
      s->json_schema = js->dump();
    else
      r.fail("'" + r.param("json_schema") + "' must be a JSON schema (a string or an object)", "json_schema");
  }
  r.get_string("ebnf", &s->ebnf);
  if (const Json* st = r.find("structural_tag")) {  // SGLang: a JSON string; an object is taken too
    if (st->is_string())
      s->structural_tag = st->get<std::string>();
    else if (st->is_object())
      s->structural_tag = st->dump();
    else
      r.fail("'" + r.param("structural_tag") + "' must be {\"structures\": [...], \"triggers\": [...]} (an object or "
             "its JSON text)", "structural_tag");
  }
  if (s->constraints() > 1)
    r.fail("only one of '" + r.param("regex") + "', 'json_schema', 'ebnf' and 'structural_tag' may constrain one request",
           !s->regex.empty() ? "regex" : !s->json_schema.empty() ? "json_schema" : "ebnf");
  read_logit_bias(r, "logit_bias", &e.logit_bias);
  r.unsupported("custom_params");
  r.ignore("stream_interval");
}

// OpenAI's structured outputs (response_format): json_schema (its "schema"), json_object (any JSON object), text, and
// SGLang's structural_tag (its structures and triggers).
void read_response_format(Reader& r, SamplingSpec* s) {
  const Json* rf = r.find("response_format");
  if (!rf || rf->is_null()) return;
  const std::string type = string_field(*rf, "type");
  if (type == "json_schema") {
    const Json* js = rf->contains("json_schema") ? &(*rf)["json_schema"] : nullptr;
    if (!js || !js->is_object() || !js->contains("schema") || !(*js)["schema"].is_object())
      return r.fail("'response_format.json_schema.schema' must be a JSON schema object", "response_format");
    s->json_schema = (*js)["schema"].dump();
    s->json_schema_from_response_format = true;
  } else if (type == "json_object") {
    s->json_schema = R"({"type": "object"})";
  } else if (type == "structural_tag") {  // SGLang's: {"type", "structures", "triggers"}
    Json spec = Json::object();
    for (const char* k : {"structures", "triggers"})
      if (rf->contains(k)) spec[k] = (*rf)[k];
    if (!s->structural_tag.empty())
      return r.fail("'response_format' and 'structural_tag' cannot both constrain one request", "response_format");
    s->structural_tag = spec.dump();
    s->structural_tag_from_response_format = true;
  } else if (type != "text") {
    return r.fail("'response_format.type' must be text, json_object, json_schema or structural_tag", "response_format");
  }
  if (type != "text" && s->constraints() > 1)
    r.fail("'response_format' and '" +
               std::string(!s->regex.empty() ? "regex" : !s->ebnf.empty() ? "ebnf" : "json_schema") +
               "' cannot both constrain one request", "response_format");
}

// One token-id list; `what` names the field in errors.
bool read_ids(Reader& r, const Json& v, const std::string& key, std::vector<int32_t>* out) {
  if (!v.is_array()) {
    r.fail("'" + r.param(key) + "' must be a list of token ids", key);
    return false;
  }
  out->reserve(v.size());
  for (const Json& x : v) {
    int64_t id = 0;
    if (!as_int64(x, &id) || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      r.fail("'" + r.param(key) + "' must contain non-negative integer token ids, got " +
                 (x.is_number() ? x.dump() : std::string(type_name(x))),
             key);
      return false;
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return true;
}

// string | [string] | [int] | [[int]] (OpenAI prompt, SGLang text/input_ids).
bool read_prompts(Reader& r, const std::string& key, bool allow_text, bool allow_ids, std::vector<PromptSpec>* out,
                  bool* batch) {
  const Json* v = r.find(key);
  if (!v) return false;
  *batch = false;
  if (allow_text && v->is_string()) {
    out->push_back(PromptSpec{true, v->get<std::string>(), {}});
    return true;
  }
  if (!v->is_array()) {
    r.fail("'" + r.param(key) + "' must be " +
               (allow_text && allow_ids ? "a string, a list of strings, a list of token ids or a list of lists of token ids"
                : allow_text          ? "a string or a list of strings"
                                      : "a list of token ids or a list of lists of token ids") +
               ", got " + type_name(*v),
           key);
    return false;
  }
  if (v->empty()) {
    r.fail("'" + r.param(key) + "' must not be empty", key);
    return false;
  }
  const Json& first = (*v)[0];
  if (allow_text && first.is_string()) {
    *batch = true;
    for (const Json& x : *v) {
      if (!x.is_string()) {
        r.fail("'" + r.param(key) + "' mixes strings with other values", key);
        return false;
      }
      out->push_back(PromptSpec{true, x.get<std::string>(), {}});
    }
    return true;
  }
  if (allow_ids && first.is_array()) {
    *batch = true;
    for (const Json& x : *v) {
      PromptSpec p;
      if (!read_ids(r, x, key, &p.ids)) return false;
      out->push_back(std::move(p));
    }
    return true;
  }
  if (allow_ids && first.is_number()) {
    PromptSpec p;
    if (!read_ids(r, *v, key, &p.ids)) return false;
    out->push_back(std::move(p));
    return true;
  }
  r.fail("'" + r.param(key) + "' has entries of the wrong type (" + type_name(first) + ")", key);
  return false;
}

void read_stream_options(Reader& r, bool stream, bool* include_usage, bool* continuous) {
  const Json* so = r.find("stream_options");
  if (!so) return;
  if (!so->is_object()) return r.fail("'stream_options' must be an object", "stream_options");
  if (!stream) return r.fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
  Reader s(*so, "stream_options");
  s.get_bool("include_usage", include_usage);
  s.get_bool("continuous_usage_stats", continuous);
  s.reject_unknown();
  if (s.err && !r.err) r.err = s.err;
}

// kMaxSequencesPerRequest, named by the prompts' field.
std::optional<ApiError> check_sequence_count(size_t seqs, const char* param) {
  if (seqs <= kMaxSequencesPerRequest) return std::nullopt;
  return bad_request("a request may start at most " + std::to_string(kMaxSequencesPerRequest) +
                         " sequences (prompts x n); this one asks for " + std::to_string(seqs) +
                         ": send the prompts in several requests",
                     param);
}

// Fields OpenAI accepts that do not change the output here.
void ignore_openai_metadata(Reader& r) {
  for (const char* k : {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "stream_reasoning",
                        "return_hidden_states", "log_metrics", "session_params", "lora_path", "bootstrap_host",
                        "bootstrap_port", "bootstrap_room"})
    r.ignore(k);
}

}  // namespace

std::optional<ApiError> parse_generate_request(const Json& body, GenerateRequest* out) {
  Reader r(body, "");
  const bool has_text = r.has("text");
  const bool has_ids = r.has("input_ids");
  if (has_text && has_ids) return bad_request("give either 'text' or 'input_ids', not both", "text");
  if (!has_text && !has_ids) {
    if (r.has("input_embeds")) return bad_request("'input_embeds' is not supported by this server", "input_embeds");
    return bad_request("one of 'text' or 'input_ids' is required", "text");
  }
  if (has_text) {
    r.ignore("input_ids");
    read_prompts(r, "text", true, false, &out->prompts, &out->batch);
  } else {
    r.ignore("text");
    read_prompts(r, "input_ids", false, true, &out->prompts, &out->batch);
  }
  if (r.err) return r.err;
  const size_t np = out->prompts.size();

  const Json* sp = r.find("sampling_params");
  if (sp && sp->is_array()) {
    if (sp->size() != np)
      return bad_request("'sampling_params' is a list of " + std::to_string(sp->size()) + " but there are " +
                             std::to_string(np) + " prompts",
                         "sampling_params");
  } else if (sp && !sp->is_object()) {
    return bad_request(std::string("'sampling_params' must be an object or a list of objects, got ") + type_name(*sp),
                       "sampling_params");
  }
  for (size_t i = 0; i < np; ++i) {
    SamplingSpec s;
    const Json* obj = sp ? (sp->is_array() ? &(*sp)[i] : sp) : nullptr;
    if (obj && !obj->is_null()) {
      if (!obj->is_object()) return bad_request("'sampling_params' entries must be objects", "sampling_params");
      Reader sr(*obj, "sampling_params");
      read_sampling(sr, false, &s);
      sr.reject_unknown();
      if (sr.err) return sr.err;
    }
    out->sampling.push_back(std::move(s));
    if (sp && !sp->is_array() && i == 0 && np > 1) {
      for (size_t j = 1; j < np; ++j) out->sampling.push_back(out->sampling[0]);
      break;
    }
  }

  if (const Json* rid = r.find("rid")) {
    if (rid->is_string()) {
      if (np != 1) return bad_request("'rid' must be a list with one id per prompt", "rid");
      out->rids.push_back(rid->get<std::string>());
    } else if (rid->is_array()) {
      if (rid->size() != np)
        return bad_request("'rid' has " + std::to_string(rid->size()) + " ids for " + std::to_string(np) + " prompts",
                           "rid");
      for (const Json& x : *rid) {
        if (!x.is_string()) return bad_request("'rid' entries must be strings", "rid");
        out->rids.push_back(x.get<std::string>());
      }
    } else {
      return bad_request("'rid' must be a string or a list of strings", "rid");
    }
    for (const auto& id : out->rids)
      if (id.empty()) return bad_request("'rid' must not be empty", "rid");
  }
  out->rids.resize(np);
  {
    size_t seqs = 0;
    for (const SamplingSpec& s : out->sampling) seqs += static_cast<size_t>(s.n);
    if (auto e = check_sequence_count(seqs, has_text ? "text" : "input_ids")) return e;
  }
  r.get_bool("stream", &out->stream);
  r.get_bool("return_logprob", &out->return_logprob);
  r.get_int_as("logprob_start_len", -1, kMaxTokensCap, &out->logprob_start_len);
  r.get_int_as("top_logprobs_num", 0, 1000, &out->top_logprobs_num);
  r.get_bool("return_text_in_logprobs", &out->return_text_in_logprobs);
  if (const Json* ids = r.find("token_ids_logprob"); ids && !ids->is_null() && np > 0) {
    // [int] for every prompt, or [[int]] one per prompt. (Ids past the vocabulary: the engine says so.)
    const auto read_list = [&](const Json& l, std::vector<int32_t>* out_ids) -> std::optional<ApiError> {
      if (!l.is_array()) return bad_request("'token_ids_logprob' must be a list of token ids or of such lists",
                                            "token_ids_logprob");
      if (l.size() > 1000) return bad_request("'token_ids_logprob' may hold at most 1000 ids a prompt", "token_ids_logprob");
      for (const Json& x : l) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
          return bad_request("'token_ids_logprob' entries must be non-negative token ids", "token_ids_logprob");
        out_ids->push_back(static_cast<int32_t>(x.get<int64_t>()));
      }
      return std::nullopt;
    };
    const bool nested = ids->is_array() && !ids->empty() && (*ids)[0].is_array();
    out->token_ids_logprob.resize(np);
    if (nested) {
      if (ids->size() != np)
        return bad_request("'token_ids_logprob' has " + std::to_string(ids->size()) + " lists for " +
                               std::to_string(np) + " prompts",
                           "token_ids_logprob");
      for (size_t i = 0; i < np; ++i)
        if (auto e = read_list((*ids)[i], &out->token_ids_logprob[i])) return e;
    } else {
      if (auto e = read_list(*ids, &out->token_ids_logprob[0])) return e;
      for (size_t i = 1; i < np; ++i) out->token_ids_logprob[i] = out->token_ids_logprob[0];
    }
  }
  r.unsupported("image_data", "text-only models");
  r.unsupported("audio_data", "text-only models");
  r.unsupported("video_data", "text-only models");
  r.unsupported("input_embeds");
  r.unsupported("custom_logit_processor");
  r.get_bool("return_hidden_states", &out->return_hidden_states);
  r.get_bool("return_routed_experts", &out->return_routed_experts);
  r.unsupported("lora_path");
  if (const Json* sp = r.find("session_params")) {
    if (!sp->is_object())
      return bad_request(std::string("'session_params' must be an object, got ") + type_name(*sp), "session_params");
    Reader sr(*sp, "session_params");
    SessionParams p;
    if (!sr.get_string("id", &p.id) && !sr.err)
      return bad_request("'session_params.id' (the session, from /open_session) is required", "session_params.id");
    std::string rid;
    if (sr.get_string("rid", &rid)) p.rid = rid;
    sr.get_int("offset", 0, INT32_MAX, &p.offset, "a non-negative number of ids");
    sr.get_bool("replace", &p.replace);
    sr.get_bool("drop_previous_output", &p.drop_previous_output);
    sr.reject_unknown();
    if (sr.err) return sr.err;
    if (p.id.empty()) return bad_request("'session_params.id' must not be empty", "session_params.id");
    if (np != 1 || out->sampling[0].n != 1)
      return bad_request("'session_params' continues one sequence: give one prompt and n = 1", "session_params");
    out->session = std::move(p);
  }
  for (const char* k : {"modalities", "log_metrics", "data_parallel_rank", "bootstrap_host", "bootstrap_port",
                        "bootstrap_room", "stream_output", "no_logs"})
    r.ignore(k);
  r.reject_unknown();
  return r.err;
}

std::optional<ApiError> parse_open_session(const Json& body, std::string* session_id) {
  Reader r(body, "");
  int64_t capacity = 0;  // SGLang's capacity_of_str_len: accepted, not used (the session holds ids, not text)
  r.get_int("capacity_of_str_len", 0, INT64_MAX, &capacity, "a non-negative integer");
  if (r.get_string("session_id", session_id) && session_id->empty())
    return bad_request("'session_id' must not be empty (leave it out for a fresh id)", "session_id");
  r.reject_unknown();
  return r.err;
}

std::optional<ApiError> parse_completion_request(const Json& body, CompletionRequest* out) {
  Reader r(body, "");
  r.get_string("model", &out->model);
  bool batch = false;
  if (!r.has("prompt")) return bad_request("'prompt' is required", "prompt");
  read_prompts(r, "prompt", true, true, &out->prompts, &batch);
  read_sampling(r, true, &out->sampling);
  if (!out->sampling.max_new_tokens_set) out->sampling.engine.max_new_tokens = 16;  // OpenAI's default
  r.get_bool("stream", &out->stream);
  read_stream_options(r, out->stream, &out->include_usage, &out->continuous_usage_stats);
  r.get_int_as("logprobs", 0, 20, &out->logprobs);
  r.get_bool("echo", &out->echo);
  r.get_bool("return_hidden_states", &out->return_hidden_states);
  r.get_string("rid", &out->rid);
  {
    int64_t best_of = 0;
    if (r.get_int("best_of", 1, kMaxN, &best_of) && best_of != out->sampling.n)
      r.fail("'best_of' different from 'n' is not supported by this server", "best_of");
  }
  r.unsupported("suffix");
  read_response_format(r, &out->sampling);
  ignore_openai_metadata(r);
  r.reject_unknown();
  if (r.err) return r.err;
  return check_sequence_count(out->prompts.size() * static_cast<size_t>(out->sampling.n), "prompt");
}

std::string SamplingDefaults::describe() const {
  std::string out;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "x" + std::string temporaries here.
  auto add = [&](const char* name, const std::string& v) {
    if (!out.empty()) out += ' ';
    out.append(name).append("=").append(v);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (temperature) add("temperature", num(*temperature));
  if (top_p) add("top_p", num(*top_p));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (min_p) add("min_p", num(*min_p));
  if (repetition_penalty) add("repetition_penalty", num(*repetition_penalty));
  return out.empty() ? "none" : out;
}

Result<SamplingDefaults> parse_sampling_defaults(const std::string& json_text, const std::string& what) {
  Json j = Json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error(what, ": not a JSON object");
  SamplingDefaults d;
  // The same ranges a request may give (read_sampling); null or absent: no default.
  auto number = [&](const char* key, double lo, double hi, bool lo_open, std::optional<float>* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return error(what, ": '", key, "' must be a number, got ", it->dump());
    const double v = it->get<double>();
    if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
      return error(what, ": '", key, "' must be in ", lo_open ? "(" : "[", lo, ", ", hi, "], got ", v);
    *out = static_cast<float>(v);
    return Status::ok();
  };
  DS_RETURN_IF_ERROR(number("temperature", 0.0, 1e6, false, &d.temperature));
  DS_RETURN_IF_ERROR(number("top_p", 0.0, 1.0, true, &d.top_p));
  DS_RETURN_IF_ERROR(number("min_p", 0.0, 1.0, false, &d.min_p));
  DS_RETURN_IF_ERROR(number("repetition_penalty", 0.0, 2.0, true, &d.repetition_penalty));
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > kMaxTokensCap)
      return error(what, ": 'top_k' must be an integer, -1 or 0 (off) or at least 1, got ", it->dump());
    const int64_t k = it->get<int64_t>();
    d.top_k = static_cast<int32_t>(k == 0 ? -1 : k);  // transformers' 0 is off
  }
  return d;
}

void apply_sampling_defaults(const SamplingDefaults& d, SamplingSpec* s) {
  SamplingParams& e = s->engine;
  if (d.temperature && !s->temperature_set) e.temperature = *d.temperature;
  if (d.top_p && !s->top_p_set) e.top_p = *d.top_p;
  if (d.top_k && !s->top_k_set) e.top_k = *d.top_k;
  if (d.min_p && !s->min_p_set) e.min_p = *d.min_p;
  if (d.repetition_penalty && !s->repetition_penalty_set) {
    s->repetition_penalty = *d.repetition_penalty;
    e.repetition_penalty = *d.repetition_penalty;
  }
}

Result<Json> parse_preferred_sampling_params(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return error("--preferred-sampling-params must be a JSON object of sampling_params, got '", text, "'");
  GenerateRequest g;
  if (auto e = parse_generate_request(Json{{"input_ids", Json::array({0})}, {"sampling_params", j}}, &g))
    return error("--preferred-sampling-params: ", e->message);
  return j;
}

void merge_preferred_sampling(const Json& preferred, Json* body) {
  if (preferred.empty() || !body->is_object()) return;
  auto fill = [&](Json& sp) {
    for (const auto& [k, v] : preferred.items())
      if (!sp.contains(k) || sp[k].is_null()) sp[k] = v;
  };
  auto it = body->find("sampling_params");
  if (it == body->end() || it->is_null()) {
    (*body)["sampling_params"] = preferred;
  } else if (it->is_object()) {
    fill(*it);
  } else if (it->is_array()) {
    for (Json& sp : *it)
      if (sp.is_object()) fill(sp);
  }
}

std::optional<ApiError> check_tools(const Json& tools, std::vector<std::string>* names) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    const bool typed = t.is_object() && (!t.contains("type") || t["type"] == "function");
    if (!typed || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      return bad_request("'" + p + "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", p);
    if (names) names->push_back(t["function"]["name"].get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> parse_chat_request(const Json& body, ChatRequest* out) {
  Reader r(body, "");
  r.get_string("model", &out->model);
  const Json* msgs = r.find("messages");
  if (!msgs) return bad_request("'messages' is required", "messages");
  if (!msgs->is_array()) return bad_request(std::string("'messages' must be an array, got ") + type_name(*msgs), "messages");
  if (msgs->empty()) return bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request("'" + p + "' must be an object", p);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad_request("'" + p + ".role' must be a string", p + ".role");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer")
      return bad_request("'" + p + ".role' must be one of system, user, assistant, tool, developer; got '" + r + "'",
                         p + ".role");
    auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array())
      return bad_request("'" + p + ".content' must be a string, an array of parts or null", p + ".content");
  }
  out->messages = *msgs;
  out->tools = nullptr;
  if (const Json* tools = r.find("tools")) {
    if (!tools->is_array()) return bad_request("'tools' must be an array", "tools");
    if (auto e = check_tools(*tools)) return e;
    if (!tools->empty()) out->tools = *tools;
  }
  out->tool_choice = "auto";
  if (const Json* tc = r.find("tool_choice")) {
    if (tc->is_string()) {
      const std::string c = tc->get<std::string>();
      if (c != "auto" && c != "none" && c != "required")
        return bad_request("'tool_choice' must be \"none\", \"auto\" or \"required\", got \"" + c + "\"", "tool_choice");
      out->tool_choice = c;
    } else if (tc->is_object()) {  // {"type": "function", "function": {"name": ...}}
      const Json* f = tc->contains("function") ? &(*tc)["function"] : nullptr;
      if (string_field(*tc, "type") != "function" || !f || !f->is_object() || !f->contains("name") ||
          !(*f)["name"].is_string())
        return bad_request("'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      out->tool_choice = "function";
      out->tool_choice_name = (*f)["name"].get<std::string>();
    } else {
      return bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  read_sampling(r, true, &out->sampling);
  r.get_bool("stream", &out->stream);
  read_stream_options(r, out->stream, &out->include_usage, &out->continuous_usage_stats);
  r.get_bool("logprobs", &out->logprobs);
  if (r.get_int_as("top_logprobs", 0, 20, &out->top_logprobs) && out->top_logprobs > 0 && !out->logprobs)
    r.fail("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  if (const Json* kw = r.find("chat_template_kwargs")) {
    if (!kw->is_object()) {
      r.fail("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    } else {
      for (const char* k : {"thinking", "enable_thinking"}) {
        auto it = kw->find(k);
        if (it == kw->end() || it->is_null()) continue;
        if (!it->is_boolean())
          r.fail(std::string("'chat_template_kwargs.") + k + "' must be a boolean", "chat_template_kwargs");
        else
          out->thinking = it->get<bool>();
      }
    }
  }
  r.get_bool("separate_reasoning", &out->separate_reasoning);
  r.get_string("rid", &out->rid);
  read_response_format(r, &out->sampling);
  r.get_bool("continue_final_message", &out->continue_final_message);
  r.get_bool("return_hidden_states", &out->return_hidden_states);
  r.unsupported("functions", "use 'tools'");
  r.unsupported("function_call", "use 'tool_choice'");
  r.unsupported("audio");
  r.unsupported("prediction");
  r.unsupported("web_search_options");
  r.ignore("modalities");
  r.ignore("reasoning_effort");
  ignore_openai_metadata(r);
  r.reject_unknown();
  return r.err;
}

std::optional<ApiError> parse_score_request(const Json& body, ScoreRequest* out) {
  Reader r(body, "");
  r.get_string("model", &out->model);
  const Json* q = r.find("query");
  if (!q) return bad_request("'query' (a string or a list of token ids) is required", "query");
  if (q->is_string()) {
    out->query = PromptSpec{true, q->get<std::string>(), {}};
  } else if (q->is_array() && (q->empty() || !(*q)[0].is_array())) {
    if (!read_ids(r, *q, "query", &out->query.ids)) return r.err;
  } else {
    return bad_request(std::string("'query' must be a string or a list of token ids, got ") + type_name(*q), "query");
  }
  const Json* items = r.find("items");
  if (!items) return bad_request("'items' (a string, a list of strings or a list of token-id lists) is required", "items");
  const char* items_kinds = "a string, a list of strings or a list of token-id lists";
  if (items->is_string()) {
    out->items.push_back(PromptSpec{true, items->get<std::string>(), {}});
  } else if (!items->is_array() || items->empty()) {
    return bad_request(std::string("'items' must be ") + items_kinds + (items->is_array() ? ", not empty" : ""),
                       "items");
  } else {
    const bool text = (*items)[0].is_string();
    for (const Json& x : *items) {
      if (text && x.is_string()) {
        out->items.push_back(PromptSpec{true, x.get<std::string>(), {}});
      } else if (!text && x.is_array()) {
        PromptSpec p;
        if (!read_ids(r, x, "items", &p.ids)) return r.err;
        out->items.push_back(std::move(p));
      } else {
        return bad_request(std::string("'items' must be ") + items_kinds + " (entry " +
                               std::to_string(out->items.size()) + " is " + type_name(x) + ")",
                           "items");
      }
    }
  }
  if (out->items.size() > kMaxSequencesPerRequest)
    return bad_request("'items' may hold at most " + std::to_string(kMaxSequencesPerRequest) + " items, got " +
                           std::to_string(out->items.size()),
                       "items");
  if (out->items[0].is_text != out->query.is_text)
    return bad_request("'query' and 'items' must both be text or both token ids", "items");
  const Json* labels = r.find("label_token_ids");
  if (!labels) return bad_request("'label_token_ids' (a list of token ids) is required", "label_token_ids");
  if (!labels->is_array() || labels->empty())
    return bad_request("'label_token_ids' must be a non-empty list of token ids", "label_token_ids");
  if (labels->size() > 1000) return bad_request("'label_token_ids' may hold at most 1000 ids", "label_token_ids");
  if (!read_ids(r, *labels, "label_token_ids", &out->label_token_ids)) return r.err;
  if (static_cast<int64_t>(out->items.size() * out->label_token_ids.size()) > kMaxLogprobEntries)
    return bad_request("items x label_token_ids (" + std::to_string(out->items.size()) + " x " +
                           std::to_string(out->label_token_ids.size()) + ") exceed " +
                           std::to_string(kMaxLogprobEntries) + " scores a request",
                       "label_token_ids");
  r.get_bool("apply_softmax", &out->apply_softmax);
  r.get_bool("item_first", &out->item_first);
  ignore_openai_metadata(r);
  r.reject_unknown();
  return r.err;
}

PromptSpec score_prompt(const ScoreRequest& r, size_t item) {
  const PromptSpec& a = r.item_first ? r.items[item] : r.query;
  const PromptSpec& b = r.item_first ? r.query : r.items[item];
  PromptSpec p;
  p.is_text = r.query.is_text;
  p.text = a.text + b.text;
  p.ids = a.ids;
  p.ids.insert(p.ids.end(), b.ids.begin(), b.ids.end());
  return p;
}

std::vector<double> label_scores(const std::vector<double>& logprobs, bool apply_softmax) {
  std::vector<double> out(logprobs.size(), 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (double lp : logprobs) mx = std::max(mx, lp);
  if (apply_softmax && !std::isfinite(mx)) return out;
  double sum = 0.0;
  for (size_t i = 0; i < logprobs.size(); ++i) {
    if (!std::isfinite(logprobs[i])) continue;
    out[i] = std::exp(apply_softmax ? logprobs[i] - mx : logprobs[i]);
    sum += out[i];
  }
  if (apply_softmax)
    for (double& x : out) x /= sum;
  return out;
}

std::optional<ApiError> parse_pause_mode(const std::string& body, PauseMode* mode) {
  *mode = PauseMode::kAbort;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  Json j;
  if (auto e = parse_json_body(body, &j)) return e;
  Reader r(j, "");
  std::string m;
  if (r.get_string("mode", &m)) {
    if (m == "abort") *mode = PauseMode::kAbort;
    else if (m == "retract") *mode = PauseMode::kRetract;
    else if (m == "in_place") *mode = PauseMode::kInPlace;
    else r.fail("'mode' must be abort, retract or in_place, got '" + m + "'", "mode");
  }
  r.reject_unknown();
  return r.err;
}

std::optional<ApiError> parse_profile_request(const std::string& body, ProfileOptions* out) {
  *out = ProfileOptions{};
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  Json j;
  if (auto e = parse_json_body(body, &j)) return e;
  Reader r(j, "");
  r.get_string("output_dir", &out->output_dir);
  r.get_int("num_steps", 1, 1000000000, &out->num_steps);
  if (const Json* a = r.find("activities")) {
    if (!a->is_array()) {
      r.fail("'activities' must be a list of strings", "activities");
    } else {
      for (const Json& x : *a) {
        if (!x.is_string()) {
          r.fail("'activities' must be a list of strings", "activities");
          break;
        }
        out->activities.push_back(x.get<std::string>());
      }
    }
  }
  // SGLang's torch-profiler switches: a step span has no stacks, shapes or stages to add.
  for (const char* k : {"with_stack", "record_shapes", "profile_by_stage", "merge_profiles"}) {
    bool ignored = false;
    r.get_bool(k, &ignored);
  }
  r.unsupported("start_step", "profiling starts with the next step");
  r.reject_unknown();
  return r.err;
}

std::optional<ApiError> parse_update_weights_request(const std::string& body, UpdateWeightsRequest* out) {
  *out = UpdateWeightsRequest{};
  Json j;
  if (auto e = parse_json_body(body, &j)) return e;
  Reader r(j, "");
  if (!r.get_string("model_path", &out->model_path) && !r.err) r.fail("'model_path' (a string) is required", "model_path");
  if (!r.err && out->model_path.empty()) r.fail("'model_path' must not be empty", "model_path");
  std::string load_format = "auto";
  r.get_string("load_format", &load_format);
  if (!r.err && load_format != "auto")
    r.fail("'load_format' " + load_format + ": only auto (safetensors) is supported", "load_format");
  r.get_bool("flush_cache", &out->flush_cache);
  r.get_bool("abort_all_requests", &out->abort_all_requests);
  r.get_string("weight_version", &out->weight_version);
  bool ignored = false;
  r.get_bool("recapture_cuda_graph", &ignored);
  r.get_bool("torch_empty_cache", &ignored);
  int64_t step = 0;
  r.get_int("token_step", 0, INT64_MAX, &step);
  r.unsupported("is_async", "the update answers when it is done");
  r.get_bool("keep_pause", &out->keep_pause);
  r.reject_unknown();
  return r.err;
}

}  // namespace ds
