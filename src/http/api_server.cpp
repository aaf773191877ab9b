// ApiServer (see api_server.h): routing, authentication, the generation job state machine shared by
// /generate, /v1/completions and /v1/chat/completions, and the small informational endpoints.
#include "http/api_server.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <condition_variable>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "core/env.h"
#include "core/logging.h"
#include "core/worker_pool.h"
#include "http/api_request.h"
#include "http/text_endpoints.h"
#include "text/chat_format.h"
#include "text/chat_output_parser.h"
#include "text/detokenizer.h"
#include "http/grammar_cache.h"
#include "http/responses_api.h"
#include "text/tool_call_grammar.h"

namespace ds {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() != b.size() ? 1 : 0;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Json nullable_logprob(float lp) { return std::isfinite(lp) ? Json(lp) : Json(nullptr); }

// A hidden row as JSON numbers: each float's shortest decimal (a float widened to double would print 17 digits of
// noise: 0.1f as 0.10000000149011612), non-finite values as null.
Json hidden_json(const std::vector<float>& row) {
  Json a = Json::array();
  char buf[32];
  for (float v : row) {
    if (!std::isfinite(v)) {
      a.push_back(nullptr);
      continue;
    }
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    *r.ptr = '\0';
    a.push_back(std::strtod(buf, nullptr));
  }
  return a;
}
static_assert(std::endian::native == std::endian::little, "routed_experts is sent as little-endian int32 bytes");

// Standard base64 (RFC 4648, padded) of bytes: SGLang's meta_info.routed_experts carries its int32 array so.
std::string base64(const void* data, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t{b[i]} << 16 | (i + 1 < n ? uint32_t{b[i + 1]} << 8 : 0u) | (i + 2 < n ? b[i + 2] : 0u);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < n ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

Json hidden_json(const std::vector<std::vector<float>>& rows) {
  Json a = Json::array();
  for (const auto& row : rows) a.push_back(hidden_json(row));
  return a;
}

ApiError make_error(int status, std::string message, std::string type, std::string code = "") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

enum class ApiKind { kGenerate, kCompletion, kChat, kScore, kResponses };

}  // namespace

struct ResponsesCtx;

struct ApiServer::Impl : std::enable_shared_from_this<ApiServer::Impl> {
  ApiServerOptions opt;
  std::atomic<bool> is_ready{false};
  std::atomic<bool> shutting_down{false};
  Engine* engine = nullptr;
  const Tokenizer* tok = nullptr;
  std::unique_ptr<GrammarCache> grammars;  // constrained decoding (with a tokenizer)
  // Constraint compiles (a large schema takes up to ~1 s): off the I/O threads, each connection's request resumed on
  // its strand when its constraints are ready.
  std::unique_ptr<WorkerPool> compile_pool;
  std::optional<ChatTemplateInfo> chat;
  std::string chat_error;  // why `chat` is absent
  std::optional<ReasoningFormat> reasoning;
  std::optional<ToolCallFormat> tool_format;
  std::set<int32_t> eos_ids;
  ServerMetrics metrics;
  ResponseStore responses;  // /v1/responses with store (the default), for previous_response_id and GET
  SessionStore sessions;    // /open_session, /close_session, /generate's session_params
  // /update_weights_from_disk runs here (it takes as long as loading a checkpoint), one at a time, off the I/O threads.
  std::unique_ptr<WorkerPool> admin_pool = std::make_unique<WorkerPool>(1, 4);
  // Admin jobs inside the engine (ApiServer::wait_admin_idle); a job starts only while not shutting down.
  std::mutex admin_mu;
  std::condition_variable admin_cv;
  int admin_active = 0;
  bool admin_enter() {
    std::lock_guard<std::mutex> lock(admin_mu);
    if (shutting_down) return false;
    ++admin_active;
    return true;
  }
  void admin_leave() {
    std::lock_guard<std::mutex> lock(admin_mu);
    --admin_active;
    admin_cv.notify_all();
  }
  mutable std::mutex weight_version_mu;
  std::string weight_version_ = "default";  // SGLang's weight_version (set by a weight update)
  std::string weight_version() const {
    std::lock_guard<std::mutex> lock(weight_version_mu);
    return weight_version_;
  }
  std::atomic<uint64_t> seed_counter{0};
  int64_t created_time = static_cast<int64_t>(std::time(nullptr));

  void send_json(HttpResponder& out, const std::string& route, int status, const Json& j,
                 const HttpHeaders& extra = {}) {
    metrics.on_http_request(route, status);
    out.respond(status, "application/json", dump_json(j), extra);
  }
  void send_error(HttpResponder& out, const std::string& route, const ApiError& e) {
    HttpHeaders extra;
    if (e.status == 401) extra.emplace_back("WWW-Authenticate", "Bearer");
    if (e.status == 503) extra.emplace_back("Retry-After", "1");  // overloaded, loading or draining: retry soon
    send_json(out, route, e.status, error_json(e), extra);
  }
  void send_text(HttpResponder& out, const std::string& route, int status, std::string body,
                 std::string_view type = "text/plain; charset=utf-8") {
    metrics.on_http_request(route, status);
    out.respond(status, type, std::move(body));
  }

  std::string token_text(int32_t id) const {
    if (!tok) return "";
    return tok->decode(std::span<const int32_t>(&id, 1), false);
  }
  uint64_t next_seed() { return splitmix64(opt.seed ^ splitmix64(++seed_counter)); }
  bool model_name_ok(const std::string& name) const {
    return name.empty() || name == opt.served_model_name || name == opt.model_path;
  }
  ApiError model_not_found(const std::string& name) const {
    ApiError e = make_error(404, "The model '" + name + "' does not exist; this server serves '" +
                                     opt.served_model_name + "'",
                            "invalid_request_error", "model_not_found");
    e.param = "model";
    return e;
  }

  // Route handlers.
  void handle_generate(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route);
  void handle_completion(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route);
  void handle_chat(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route);
  void handle_responses(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route);
  // A chat request, answered as a chat completion, or as a Responses API response when `resp` is set. `body_text`:
  // the request body (tool and response_format schemas are read again from it in their property order).
  void run_chat(ChatRequest c, const std::string& body_text, std::shared_ptr<HttpResponder> out,
                const std::string& route, std::shared_ptr<ResponsesCtx> resp);
  void handle_score(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route);
  void handle_health(std::shared_ptr<HttpResponder> out, const std::string& route);
  void handle_tokenize(HttpRequest& req, HttpResponder& out, const std::string& route);
  void handle_detokenize(HttpRequest& req, HttpResponder& out, const std::string& route);
  Json models_entry() const;
  Json server_info() const;
};

namespace {

std::string format_seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(ms) / 1000.0);
  return buf;
}

// One generated sequence of a job (a prompt x one of its n samples).
struct Seq {
  std::string rid;
  int32_t prompt_index = 0;
  bool first_of_prompt = true;  // counts the prompt in usage (n > 1 shares it)
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;  // echo
  SamplingSpec sampling;
  std::shared_ptr<const TokenFsm> grammar;  // regex / json_schema, compiled
  std::vector<int32_t> token_ids_logprob;   // /generate's: these ids' logprobs at every reported position
  // A constraint not compiled yet: compiled on the server's worker pool before the sequence is submitted.
  struct PendingGrammar {
    std::string kind, text, param;
  };
  std::optional<PendingGrammar> grammar_pending;
  std::optional<Detokenizer> detok;
  std::vector<int32_t> output_ids;
  std::vector<TokenLogprob> out_lp;
  std::vector<TokenLogprob> in_lp;
  std::string text;          // final text so far
  size_t text_sent = 0;      // bytes of `text` already streamed (OpenAI deltas)
  size_t lp_sent = 0;        // out_lp entries already streamed
  size_t ids_sent = 0;       // output_ids already streamed (--stream-interval counts from here)
  std::optional<int32_t> deferred;  // a possible stop token not decoded yet (trimmed if it ends the request)
  bool submitted = false;
  bool finished = false;
  bool string_stop = false;
  std::string matched_stop;
  FinishReason reason;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t spec_verify_ct = -1;  // speculative decoding's verify steps (-1: off)
  int32_t spec_accepted = 0;
  int32_t spec_proposed = 0;
  std::vector<int32_t> spec_histogram;
  // return_hidden_states: SGLang's meta_info.hidden_states so far ([prompt rows] first, then a row a fed output
  // token), and how many entries went out in incremental stream chunks.
  Json hidden = Json::array();
  size_t hidden_sent = 0;
  std::vector<int32_t> routed_experts;  // return_routed_experts: the final event's picks (SGLang's, before base64)
  bool got_token = false;
  Clock::time_point last_token;
  std::optional<ChatOutputParser> chat_parser;
  bool had_tool_calls = false;
  int tool_call_count = 0;
};

}  // namespace

// One /v1/responses request in flight: its parsed form, the conversation it continues (input side), its ids and, while
// it runs, its output items.
struct ResponsesCtx {
  ResponsesRequest req;
  Json conversation = Json::array();
  std::string id;
  int64_t created = 0;
  std::unique_ptr<ResponseItems> items;
  uint64_t seq = 0;  // the events' sequence_number
};

namespace {

class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(std::shared_ptr<ApiServer::Impl> srv, ApiKind kind, std::shared_ptr<HttpResponder> out, std::string route)
      : kind_(kind), srv_(std::move(srv)), out_(std::move(out)), route_(std::move(route)), t0_(Clock::now()) {}
  // A session request refused before it reached the engine (a check, its submit or its constraint failed) is not
  // kept: the one place that forgets it.
  ~Job() {
    if (!session_id.empty() && (seqs.empty() || !seqs[0].submitted)) srv_->sessions.cancel(session_id, session_rid);
  }

  const ApiKind kind_;
  std::vector<Seq> seqs;
  bool stream = false;
  bool list_response = false;  // /generate: a batch (or n > 1) answers with a list
  // logprobs
  bool return_logprob = false;
  int32_t logprob_start_len = -1;
  int32_t top_logprobs_num = 0;
  bool return_text_in_logprobs = false;
  bool return_hidden_states = false;
  bool return_routed_experts = false;
  bool echo = false;
  bool include_usage = false;
  bool continuous_usage = false;
  // chat
  bool chat_thinking = false;
  bool chat_tools = false;
  bool chat_reasoning = false;
  // /v1/score: each sequence's first output position gives its labels' logprobs (its token_ids_logprob)
  bool score_softmax = false;
  std::shared_ptr<ResponsesCtx> responses;  // /v1/responses (kind kResponses)
  std::string session_id;  // /generate with session_params: the session its one sequence is recorded in, as
  std::string session_rid;  // this request
  std::string id;
  std::string model;
  int64_t created = static_cast<int64_t>(std::time(nullptr));

  // Compiles the sequences' pending constraints (on the server's worker pool), then submits them.
  void start();

 private:
  void submit_all();
  void on_grammar(const std::string& key, Result<std::shared_ptr<const TokenFsm>> fsm);
  Engine& engine() { return *srv_->engine; }
  void on_event(size_t i, EngineEvent ev);
  void on_disconnect();
  void on_timeout();
  void feed(Seq& s, int32_t tok);
  bool is_stop_token(const Seq& s, int32_t tok) const;
  void absorb(Seq& s, EngineEvent& ev);
  void finish_seq(Seq& s, const EngineEvent& ev);
  void stream_update(size_t i, bool finished_now);
  void complete();
  void log_finished() const;
  void sse(const Json& j) { out_->stream_write("data: " + dump_json(j) + "\n\n"); }

  Json finish_reason_generate(const Seq& s) const;
  std::string finish_reason_openai(const Seq& s) const;
  Json matched_stop(const Seq& s) const;
  // An OpenAI choice's hidden_states (SGLang's): the last entry (the last fed token's row), or [] when only the
  // prompt's entry exists.
  static Json last_hidden(const Seq& s) { return s.hidden.size() > 1 ? s.hidden.back() : Json::array(); }
  Json generate_object(size_t i) const;
  // (logprob, id, text) tuples of positions [from, to): each position's own token (kToken), or a list per position
  // of its top alternatives (kTop) or of its token_ids_logprob ids (kIds).
  enum class LpPart { kToken, kTop, kIds };
  Json lp_tuples(const std::vector<TokenLogprob>& lps, size_t from, size_t to, LpPart part) const;
  Json completion_logprobs(const Seq& s, size_t from, size_t to, bool with_prompt, size_t* text_offset) const;
  Json chat_logprobs(const Seq& s, size_t from, size_t to) const;
  Json usage() const;
  Json score_body() const;
  ChatDelta take_chat_delta(Seq& s, bool finished_now);
  static ChatMessageOut chat_message(Seq& s);
  void responses_event(const char* type, Json payload);
  Json responses_body(const Json& output, const char* status) const;
  Json chunk_base(const char* object) const;

  std::shared_ptr<ApiServer::Impl> srv_;
  std::shared_ptr<HttpResponder> out_;
  std::string route_;
  Clock::time_point t0_;
  size_t remaining_ = 0;
  bool responded_ = false;
  bool client_gone_ = false;
  bool timed_out_ = false;  // --request-timeout fired: aborted sequences finish with an error
  size_t grammars_left_ = 0;  // distinct constraints still compiling
  std::optional<ApiError> grammar_error_;
  std::vector<size_t> completion_offsets_;  // per seq: text_offset for streamed completion logprobs
};

bool Job::is_stop_token(const Seq& s, int32_t tok) const {
  for (int32_t id : s.sampling.engine.stop_token_ids)
    if (id == tok) return true;
  return !s.sampling.engine.ignore_eos && srv_->eos_ids.count(tok) > 0;
}

void Job::feed(Seq& s, int32_t tok) {
  s.text += s.detok->push(tok);
  if (s.detok->stopped() && !s.string_stop) {
    s.string_stop = true;
    s.matched_stop = s.detok->stop_string();
    if (s.sampling.text.no_stop_trim) s.text += s.matched_stop;
    engine().finish_with_stop(s.rid, s.matched_stop);
  }
}

void Job::absorb(Seq& s, EngineEvent& ev) {
  const size_t n = ev.new_tokens.size();
  for (size_t k = 0; k < n && !s.string_stop; ++k) {
    const int32_t tok = ev.new_tokens[k];
    s.output_ids.push_back(tok);
    if (k < ev.output_logprobs.size()) s.out_lp.push_back(std::move(ev.output_logprobs[k]));
    if (!s.detok) continue;
    if (s.deferred) {
      const int32_t d = *s.deferred;
      s.deferred.reset();
      feed(s, d);
      if (s.string_stop) break;
    }
    const bool candidate = is_stop_token(s, tok) &&
                           static_cast<int32_t>(s.output_ids.size()) >= s.sampling.engine.min_new_tokens;
    if (k + 1 == n && candidate) {
      if (!ev.finished) {
        s.deferred = tok;  // decoded only if the request goes on
      } else {
        const bool ends_here = ev.reason.kind == FinishReason::Kind::kStop && ev.reason.matched_token == tok;
        if (!ends_here || s.sampling.text.no_stop_trim) feed(s, tok);
      }
    } else {
      feed(s, tok);
    }
  }
  // Keep the logprob list aligned with the kept ids.
  if (s.out_lp.size() > s.output_ids.size()) s.out_lp.resize(s.output_ids.size());
}

void Job::finish_seq(Seq& s, const EngineEvent& ev) {
  if (s.detok && s.deferred) {
    const int32_t d = *s.deferred;
    s.deferred.reset();
    const bool ends_here = ev.reason.kind == FinishReason::Kind::kStop && ev.reason.matched_token == d;
    if (!ends_here || s.sampling.text.no_stop_trim) feed(s, d);
  }
  if (s.detok && !s.string_stop) s.text += s.detok->finish();
  s.reason = ev.reason;
  if (timed_out_ && ev.error.empty() && ev.reason.kind == FinishReason::Kind::kAbort && !s.string_stop)
    s.error = "request timed out after " + format_seconds(srv_->opt.request_timeout_ms) + " s (--request-timeout)";
  if (!s.error.empty()) {
    s.reason.kind = FinishReason::Kind::kAbort;
    s.reason.matched_text = s.error;
  } else if (!ev.error.empty()) {
    s.error = ev.error;
    s.reason.kind = FinishReason::Kind::kAbort;
    s.reason.matched_text = ev.error;
  }
  if (s.string_stop) {
    s.reason.kind = FinishReason::Kind::kStop;
    s.reason.matched_token = -1;
    s.reason.matched_text = s.matched_stop;
  }
  s.finished = true;
  // A session keeps the ids generated (SGLang: at most max_new_tokens of them; a stop token included).
  if (!session_id.empty()) {
    std::vector<int32_t> out = s.output_ids;
    if (static_cast<int32_t>(out.size()) > s.sampling.engine.max_new_tokens)
      out.resize(static_cast<size_t>(s.sampling.engine.max_new_tokens));
    srv_->sessions.finish(session_id, s.rid, std::move(out));
  }
  srv_->metrics.add_running(-1);
  srv_->metrics.on_request_finished(finish_kind_name(s.reason.kind), s.first_of_prompt ? s.prompt_tokens : 0,
                                    static_cast<int64_t>(s.output_ids.size()), s.first_of_prompt ? s.cached_tokens : 0,
                                    seconds_since(t0_));
}

void Job::start() {
  auto self = shared_from_this();
  out_->set_on_disconnect([weak = std::weak_ptr<Job>(self)] {
    if (auto job = weak.lock()) job->on_disconnect();
  });
  // --request-timeout counts from here, constraint compiles included.
  if (srv_->opt.request_timeout_ms > 0) {
    out_->post_after(std::chrono::milliseconds(srv_->opt.request_timeout_ms), [weak = std::weak_ptr<Job>(self)] {
      if (auto job = weak.lock()) job->on_timeout();
    });
  }
  std::set<std::string> keys;  // n > 1 samples share a constraint: compiled once
  std::vector<const Seq::PendingGrammar*> todo;
  for (const Seq& s : seqs)
    if (s.grammar_pending && keys.insert(GrammarCache::key(s.grammar_pending->kind, s.grammar_pending->text)).second)
      todo.push_back(&*s.grammar_pending);
  if (todo.empty()) return submit_all();
  grammars_left_ = todo.size();
  for (const Seq::PendingGrammar* g : todo) {
    std::string key = GrammarCache::key(g->kind, g->text);
    GrammarCache* cache = srv_->grammars.get();  // alive while this job (which owns the server's state) is
    const bool queued = srv_->compile_pool->post([self, cache, kind = g->kind, text = g->text, key] {
      // DSERVE_TEST_COMPILE_DELAY_MS (tests only): every compile takes this much longer, so a test can watch the I/O
      // thread serve others meanwhile.
      static const int64_t delay_ms = std::clamp<int64_t>(env_int("DSERVE_TEST_COMPILE_DELAY_MS", 0), 0, 60000);
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      auto fsm = cache->get(kind, text);
      self->out_->post([self, key, fsm = std::move(fsm)]() mutable { self->on_grammar(key, std::move(fsm)); });
    });
    if (!queued) {
      grammars_left_ = 0;  // the compiles already queued find the job answered
      responded_ = true;
      return srv_->send_error(*out_, route_, make_error(503, "too many constraints (regex, json_schema, ebnf, structural_tag, tool_choice) "
                                                            "are waiting to compile; retry", "server_error"));
    }
  }
}

// On the connection's strand, once for each distinct constraint.
void Job::on_grammar(const std::string& key, Result<std::shared_ptr<const TokenFsm>> fsm) {
  if (responded_ || grammars_left_ == 0) return;
  for (Seq& s : seqs) {
    if (!s.grammar_pending || GrammarCache::key(s.grammar_pending->kind, s.grammar_pending->text) != key) continue;
    if (!fsm) {
      if (!grammar_error_) grammar_error_ = bad_request(s.grammar_pending->param + ": " + fsm.status().message(),
                                                        s.grammar_pending->param);
    } else {
      s.grammar = *fsm;
    }
    s.grammar_pending.reset();
  }
  if (--grammars_left_ > 0) return;
  if (client_gone_) return;  // nothing submitted yet: nothing to abort
  if (grammar_error_) {
    responded_ = true;
    return srv_->send_error(*out_, route_, *grammar_error_);
  }
  submit_all();
}

void Job::submit_all() {
  auto self = shared_from_this();
  remaining_ = seqs.size();
  completion_offsets_.assign(seqs.size(), 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs[i];
    EngineRequest req;
    req.rid = s.rid;
    req.input_ids = s.prompt_ids;
    req.sampling = s.sampling.engine;
    req.return_logprob = return_logprob;
    req.logprob_start_len = logprob_start_len;
    req.top_logprobs_num = top_logprobs_num;
    req.token_ids_logprob = s.token_ids_logprob;
    req.grammar = s.grammar;
    req.return_hidden_states = return_hidden_states;
    req.return_routed_experts = return_routed_experts;
    std::shared_ptr<HttpResponder> out = out_;
    Status st = engine().submit(std::move(req), [self, i, out](EngineEvent ev) {
      out->post([self, i, ev = std::move(ev)]() mutable { self->on_event(i, std::move(ev)); });
    });
    if (!st) {
      for (size_t j = 0; j < i; ++j) engine().abort(seqs[j].rid);
      responded_ = true;
      ApiError e = bad_request(st.message());
      if (st.message().find("context") != std::string::npos) e.code = "context_length_exceeded";
      srv_->send_error(*out_, route_, e);
      return;
    }
    s.submitted = true;
    srv_->metrics.add_running(1);
  }
  if (!stream) return;
  srv_->metrics.on_http_request(route_, 200);
  out_->start_stream(200, "text/event-stream");
  if (kind_ == ApiKind::kResponses) {
    Json r = responses_body(Json::array(), "in_progress");
    responses_event("response.created", Json{{"response", r}});
    responses_event("response.in_progress", Json{{"response", r}});
    responses->items = std::make_unique<ResponseItems>(
        [this](const char* type, Json payload) { responses_event(type, std::move(payload)); });
  } else if (kind_ == ApiKind::kChat) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      Json c = chunk_base("chat.completion.chunk");
      Json choice = Json::object();
      choice["index"] = i;
      choice["delta"] = Json{{"role", "assistant"}, {"content", ""}};
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = nullptr;
      c["choices"] = Json::array({choice});
      if (include_usage) c["usage"] = nullptr;
      sse(c);
    }
  } else if (kind_ == ApiKind::kCompletion && echo) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      Json c = chunk_base("text_completion");
      Json choice = Json::object();
      choice["index"] = i;
      choice["text"] = seqs[i].prompt_text;
      choice["logprobs"] = nullptr;
      choice["finish_reason"] = nullptr;
      c["choices"] = Json::array({choice});
      if (include_usage) c["usage"] = nullptr;
      sse(c);
      completion_offsets_[i] = seqs[i].prompt_text.size();
    }
  }
}

void Job::on_timeout() {
  if (client_gone_) return;
  if (grammars_left_ > 0 && !responded_) {  // still compiling its constraints: nothing submitted, answered here
    grammars_left_ = 0;                     // the compiles still running find the job answered
    responded_ = true;
    return srv_->send_error(*out_, route_,
                            make_error(500, "request timed out after " + format_seconds(srv_->opt.request_timeout_ms) +
                                                " s (--request-timeout) while its constraints compiled",
                                       "server_error"));
  }
  // Only sequences still in the engine are aborted; finish_seq turns their abort into the timeout error.
  if (remaining_ == 0) return;
  timed_out_ = true;
  for (Seq& s : seqs)
    if (s.submitted && !s.finished) engine().abort(s.rid);
}

void Job::on_disconnect() {
  client_gone_ = true;
  for (Seq& s : seqs)
    if (s.submitted && !s.finished) engine().abort(s.rid);
}

void Job::on_event(size_t i, EngineEvent ev) {
  Seq& s = seqs[i];
  if (s.finished) return;
  const size_t kept_before = s.output_ids.size();
  if (!ev.input_logprobs.empty())
    for (auto& lp : ev.input_logprobs) s.in_lp.push_back(std::move(lp));
  if (ev.prompt_tokens > 0) s.prompt_tokens = ev.prompt_tokens;
  if (!ev.hidden_prompt.empty()) s.hidden.push_back(hidden_json(ev.hidden_prompt));
  for (const auto& row : ev.hidden_output) s.hidden.push_back(hidden_json(row));
  if (!ev.routed_experts.empty()) s.routed_experts = std::move(ev.routed_experts);
  s.cached_tokens = std::max(s.cached_tokens, ev.cached_tokens);
  if (ev.spec_verify_ct >= 0) {
    s.spec_verify_ct = ev.spec_verify_ct;
    s.spec_accepted = ev.spec_accepted_drafts;
    s.spec_proposed = ev.spec_proposed_drafts;
    s.spec_histogram = std::move(ev.spec_accept_histogram);
  }
  absorb(s, ev);
  const size_t kept = s.output_ids.size() - kept_before;
  if (kept > 0) {
    const auto now = Clock::now();
    if (!s.got_token) {
      srv_->metrics.observe_ttft(std::chrono::duration<double>(now - t0_).count());
    } else {
      const double dt = std::chrono::duration<double>(now - s.last_token).count() / static_cast<double>(kept);
      for (size_t k = 0; k < kept; ++k) srv_->metrics.observe_itl(dt);
    }
    s.got_token = true;
    s.last_token = now;
  }
  if (ev.finished) {
    finish_seq(s, ev);
    --remaining_;
  }
  if (responded_ || client_gone_) {
    // Nothing more to send (an error went out, or the client left: its responder is already released).
    if (remaining_ == 0 && !responded_) {
      responded_ = true;
      if (!stream) srv_->metrics.on_http_request(route_, 499);  // nginx's "client closed request"
    }
    return;
  }
  // A chunk for the first token, then every --stream-interval tokens, and at the end (SGLang's stream_output).
  if (stream && (ev.finished || (kept > 0 && (s.ids_sent == 0 || s.output_ids.size() - s.ids_sent >=
                                                                    static_cast<size_t>(srv_->opt.stream_interval)))))
    stream_update(i, ev.finished);
  if (remaining_ == 0) complete();
}

Json Job::chunk_base(const char* object) const {
  Json c = Json::object();
  c["id"] = id;
  c["object"] = object;
  c["created"] = created;
  c["model"] = model;
  return c;
}

Json Job::finish_reason_generate(const Seq& s) const {
  if (!s.finished) return nullptr;
  Json fr = Json::object();
  fr["type"] = finish_kind_name(s.reason.kind);
  switch (s.reason.kind) {
    case FinishReason::Kind::kStop:
      if (s.reason.matched_token >= 0) fr["matched"] = s.reason.matched_token;
      else if (!s.reason.matched_text.empty()) fr["matched"] = s.reason.matched_text;
      else fr["matched"] = nullptr;
      break;
    case FinishReason::Kind::kLength:
      fr["length"] = s.sampling.engine.max_new_tokens;
      break;
    case FinishReason::Kind::kAbort:
      fr["message"] = s.reason.matched_text.empty() ? "aborted" : s.reason.matched_text;
      break;
  }
  return fr;
}

std::string Job::finish_reason_openai(const Seq& s) const {
  if (kind_ == ApiKind::kChat && s.had_tool_calls && s.reason.kind == FinishReason::Kind::kStop) return "tool_calls";
  return finish_kind_name(s.reason.kind);
}

Json Job::matched_stop(const Seq& s) const {
  if (!s.finished || s.reason.kind != FinishReason::Kind::kStop) return nullptr;
  if (s.reason.matched_token >= 0) return s.reason.matched_token;
  if (!s.reason.matched_text.empty()) return s.reason.matched_text;
  return nullptr;
}

Json Job::lp_tuples(const std::vector<TokenLogprob>& lps, size_t from, size_t to, LpPart part) const {
  Json arr = Json::array();
  auto text_of = [&](int32_t id) -> Json {
    if (!return_text_in_logprobs || !srv_->tok) return nullptr;
    return srv_->token_text(id);
  };
  for (size_t k = from; k < to && k < lps.size(); ++k) {
    const TokenLogprob& lp = lps[k];
    if (part == LpPart::kToken) {
      arr.push_back(Json::array({nullable_logprob(lp.logprob), lp.id, text_of(lp.id)}));
    } else {
      Json alts = Json::array();
      for (const auto& [v, id] : part == LpPart::kTop ? lp.top : lp.ids)
        alts.push_back(Json::array({nullable_logprob(v), id, text_of(id)}));
      arr.push_back(std::move(alts));
    }
  }
  return arr;
}

Json Job::generate_object(size_t i) const {
  const Seq& s = seqs[i];
  Json o = Json::object();
  o["text"] = s.text;
  o["output_ids"] = s.output_ids;
  Json m = Json::object();
  m["id"] = s.rid;
  m["finish_reason"] = finish_reason_generate(s);
  m["prompt_tokens"] = s.prompt_tokens > 0 ? s.prompt_tokens : static_cast<int32_t>(s.prompt_ids.size());
  m["completion_tokens"] = s.output_ids.size();
  m["cached_tokens"] = s.cached_tokens;
  m["e2e_latency"] = seconds_since(t0_);
  m["weight_version"] = srv_->weight_version();
  if (s.spec_verify_ct >= 0) {  // SGLang's speculative fields: accept length = completion tokens per verify step
    m["spec_verify_ct"] = s.spec_verify_ct;
    const double n = static_cast<double>(s.output_ids.size());
    m["spec_accept_length"] = s.spec_verify_ct > 0 ? n / s.spec_verify_ct : 0.0;
    m["spec_accepted_drafts"] = s.spec_accepted;
    m["spec_proposed_drafts"] = s.spec_proposed;
    m["spec_accept_token_num"] = s.spec_accepted;  // the older names of the two
    m["spec_draft_token_num"] = s.spec_proposed;
    m["spec_accept_rate"] = s.spec_proposed > 0 ? static_cast<double>(s.spec_accepted) / s.spec_proposed : 0.0;
    m["spec_accept_histogram"] = s.spec_histogram;
  }
  if (return_logprob) {
    m["input_token_logprobs"] = lp_tuples(s.in_lp, 0, s.in_lp.size(), LpPart::kToken);
    m["output_token_logprobs"] = lp_tuples(s.out_lp, 0, s.out_lp.size(), LpPart::kToken);
    m["input_top_logprobs"] =
        top_logprobs_num > 0 ? lp_tuples(s.in_lp, 0, s.in_lp.size(), LpPart::kTop) : Json::array();
    m["output_top_logprobs"] =
        top_logprobs_num > 0 ? lp_tuples(s.out_lp, 0, s.out_lp.size(), LpPart::kTop) : Json::array();
    if (!s.token_ids_logprob.empty()) {  // (SGLang: only where the request gave ids)
      m["input_token_ids_logprobs"] = lp_tuples(s.in_lp, 0, s.in_lp.size(), LpPart::kIds);
      m["output_token_ids_logprobs"] = lp_tuples(s.out_lp, 0, s.out_lp.size(), LpPart::kIds);
    }
  }
  if (return_hidden_states) m["hidden_states"] = s.hidden;
  // SGLang's routed_experts: base64 of the little-endian int32 [prompt + output - 1, layers, top_k] array, once done.
  if (return_routed_experts && s.finished)
    m["routed_experts"] = base64(s.routed_experts.data(), s.routed_experts.size() * sizeof(int32_t));
  if (!s.error.empty()) m["error"] = s.error;
  o["meta_info"] = std::move(m);
  if (stream && seqs.size() > 1) o["index"] = i;
  return o;
}

Json Job::completion_logprobs(const Seq& s, size_t from, size_t to, bool with_prompt, size_t* text_offset) const {
  Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array(), offsets = Json::array();
  auto add = [&](const TokenLogprob& lp) {
    const std::string t = srv_->token_text(lp.id);
    tokens.push_back(t);
    token_lps.push_back(nullable_logprob(lp.logprob));
    if (top_logprobs_num > 0) {
      Json alts = Json::object();
      for (const auto& [v, id] : lp.top) alts[srv_->token_text(id)] = nullable_logprob(v);
      tops.push_back(std::move(alts));
    } else {
      tops.push_back(nullptr);
    }
    offsets.push_back(*text_offset);
    *text_offset += t.size();
  };
  if (with_prompt)
    for (const auto& lp : s.in_lp) add(lp);
  for (size_t k = from; k < to && k < s.out_lp.size(); ++k) add(s.out_lp[k]);
  return Json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json Job::chat_logprobs(const Seq& s, size_t from, size_t to) const {
  auto bytes_of = [&](int32_t id) {
    Json b = Json::array();
    if (srv_->tok)
      for (unsigned char c : srv_->tok->token_bytes(id)) b.push_back(static_cast<int>(c));
    return b;
  };
  Json content = Json::array();
  for (size_t k = from; k < to && k < s.out_lp.size(); ++k) {
    const TokenLogprob& lp = s.out_lp[k];
    Json e = Json::object();
    e["token"] = srv_->token_text(lp.id);
    e["logprob"] = nullable_logprob(lp.logprob);
    e["bytes"] = bytes_of(lp.id);
    Json alts = Json::array();
    for (const auto& [v, id] : lp.top)
      alts.push_back(Json{{"token", srv_->token_text(id)}, {"logprob", nullable_logprob(v)}, {"bytes", bytes_of(id)}});
    e["top_logprobs"] = std::move(alts);
    content.push_back(std::move(e));
  }
  return Json{{"content", content}};
}

Json Job::usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (const Seq& s : seqs) {
    if (s.first_of_prompt) {
      prompt += s.prompt_tokens > 0 ? s.prompt_tokens : static_cast<int64_t>(s.prompt_ids.size());
      cached += s.cached_tokens;
    }
    completion += static_cast<int64_t>(s.output_ids.size());
  }
  Json u = Json::object();
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  u["prompt_tokens_details"] = Json{{"cached_tokens", cached}};
  return u;
}

// A finished sequence's whole text through its chat output parser (content alone without one).
ChatMessageOut Job::chat_message(Seq& s) {
  ChatMessageOut msg;
  if (!s.chat_parser) {
    msg.content = s.text;
    return msg;
  }
  s.chat_parser->feed(s.text);
  s.chat_parser->finish();
  return s.chat_parser->message();
}

// The chat output parser's delta for the text since the last update (all of it, the parser's tail too, at the end).
ChatDelta Job::take_chat_delta(Seq& s, bool finished_now) {
  ChatDelta d;
  const std::string piece = s.text.substr(s.text_sent);
  s.text_sent = s.text.size();
  if (!s.chat_parser) {
    d.content = piece;
    return d;
  }
  d = s.chat_parser->feed(piece);
  if (finished_now) {
    ChatDelta f = s.chat_parser->finish();
    d.reasoning += f.reasoning;
    d.content += f.content;
    for (auto& t : f.tool_calls) d.tool_calls.push_back(std::move(t));
  }
  return d;
}

// A Responses API stream event: `event:` line and data with its type and sequence number.
void Job::responses_event(const char* type, Json payload) {
  Json e = Json::object();
  e["type"] = type;
  e["sequence_number"] = responses->seq++;
  for (auto it = payload.begin(); it != payload.end(); ++it) e[it.key()] = it.value();
  out_->stream_write(std::string("event: ") + type + "\ndata: " + dump_json(e) + "\n\n");
}

Json Job::responses_body(const Json& output, const char* status) const {
  const bool done = std::string_view(status) != "in_progress";
  return response_object(responses->id, responses->created, model, status, output,
                         done ? responses_usage(usage(), 0) : Json(nullptr), responses->req);
}

// SGLang's ScoringResponse: one list of label probabilities per item, in label order.
Json Job::score_body() const {
  Json scores = Json::array();
  for (const Seq& s : seqs) {
    std::vector<double> lps(s.token_ids_logprob.size(), -std::numeric_limits<double>::infinity());
    if (!s.out_lp.empty()) {
      const auto& got = s.out_lp[0].ids;  // (logprob, id) in the asked order
      for (size_t k = 0; k < lps.size() && k < got.size(); ++k)
        if (got[k].second == s.token_ids_logprob[k]) lps[k] = got[k].first;
    }
    scores.push_back(label_scores(lps, score_softmax));
  }
  Json body = Json::object();
  body["scores"] = std::move(scores);
  body["model"] = model;
  body["usage"] = usage();
  body["object"] = "scoring";
  return body;
}

void Job::stream_update(size_t i, bool finished_now) {
  Seq& s = seqs[i];
  if (finished_now && !s.error.empty()) {
    ApiError e = make_error(500, s.error, "server_error");
    if (kind_ == ApiKind::kResponses)
      responses_event("error", Json{{"code", "server_error"}, {"message", s.error}, {"param", nullptr}});
    else
      sse(error_json(e));
  }
  switch (kind_) {
    case ApiKind::kGenerate: {
      Json o = generate_object(i);
      if (srv_->opt.incremental_streaming_output) {  // only what is new since the previous chunk
        o["text"] = s.text.substr(s.text_sent);
        o["output_ids"] = std::vector<int32_t>(s.output_ids.begin() + static_cast<std::ptrdiff_t>(s.ids_sent),
                                               s.output_ids.end());
        s.text_sent = s.text.size();
        if (return_logprob) {  // the new output logprobs; the prompt's in the first chunk only
          Json& m = o["meta_info"];
          m["output_token_logprobs"] = lp_tuples(s.out_lp, s.lp_sent, s.out_lp.size(), LpPart::kToken);
          m["output_top_logprobs"] =
              top_logprobs_num > 0 ? lp_tuples(s.out_lp, s.lp_sent, s.out_lp.size(), LpPart::kTop) : Json::array();
          if (!s.token_ids_logprob.empty())
            m["output_token_ids_logprobs"] = lp_tuples(s.out_lp, s.lp_sent, s.out_lp.size(), LpPart::kIds);
          if (s.ids_sent > 0) {
            m["input_token_logprobs"] = m["input_top_logprobs"] = Json::array();
            if (!s.token_ids_logprob.empty()) m["input_token_ids_logprobs"] = Json::array();
          }
          s.lp_sent = s.out_lp.size();
        }
        if (return_hidden_states) {  // the entries new since the previous chunk
          Json fresh = Json::array();
          for (size_t k = s.hidden_sent; k < s.hidden.size(); ++k) fresh.push_back(s.hidden[k]);
          o["meta_info"]["hidden_states"] = std::move(fresh);
          s.hidden_sent = s.hidden.size();
        }
      }
      sse(o);
      break;
    }
    case ApiKind::kCompletion: {
      Json c = chunk_base("text_completion");
      Json choice = Json::object();
      choice["index"] = i;
      choice["text"] = s.text.substr(s.text_sent);
      s.text_sent = s.text.size();
      if (return_logprob) {
        choice["logprobs"] = completion_logprobs(s, s.lp_sent, s.out_lp.size(), false, &completion_offsets_[i]);
        s.lp_sent = s.out_lp.size();
      } else {
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = finished_now ? Json(finish_reason_openai(s)) : Json(nullptr);
      choice["matched_stop"] = matched_stop(s);
      c["choices"] = Json::array({choice});
      if (include_usage) c["usage"] = continuous_usage ? usage() : Json(nullptr);
      sse(c);
      break;
    }
    case ApiKind::kResponses:
      responses->items->feed(take_chat_delta(s, finished_now));
      break;
    case ApiKind::kChat: {
      ChatDelta d = take_chat_delta(s, finished_now);
      const bool has_lp = return_logprob && s.lp_sent < s.out_lp.size();
      if (!d.empty() || has_lp) {
        Json delta = Json::object();
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        if (!d.tool_calls.empty()) {
          Json calls = Json::array();
          for (const ToolCallDelta& t : d.tool_calls) {
            calls.push_back(Json{{"index", t.index},
                                 {"id", t.id},
                                 {"type", "function"},
                                 {"function", Json{{"name", t.name}, {"arguments", t.arguments}}}});
            s.had_tool_calls = true;
          }
          delta["tool_calls"] = std::move(calls);
        }
        Json c = chunk_base("chat.completion.chunk");
        Json choice = Json::object();
        choice["index"] = i;
        choice["delta"] = std::move(delta);
        if (has_lp) {
          choice["logprobs"] = chat_logprobs(s, s.lp_sent, s.out_lp.size());
          s.lp_sent = s.out_lp.size();
        } else {
          choice["logprobs"] = nullptr;
        }
        choice["finish_reason"] = nullptr;
        c["choices"] = Json::array({choice});
        if (include_usage) c["usage"] = continuous_usage ? usage() : Json(nullptr);
        sse(c);
      }
      if (finished_now) {
        Json c = chunk_base("chat.completion.chunk");
        Json choice = Json::object();
        choice["index"] = i;
        choice["delta"] = Json::object();
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = finish_reason_openai(s);
        choice["matched_stop"] = matched_stop(s);
        c["choices"] = Json::array({choice});
        if (include_usage) c["usage"] = continuous_usage ? usage() : Json(nullptr);
        sse(c);
      }
      break;
    }
    case ApiKind::kScore:  // never streamed
      break;
  }
  s.ids_sent = s.output_ids.size();
}

void Job::log_finished() const {
  const int level = srv_->opt.log_requests_level;
  if (level < 0) return;
  auto text = [&](const std::string& t) {
    return dump_json(Json(level >= 3 || t.size() <= 2048 ? t : t.substr(0, 2048) + "..."));
  };
  for (const Seq& s : seqs) {
    std::string line = "Finish: " + route_ + " rid=" + s.rid + " prompt_tokens=" +
                       std::to_string(s.prompt_tokens > 0 ? s.prompt_tokens : static_cast<int32_t>(s.prompt_ids.size())) +
                       " completion_tokens=" + std::to_string(s.output_ids.size()) + " finish=" +
                       (s.error.empty() ? std::string(finish_kind_name(s.reason.kind)) : "error: " + s.error) +
                       " e2e=" + format_seconds(static_cast<int64_t>(seconds_since(t0_) * 1000)) + "s";
    if (level >= 1) {
      const SamplingParams& e = s.sampling.engine;
      char buf[160];
      std::snprintf(buf, sizeof(buf), " temperature=%g top_p=%g top_k=%d min_p=%g max_new_tokens=%d", e.temperature,
                    e.top_p, e.top_k, e.min_p, e.max_new_tokens);
      line += buf;
    }
    if (level >= 2) line += " prompt=" + text(s.prompt_text) + " output=" + text(s.text);
    DS_INFO(line);
  }
}

void Job::complete() {
  responded_ = true;
  log_finished();
  const char* resp_status = !seqs.empty() && seqs[0].reason.kind == FinishReason::Kind::kLength ? "incomplete"
                                                                                                : "completed";
  auto store_response = [&](const Json& r) {
    if (!responses->req.store) return;
    Json conversation = responses->conversation;
    for (const Json& m : responses->items->as_messages()) conversation.push_back(m);
    srv_->responses.put(responses->id, ResponseStore::Entry{r, std::move(conversation)});
  };
  if (stream && kind_ == ApiKind::kResponses) {
    responses->items->close();
    const bool failed = !seqs.empty() && !seqs[0].error.empty();
    Json r = responses_body(responses->items->items(), failed ? "failed" : resp_status);
    if (!failed) store_response(r);
    responses_event(failed ? "response.failed" : "response.completed", Json{{"response", r}});
    out_->stream_end();
    return;
  }
  if (stream) {
    if (return_hidden_states && (kind_ == ApiKind::kChat || kind_ == ApiKind::kCompletion)) {
      for (size_t i = 0; i < seqs.size(); ++i) {  // SGLang's: a chunk a choice with its last row, after the choices
        Json c = chunk_base(kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
        Json choice = Json::object();
        choice["index"] = i;
        if (kind_ == ApiKind::kChat) choice["delta"] = Json{{"hidden_states", last_hidden(seqs[i])}};
        else {
          choice["text"] = "";
          choice["hidden_states"] = last_hidden(seqs[i]);
        }
        choice["finish_reason"] = nullptr;
        c["choices"] = Json::array({choice});
        sse(c);
      }
    }
    if (include_usage && kind_ != ApiKind::kGenerate) {
      Json c = chunk_base(kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
      c["choices"] = Json::array();
      c["usage"] = usage();
      sse(c);
    }
    out_->stream_write("data: [DONE]\n\n");
    out_->stream_end();
    return;
  }
  for (const Seq& s : seqs) {
    if (!s.error.empty()) {
      srv_->send_error(*out_, route_, make_error(500, s.error, "server_error"));
      return;
    }
  }
  Json body;
  switch (kind_) {
    case ApiKind::kGenerate: {
      if (list_response) {
        body = Json::array();
        for (size_t i = 0; i < seqs.size(); ++i) body.push_back(generate_object(i));
      } else {
        body = generate_object(0);
      }
      break;
    }
    case ApiKind::kCompletion: {
      body = chunk_base("text_completion");
      Json choices = Json::array();
      for (size_t i = 0; i < seqs.size(); ++i) {
        const Seq& s = seqs[i];
        Json choice = Json::object();
        choice["index"] = i;
        choice["text"] = echo ? s.prompt_text + s.text : s.text;
        if (return_logprob) {
          size_t off = 0;
          choice["logprobs"] = completion_logprobs(s, 0, s.out_lp.size(), echo, &off);
        } else {
          choice["logprobs"] = nullptr;
        }
        choice["finish_reason"] = finish_reason_openai(s);
        choice["matched_stop"] = matched_stop(s);
        if (return_hidden_states) choice["hidden_states"] = last_hidden(s);
        choices.push_back(std::move(choice));
      }
      body["choices"] = std::move(choices);
      body["usage"] = usage();
      break;
    }
    case ApiKind::kChat: {
      body = chunk_base("chat.completion");
      Json choices = Json::array();
      for (size_t i = 0; i < seqs.size(); ++i) {
        Seq& s = seqs[i];
        const ChatMessageOut msg = chat_message(s);
        s.had_tool_calls = !msg.tool_calls.empty();
        Json m = Json::object();
        m["role"] = "assistant";
        m["content"] = (msg.content.empty() && s.had_tool_calls) ? Json(nullptr) : Json(msg.content);
        m["reasoning_content"] = msg.reasoning_content.empty() ? Json(nullptr) : Json(msg.reasoning_content);
        if (s.had_tool_calls) {
          Json calls = Json::array();
          for (const ToolCall& t : msg.tool_calls)
            calls.push_back(Json{{"id", t.id},
                                 {"type", "function"},
                                 {"function", Json{{"name", t.name}, {"arguments", t.arguments}}}});
          m["tool_calls"] = std::move(calls);
        } else {
          m["tool_calls"] = nullptr;
        }
        Json choice = Json::object();
        choice["index"] = i;
        choice["message"] = std::move(m);
        choice["logprobs"] = return_logprob ? chat_logprobs(s, 0, s.out_lp.size()) : Json(nullptr);
        choice["finish_reason"] = finish_reason_openai(s);
        choice["matched_stop"] = matched_stop(s);
        if (return_hidden_states) choice["hidden_states"] = last_hidden(s);
        choices.push_back(std::move(choice));
      }
      body["choices"] = std::move(choices);
      body["usage"] = usage();
      break;
    }
    case ApiKind::kScore:
      body = score_body();
      break;
    case ApiKind::kResponses: {
      const ChatMessageOut msg = chat_message(seqs[0]);
      ChatDelta whole;
      whole.reasoning = msg.reasoning_content;
      whole.content = msg.content;
      for (size_t k = 0; k < msg.tool_calls.size(); ++k)
        whole.tool_calls.push_back(ToolCallDelta{static_cast<int>(k), msg.tool_calls[k].id, msg.tool_calls[k].name,
                                                 msg.tool_calls[k].arguments});
      responses->items = std::make_unique<ResponseItems>();
      responses->items->feed(whole);
      responses->items->close();
      body = responses_body(responses->items->items(), resp_status);
      store_response(body);
      break;
    }
  }
  srv_->send_json(*out_, route_, 200, body);
}

// Shared preparation: token limits, defaults, seeds and text state for each sequence.
std::optional<ApiError> prepare_seq(ApiServer::Impl& srv, Seq& s, bool default_fills_context) {
  const int64_t ctx = srv.engine->context_length();
  const int64_t n = static_cast<int64_t>(s.prompt_ids.size());
  if (n == 0) return bad_request("the prompt is empty (0 tokens)");
  if (n >= ctx) {
    ApiError e = bad_request("The input (" + std::to_string(n) + " tokens) is longer than the model's context length (" +
                             std::to_string(ctx) + " tokens).");
    e.code = "context_length_exceeded";
    return e;
  }
  SamplingParams& e = s.sampling.engine;
  if (!s.sampling.max_new_tokens_set) {
    int64_t room = ctx - n;
    const int64_t capacity = srv.engine->stats().max_total_tokens;
    if (capacity > n) room = std::min(room, capacity - n);
    if (default_fills_context) e.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(room, INT32_MAX));
    else e.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(e.max_new_tokens, room));
    e.min_new_tokens = std::min(e.min_new_tokens, e.max_new_tokens);
  } else if (n + e.max_new_tokens > ctx) {
    ApiError err = bad_request("Requested token count exceeds the model's maximum context length of " +
                               std::to_string(ctx) + " tokens. You requested a total of " +
                               std::to_string(n + e.max_new_tokens) + " tokens: " + std::to_string(n) +
                               " tokens from the input and " + std::to_string(e.max_new_tokens) +
                               " tokens for the completion.");
    err.code = "context_length_exceeded";
    return err;
  }
  const int64_t vocab = srv.engine->model_config().vocab_size;
  for (int32_t id : e.stop_token_ids)
    if (vocab > 0 && id >= vocab)
      return bad_request("stop_token_ids: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(vocab) + ")",
                         "stop_token_ids");
  if (!s.sampling.seed_set) e.seed = srv.next_seed();
  if (s.sampling.constraints() > 0) {
    const bool regex = !s.sampling.regex.empty(), ebnf = !s.sampling.ebnf.empty(),
               tag = !s.sampling.structural_tag.empty();
    const char* param = regex ? "regex"
                        : ebnf ? "ebnf"
                        : tag ? (s.sampling.structural_tag_from_response_format ? "response_format" : "structural_tag")
                        : s.sampling.json_schema_from_response_format ? "response_format" : "json_schema";
    if (!srv.grammars)
      return bad_request(std::string(param) + ": constrained decoding needs the tokenizer; this server runs with "
                         "--skip-tokenizer-init", param);
    const std::string kind = ebnf ? "ebnf" : tag ? "structural_tag" : !regex ? "json_schema"
                             : s.sampling.regex_with_tool_markers ? "tool_regex" : "regex";
    const std::string& text = regex ? s.sampling.regex : ebnf ? s.sampling.ebnf
                              : tag ? s.sampling.structural_tag : s.sampling.json_schema;
    if (auto kept = srv.grammars->peek(kind, text))
      s.grammar = std::move(kept);
    else
      s.grammar_pending = Seq::PendingGrammar{kind, text, param};  // compiled by Job::start, off this thread
  }
  if (srv.tok) {
    DetokenizerOptions d;
    d.skip_special_tokens = s.sampling.text.skip_special_tokens;
    d.spaces_between_special_tokens = s.sampling.text.spaces_between_special_tokens;
    d.stop = s.sampling.text.stop;
    s.detok.emplace(*srv.tok, std::move(d));
  } else if (!s.sampling.text.stop.empty()) {
    return bad_request("stop strings need a tokenizer; this server runs with --skip-tokenizer-init (use stop_token_ids)",
                       "stop");
  }
  return std::nullopt;
}

// Expands prompts x n into sequences (seed + j for the j-th sample of a seeded request).
std::vector<Seq> expand(const std::vector<PromptSpec>& prompts, const std::vector<SamplingSpec>& sampling,
                        const std::vector<std::vector<int32_t>>& ids, const std::vector<std::string>& base_rids) {
  std::vector<Seq> seqs;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int32_t n = sampling[p].n;
    for (int32_t j = 0; j < n; ++j) {
      Seq s;
      s.prompt_index = static_cast<int32_t>(p);
      s.first_of_prompt = j == 0;
      s.prompt_ids = ids[p];
      s.prompt_text = prompts[p].is_text ? prompts[p].text : "";
      s.sampling = sampling[p];
      if (s.sampling.seed_set) s.sampling.engine.seed += static_cast<uint64_t>(j);
      s.rid = n == 1 ? base_rids[p] : base_rids[p] + "-" + std::to_string(j);
      seqs.push_back(std::move(s));
    }
  }
  return seqs;
}

// Engine-free checks before building a job: overload, content type.
std::optional<ApiError> admission(ApiServer::Impl& srv) {
  if (srv.shutting_down) return make_error(503, "the server is shutting down", "service_unavailable");
  if (srv.opt.max_queued_requests > 0 && srv.engine->stats().num_waiting >= srv.opt.max_queued_requests)
    return make_error(503, "the server is overloaded: " + std::to_string(srv.opt.max_queued_requests) +
                               " requests are already waiting; retry later",
                      "service_unavailable");
  return std::nullopt;
}

std::optional<ApiError> tokenize_prompt(ApiServer::Impl& srv, const PromptSpec& p, bool add_special,
                                        std::vector<int32_t>* ids, const char* param) {
  if (!p.is_text) {
    *ids = p.ids;
    return std::nullopt;
  }
  if (!srv.tok)
    return bad_request("text prompts need a tokenizer; this server runs with --skip-tokenizer-init (send token ids)",
                       param);
  auto r = srv.tok->encode(p.text, add_special);
  if (!r) return bad_request(std::string(param) + ": " + r.status().message(), param);
  *ids = std::move(r.value());
  return std::nullopt;
}

// The request bodies are parsed into sorted objects; a response_format schema is read again from the body in its own
// property order (the order the constrained output's properties take).
void reread_schema_in_body_order(const std::string& body, SamplingSpec* s) {
  if (!s->json_schema_from_response_format) return;
  try {
    s->json_schema = nlohmann::ordered_json::parse(body).at("response_format").at("json_schema").at("schema").dump();
  } catch (const std::exception&) {
  }
}

bool json_content_type(const HttpRequest& req) {
  const std::string* ct = req.header("content-type");
  if (!ct) return false;
  std::string v = *ct;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v.rfind("application/json", 0) == 0;
}

}  // namespace

void ApiServer::Impl::handle_generate(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route) {
  Json body;
  GenerateRequest g;
  if (auto e = parse_json_body(req.body, &body)) return send_error(*out, route, *e);
  merge_preferred_sampling(opt.preferred_sampling_params, &body);
  if (auto e = parse_generate_request(body, &g)) return send_error(*out, route, *e);
  if (auto e = admission(*this)) return send_error(*out, route, *e);
  std::vector<std::vector<int32_t>> ids(g.prompts.size());
  std::vector<std::string> rids = g.rids;
  for (size_t p = 0; p < g.prompts.size(); ++p) {
    if (auto e = tokenize_prompt(*this, g.prompts[p], true, &ids[p], "text")) return send_error(*out, route, *e);
    if (rids[p].empty()) rids[p] = random_hex(32);
  }
  auto job = std::make_shared<Job>(shared_from_this(), ApiKind::kGenerate, out, route);
  // A session request: its prompt continues the session's request (recorded now; the job forgets it again if it
  // never reaches the engine); once accepted, a replace drops the continued request's other branches (aborting them).
  if (g.session) {
    const int32_t bos = tok && tok->bos_id() ? *tok->bos_id() : -1;
    Result<SessionPlan> plan = sessions.begin(*g.session, rids[0], ids[0], bos);
    if (!plan) return send_error(*out, route, bad_request(plan.status().message(), "session_params"));
    ids[0] = std::move(plan.value().prompt_ids);
    job->session_id = g.session->id;
    job->session_rid = rids[0];
  }
  job->seqs = expand(g.prompts, g.sampling, ids, rids);
  int64_t logprob_entries = 0;  // what the reported logprobs hold, all sequences together
  for (Seq& s : job->seqs) {
    if (auto e = prepare_seq(*this, s, false)) return send_error(*out, route, *e);
    if (!g.token_ids_logprob.empty()) s.token_ids_logprob = g.token_ids_logprob[s.prompt_index];
    if (!g.return_logprob) continue;
    const int64_t n = static_cast<int64_t>(s.prompt_ids.size());
    const int64_t positions = (g.logprob_start_len >= 0 ? std::max<int64_t>(n - g.logprob_start_len, 0) : 0) +
                              s.sampling.engine.max_new_tokens;
    logprob_entries += positions * (1 + g.top_logprobs_num + static_cast<int64_t>(s.token_ids_logprob.size()));
  }
  if (logprob_entries > kMaxLogprobEntries)
    return send_error(*out, route, bad_request("the logprobs asked for (" + std::to_string(logprob_entries) +
                                                   " entries: positions x (1 + top_logprobs_num + token_ids_logprob)) "
                                                   "exceed " + std::to_string(kMaxLogprobEntries) + " a request; ask "
                                                   "fewer alternatives or positions (logprob_start_len, max_new_tokens)",
                                               "top_logprobs_num"));
  job->stream = g.stream;
  job->list_response = g.batch || job->seqs.size() > 1;
  job->return_logprob = g.return_logprob;
  job->logprob_start_len = g.logprob_start_len;
  job->top_logprobs_num = g.top_logprobs_num;
  job->return_text_in_logprobs = g.return_text_in_logprobs;
  job->return_hidden_states = g.return_hidden_states;
  job->return_routed_experts = g.return_routed_experts;
  if (g.session)
    for (const std::string& r : sessions.accept(*g.session, rids[0])) engine->abort(r);
  job->start();
}

void ApiServer::Impl::handle_completion(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route) {
  Json body;
  CompletionRequest c;
  if (auto e = parse_json_body(req.body, &body)) return send_error(*out, route, *e);
  if (auto e = parse_completion_request(body, &c)) return send_error(*out, route, *e);
  reread_schema_in_body_order(req.body, &c.sampling);
  if (!model_name_ok(c.model)) return send_error(*out, route, model_not_found(c.model));
  if (auto e = admission(*this)) return send_error(*out, route, *e);
  std::vector<std::vector<int32_t>> ids(c.prompts.size());
  for (size_t p = 0; p < c.prompts.size(); ++p) {
    if (auto e = tokenize_prompt(*this, c.prompts[p], true, &ids[p], "prompt")) return send_error(*out, route, *e);
    if (!c.prompts[p].is_text && tok) c.prompts[p].text = tok->decode(ids[p], false);  // echo of id prompts
    c.prompts[p].is_text = true;
  }
  auto job = std::make_shared<Job>(shared_from_this(), ApiKind::kCompletion, out, route);
  job->id = "cmpl-" + random_hex(32);
  std::vector<std::string> rids(c.prompts.size());
  for (size_t p = 0; p < rids.size(); ++p) {
    const std::string base = c.rid.empty() ? job->id : c.rid;
    rids[p] = rids.size() == 1 ? base : base + "-p" + std::to_string(p);
  }
  std::vector<SamplingSpec> sampling(c.prompts.size(), c.sampling);
  job->seqs = expand(c.prompts, sampling, ids, rids);
  for (Seq& s : job->seqs)
    if (auto e = prepare_seq(*this, s, false)) return send_error(*out, route, *e);
  job->model = opt.served_model_name;
  job->stream = c.stream;
  job->include_usage = c.include_usage;
  job->continuous_usage = c.continuous_usage_stats;
  job->echo = c.echo;
  job->return_logprob = c.logprobs >= 0;
  job->return_hidden_states = c.return_hidden_states;
  job->top_logprobs_num = std::max(c.logprobs, 0);
  job->logprob_start_len = (c.echo && c.logprobs >= 0) ? 0 : -1;
  job->start();
}

void ApiServer::Impl::handle_chat(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route) {
  Json body;
  ChatRequest c;
  if (auto e = parse_json_body(req.body, &body)) return send_error(*out, route, *e);
  if (auto e = parse_chat_request(body, &c)) return send_error(*out, route, *e);
  run_chat(std::move(c), req.body, out, route, nullptr);
}

void ApiServer::Impl::run_chat(ChatRequest c, const std::string& body_text, std::shared_ptr<HttpResponder> out,
                               const std::string& route, std::shared_ptr<ResponsesCtx> resp) {
  reread_schema_in_body_order(body_text, &c.sampling);
  apply_sampling_defaults(opt.chat_sampling_defaults, &c.sampling);
  if (!model_name_ok(c.model)) return send_error(*out, route, model_not_found(c.model));
  if (!tok)
    return send_error(*out, route,
                      bad_request("chat completions need a tokenizer; this server runs with --skip-tokenizer-init"));
  if (!chat) return send_error(*out, route, bad_request("chat completions are unavailable: " + chat_error));
  if (auto e = admission(*this)) return send_error(*out, route, *e);
  const bool use_tools = !c.tools.is_null() && c.tool_choice != "none";
  if (c.tool_choice == "required" || c.tool_choice == "function") {
    // The output constrained to the tool-call format (SGLang constrains it with a grammar too).
    if (!tool_format)
      return send_error(*out, route, bad_request("tool_choice \"required\" or a named function needs the server's "
                                                 "--tool-call-parser", "tool_choice"));
    if (c.sampling.constraints() > 0)
      return send_error(*out, route, bad_request("tool_choice \"required\" or a named function cannot be combined "
                                                 "with regex, json_schema, ebnf, structural_tag or response_format", "tool_choice"));
    nlohmann::ordered_json tools;
    try {
      tools = nlohmann::ordered_json::parse(body_text).at("tools");  // the schemas in the body's property order
    } catch (const std::exception&) {
    }
    auto re = tool_call_regex(*tool_format, tools, c.tool_choice == "function" ? c.tool_choice_name : "");
    if (!re) return send_error(*out, route, bad_request(re.status().message(), "tool_choice"));
    c.sampling.regex = *re;
    c.sampling.regex_with_tool_markers = true;
  }
  ChatRenderOptions ro;
  ro.add_generation_prompt = true;
  ro.thinking = c.thinking;
  ro.bos_token = chat->bos_token;
  ro.eos_token = chat->eos_token;
  Json messages = c.messages;
  std::string reply_prefix;  // continue_final_message: the assistant's unfinished reply
  if (c.continue_final_message) {
    if (!messages.is_array() || messages.empty() || !messages.back().is_object() ||
        messages.back().value("role", Json("")) != "assistant")
      return send_error(*out, route, bad_request("continue_final_message needs the last message to be the "
                                                 "assistant's (the reply to continue)", "continue_final_message"));
    auto text = chat_message_text(messages.back(), "messages[" + std::to_string(messages.size() - 1) + "]");
    if (!text) return send_error(*out, route, bad_request(text.status().message(), "messages"));
    reply_prefix = *text;
    messages.erase(messages.size() - 1);
  }
  auto prompt = render_chat(chat->format, messages, use_tools ? c.tools : Json(nullptr), ro);
  if (!prompt) return send_error(*out, route, bad_request(prompt.status().message(), "messages"));
  PromptSpec p{true, prompt.value(), {}};
  std::vector<std::vector<int32_t>> ids(1);
  if (auto e = tokenize_prompt(*this, p, false, &ids[0], "messages")) return send_error(*out, route, *e);
  if (!reply_prefix.empty()) {  // its own tokens after the rendered prompt's, as SGLang encodes it
    std::vector<int32_t> more;
    if (auto e = tokenize_prompt(*this, PromptSpec{true, reply_prefix, {}}, false, &more, "messages"))
      return send_error(*out, route, *e);
    ids[0].insert(ids[0].end(), more.begin(), more.end());
    p.text += reply_prefix;
  }
  auto job = std::make_shared<Job>(shared_from_this(), resp ? ApiKind::kResponses : ApiKind::kChat, out, route);
  job->id = resp ? resp->id : "chatcmpl-" + random_hex(32);
  job->responses = resp;
  job->seqs = expand({p}, {c.sampling}, ids, {c.rid.empty() ? job->id : c.rid});
  const bool thinking = reasoning == ReasoningFormat::kDeepSeekR1 ? true : c.thinking;
  for (Seq& s : job->seqs) {
    if (auto e = prepare_seq(*this, s, true)) return send_error(*out, route, *e);
    std::optional<ReasoningFormat> rf = c.separate_reasoning ? reasoning : std::nullopt;
    std::optional<ToolCallFormat> tf = use_tools ? tool_format : std::nullopt;
    if (rf || tf) s.chat_parser.emplace(rf, thinking, tf);
  }
  job->model = opt.served_model_name;
  job->stream = c.stream;
  job->include_usage = c.include_usage;
  job->continuous_usage = c.continuous_usage_stats;
  job->return_logprob = c.logprobs;
  job->return_hidden_states = c.return_hidden_states;
  job->top_logprobs_num = c.top_logprobs;
  job->start();
}

// OpenAI's Responses API as a chat request (responses_api.h), continuing a stored conversation by previous_response_id.
void ApiServer::Impl::handle_responses(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route) {
  Json body;
  if (auto e = parse_json_body(req.body, &body)) return send_error(*out, route, *e);
  auto ctx = std::make_shared<ResponsesCtx>();
  ResponsesRequest& r = ctx->req;
  if (auto e = parse_responses_request(body, &r)) return send_error(*out, route, *e);
  Json messages = Json::array();
  if (!r.instructions.empty()) messages.push_back(Json{{"role", "system"}, {"content", r.instructions}});
  if (!r.previous_response_id.empty()) {
    auto prev = responses.get(r.previous_response_id);
    if (!prev) {
      ApiError e = make_error(404, "Previous response with id '" + r.previous_response_id + "' not found (responses "
                              "are kept in this server's memory: the most recent, up to 1024 or 256 MB, until it "
                              "restarts)",
                              "invalid_request_error", "previous_response_not_found");
      e.param = "previous_response_id";
      return send_error(*out, route, e);
    }
    ctx->conversation = prev->conversation;
  }
  for (const Json& m : r.input_messages) ctx->conversation.push_back(m);
  for (const Json& m : ctx->conversation) messages.push_back(m);
  r.chat_body["messages"] = messages;
  ChatRequest c;
  if (auto e = parse_chat_request(r.chat_body, &c)) {  // named as the Responses fields they came from
    ApiError err = *e;
    static const std::pair<const char*, const char*> kNames[] = {
        {"max_tokens", "max_output_tokens"}, {"response_format", "text"}, {"chat_template_kwargs", "reasoning"}};
    for (const auto& [from, to] : kNames)
      if (err.param == from) {
        err.param = to;
        for (size_t at; (at = err.message.find(from)) != std::string::npos;) err.message.replace(at, strlen(from), to);
      }
    if (err.param.rfind("messages", 0) == 0) err.param = "input";
    return send_error(*out, route, err);
  }
  ctx->id = "resp_" + random_hex(48);
  ctx->created = static_cast<int64_t>(std::time(nullptr));
  run_chat(std::move(c), dump_json(r.chat_body), out, route, ctx);
}

// SGLang's /v1/score: one greedy one-token sequence per item, asking its labels' logprobs at that token.
void ApiServer::Impl::handle_score(HttpRequest& req, std::shared_ptr<HttpResponder> out, const std::string& route) {
  Json body;
  ScoreRequest sr;
  if (auto e = parse_json_body(req.body, &body)) return send_error(*out, route, *e);
  if (auto e = parse_score_request(body, &sr)) return send_error(*out, route, *e);
  if (!model_name_ok(sr.model)) return send_error(*out, route, model_not_found(sr.model));
  const int64_t vocab = engine->model_config().vocab_size;
  for (size_t k = 0; k < sr.label_token_ids.size(); ++k)
    if (sr.label_token_ids[k] >= vocab)
      return send_error(*out, route, bad_request("label_token_ids[" + std::to_string(k) + "] = " +
                                                     std::to_string(sr.label_token_ids[k]) +
                                                     " is outside the vocabulary [0, " + std::to_string(vocab) + ")",
                                                 "label_token_ids"));
  if (auto e = admission(*this)) return send_error(*out, route, *e);
  const size_t n = sr.items.size();
  std::vector<PromptSpec> prompts(n);
  std::vector<std::vector<int32_t>> ids(n);
  for (size_t i = 0; i < n; ++i) {
    prompts[i] = score_prompt(sr, i);
    if (auto e = tokenize_prompt(*this, prompts[i], true, &ids[i], "items")) return send_error(*out, route, *e);
  }
  SamplingSpec one;
  one.engine.max_new_tokens = 1;
  one.max_new_tokens_set = true;
  one.engine.temperature = 0.0f;
  one.temperature_set = true;
  auto job = std::make_shared<Job>(shared_from_this(), ApiKind::kScore, out, route);
  job->id = "score-" + random_hex(32);
  std::vector<std::string> rids(n);
  for (size_t i = 0; i < n; ++i) rids[i] = job->id + "-" + std::to_string(i);
  job->seqs = expand(prompts, std::vector<SamplingSpec>(n, one), ids, rids);
  for (Seq& s : job->seqs) {
    if (auto e = prepare_seq(*this, s, false)) return send_error(*out, route, *e);
    s.token_ids_logprob = sr.label_token_ids;
  }
  job->model = opt.served_model_name;
  job->return_logprob = true;
  job->score_softmax = sr.apply_softmax;
  job->start();
}

void ApiServer::Impl::handle_health(std::shared_ptr<HttpResponder> out, const std::string& route) {
  if (shutting_down) return send_error(*out, route, make_error(503, "the server is shutting down", "service_unavailable"));
  // Paused by /pause_generation (a weight update, say): alive on purpose, so healthy without a generation.
  if (engine->stats().paused) return send_text(*out, route, 200, "");
  struct State {
    bool done = false;
  };
  auto state = std::make_shared<State>();
  auto self = shared_from_this();
  EngineRequest req;
  req.rid = "health-" + random_hex(24);
  req.input_ids = {0};
  req.sampling.max_new_tokens = 1;
  req.sampling.temperature = 0.0f;
  const std::string rid = req.rid;
  Status st = engine->submit(std::move(req), [self, out, state, route](EngineEvent ev) {
    if (!ev.finished) return;
    out->post([self, out, state, route, ev = std::move(ev)] {
      if (state->done) return;
      state->done = true;
      if (ev.error.empty() && ev.reason.kind != FinishReason::Kind::kAbort) {
        self->send_text(*out, route, 200, "");
      } else {
        self->send_error(*out, route,
                         make_error(503, "health generation failed: " + (ev.error.empty() ? ev.reason.matched_text : ev.error),
                                    "service_unavailable"));
      }
    });
  });
  if (!st)
    return send_error(*out, route, make_error(503, "health generation refused: " + st.message(), "service_unavailable"));
  out->set_on_disconnect([self, rid] { self->engine->abort(rid); });
  out->post_after(std::chrono::milliseconds(opt.health_timeout_ms), [self, out, state, route, rid] {
    if (state->done) return;
    state->done = true;
    self->engine->abort(rid);
    self->send_error(*out, route, make_error(503, "health generation timed out", "service_unavailable"));
  });
}

void ApiServer::Impl::handle_tokenize(HttpRequest& req, HttpResponder& out, const std::string& route) {
  Json body;
  if (auto e = parse_json_body(req.body, &body)) return send_error(out, route, *e);
  if (!tok) return send_error(out, route, bad_request("no tokenizer: this server runs with --skip-tokenizer-init"));
  const std::string model = string_field(body, "model");
  if (!model_name_ok(model)) return send_error(out, route, model_not_found(model));
  bool add_special = true;
  if (body.contains("add_special_tokens") && !body["add_special_tokens"].is_null()) {
    if (!body["add_special_tokens"].is_boolean())
      return send_error(out, route, bad_request("'add_special_tokens' must be a boolean", "add_special_tokens"));
    add_special = body["add_special_tokens"].get<bool>();
  }
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "prompt" && it.key() != "add_special_tokens")
      return send_error(out, route, bad_request("Unrecognized request argument supplied: " + it.key(), it.key()));
  auto enc = [&](const Json& p, Json* ids) -> std::optional<ApiError> {
    if (!p.is_string()) return bad_request("'prompt' must be a string or a list of strings", "prompt");
    auto r = tok->encode(p.get<std::string>(), add_special);
    if (!r) return bad_request("prompt: " + r.status().message(), "prompt");
    *ids = r.value();
    return std::nullopt;
  };
  if (!body.contains("prompt")) return send_error(out, route, bad_request("'prompt' is required", "prompt"));
  const Json& p = body["prompt"];
  Json result = Json::object();
  if (p.is_array()) {
    Json tokens = Json::array(), counts = Json::array();
    for (const Json& x : p) {
      Json ids;
      if (auto e = enc(x, &ids)) return send_error(out, route, *e);
      counts.push_back(ids.size());
      tokens.push_back(std::move(ids));
    }
    result["tokens"] = std::move(tokens);
    result["count"] = std::move(counts);
  } else {
    Json ids;
    if (auto e = enc(p, &ids)) return send_error(out, route, *e);
    result["count"] = ids.size();
    result["tokens"] = std::move(ids);
  }
  result["max_model_len"] = engine->context_length();
  send_json(out, route, 200, result);
}

void ApiServer::Impl::handle_detokenize(HttpRequest& req, HttpResponder& out, const std::string& route) {
  Json body;
  if (auto e = parse_json_body(req.body, &body)) return send_error(out, route, *e);
  if (!tok) return send_error(out, route, bad_request("no tokenizer: this server runs with --skip-tokenizer-init"));
  const std::string model = string_field(body, "model");
  if (!model_name_ok(model)) return send_error(out, route, model_not_found(model));
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "tokens")
      return send_error(out, route, bad_request("Unrecognized request argument supplied: " + it.key(), it.key()));
  if (!body.contains("tokens") || !body["tokens"].is_array())
    return send_error(out, route, bad_request("'tokens' must be a list of token ids or a list of lists", "tokens"));
  auto dec = [&](const Json& arr, std::string* text) -> bool {
    if (!arr.is_array()) return false;
    std::vector<int32_t> ids;
    for (const Json& x : arr) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= tok->vocab_size()) return false;
      ids.push_back(x.get<int32_t>());
    }
    *text = tok->decode(ids, false);
    return true;
  };
  const Json& t = body["tokens"];
  Json result = Json::object();
  if (!t.empty() && t[0].is_array()) {
    Json texts = Json::array();
    for (const Json& x : t) {
      std::string s;
      if (!dec(x, &s)) return send_error(out, route, bad_request("'tokens' entries must be lists of token ids in the vocabulary", "tokens"));
      texts.push_back(std::move(s));
    }
    result["text"] = std::move(texts);
  } else {
    std::string s;
    if (!dec(t, &s)) return send_error(out, route, bad_request("'tokens' must hold token ids in the vocabulary", "tokens"));
    result["text"] = std::move(s);
  }
  send_json(out, route, 200, result);
}

Json ApiServer::Impl::models_entry() const {
  Json m = Json::object();
  m["id"] = opt.served_model_name;
  m["object"] = "model";
  m["created"] = created_time;
  m["owned_by"] = "dserve";
  m["root"] = opt.model_path;
  m["max_model_len"] = engine->context_length();
  return m;
}

Json ApiServer::Impl::server_info() const {
  Json info = opt.server_args;
  const EngineStats s = engine->stats();
  Json st = Json::object();
  st["num_running_reqs"] = s.num_running;
  st["num_waiting_reqs"] = s.num_waiting;
  st["paused"] = s.paused;  // /pause_generation until /continue_generation
  st["max_total_num_tokens"] = s.max_total_tokens;
  st["max_running_requests"] = s.max_running_requests;  // in effect (capped by the pool), not the flag's value
  st["used_tokens"] = s.used_tokens;
  st["cached_tokens"] = s.cached_tokens;
  st["prompt_tokens_total"] = s.prompt_tokens_total;
  st["cached_tokens_total"] = s.cached_tokens_total;
  st["generation_tokens_total"] = s.generation_tokens_total;
  st["num_requests_total"] = s.num_requests_total;
  st["num_retractions"] = s.num_retractions;
  st["num_steps"] = s.num_steps;
  st["context_length"] = engine->context_length();
  if (s.speculative_num_steps > 0) {  // SGLang's bench_serving prints it as "Accept length"
    st["avg_spec_accept_length"] =
        s.spec_verify_steps > 0
            ? static_cast<double>(s.spec_verify_steps + s.spec_accepted_tokens) / static_cast<double>(s.spec_verify_steps)
            : 0.0;
    st["spec_verify_steps"] = s.spec_verify_steps;
    st["spec_draft_tokens"] = s.spec_draft_tokens;
    st["spec_accepted_tokens"] = s.spec_accepted_tokens;
  }
  info["internal_states"] = Json::array({st});
  info["version"] = "dserve 0.1";
  return info;
}

ApiServer::ApiServer(ApiServerOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->opt = std::move(options);
  if (impl_->opt.served_model_name.empty()) impl_->opt.served_model_name = impl_->opt.model_path;
  if (impl_->opt.tokenizer_path.empty()) impl_->opt.tokenizer_path = impl_->opt.model_path;
}

ApiServer::~ApiServer() = default;

Status ApiServer::init() {
  auto rf = reasoning_format_or_none(impl_->opt.reasoning_parser);
  if (!rf) return error("--reasoning-parser: ", rf.status().message());
  impl_->reasoning = rf.value();
  auto tf = tool_call_format_or_none(impl_->opt.tool_call_parser);
  if (!tf) return error("--tool-call-parser: ", tf.status().message());
  impl_->tool_format = tf.value();
  if (!impl_->opt.chat_template.empty()) {
    auto f = chat_format_from_name(impl_->opt.chat_template);
    if (!f) return error("--chat-template: ", f.status().message());
  }
  return Status::ok();
}

Status ApiServer::set_backend(Engine* engine, const Tokenizer* tokenizer) {
  Impl& m = *impl_;
  m.engine = engine;
  m.tok = tokenizer;
  if (tokenizer) {
    m.grammars = std::make_unique<GrammarCache>(*tokenizer, static_cast<int32_t>(engine->model_config().vocab_size));
    // DSERVE_TEST_COMPILE_QUEUE (tests only, 1-256): fewer compiles may wait, so a test can reach the queue-full 503.
    const size_t queue = static_cast<size_t>(std::clamp<int64_t>(env_int("DSERVE_TEST_COMPILE_QUEUE", 256), 1, 256));
    m.compile_pool = std::make_unique<WorkerPool>(2, queue);
  }
  for (int64_t id : engine->model_config().eos_token_ids) m.eos_ids.insert(static_cast<int32_t>(id));
  if (engine->model_config().eos_token_id >= 0) m.eos_ids.insert(static_cast<int32_t>(engine->model_config().eos_token_id));
  if (tokenizer) {
    std::optional<ChatFormat> forced;
    if (!m.opt.chat_template.empty()) {
      auto f = chat_format_from_name(m.opt.chat_template);
      if (!f) return error("--chat-template: ", f.status().message());
      forced = f.value();
    }
    auto info = load_chat_template_info(m.opt.tokenizer_path, forced);
    if (info) {
      m.chat = info.value();
    } else {
      m.chat_error = info.status().message() + " (use --chat-template)";
      DS_WARN("chat completions disabled: ", m.chat_error);
    }
  }
  m.is_ready.store(true, std::memory_order_release);
  return Status::ok();
}

bool ApiServer::ready() const { return impl_->is_ready.load(std::memory_order_acquire); }
void ApiServer::set_shutting_down() {
  std::lock_guard<std::mutex> lock(impl_->admin_mu);
  impl_->shutting_down = true;
}
void ApiServer::wait_admin_idle() {
  std::unique_lock<std::mutex> lock(impl_->admin_mu);
  impl_->admin_cv.wait(lock, [&] { return impl_->admin_active == 0; });
}
const ServerMetrics& ApiServer::metrics() const { return impl_->metrics; }

void ApiServer::handle(HttpRequest req, std::shared_ptr<HttpResponder> out) {
  Impl& m = *impl_;
  struct Route {
    const char* path;
    const char* methods;  // space-separated
  };
  static const Route kRoutes[] = {
      {"/health", "GET"},
      {"/health_generate", "GET"},
      {"/generate", "POST PUT"},
      {"/v1/completions", "POST"},
      {"/v1/chat/completions", "POST"},
      {"/v1/score", "POST"},
      {"/v1/responses", "POST"},
      {"/v1/models", "GET"},
      {"/get_model_info", "GET"},
      {"/get_server_info", "GET"},
      {"/server_info", "GET"},
      {"/get_load", "GET"},
      {"/flush_cache", "GET POST"},
      {"/metrics", "GET"},
      {"/v1/tokenize", "POST"},
      {"/v1/detokenize", "POST"},
      {"/abort_request", "POST"},
      {"/pause_generation", "POST"},
      {"/continue_generation", "POST"},
      {"/separate_reasoning", "POST"},
      {"/parse_function_call", "POST"},
      {"/start_profile", "GET POST"},
      {"/stop_profile", "GET POST"},
      {"/start_expert_distribution_record", "GET POST"},
      {"/stop_expert_distribution_record", "GET POST"},
      {"/dump_expert_distribution_record", "GET POST"},
      {"/update_weights_from_disk", "POST"},
      {"/open_session", "GET POST"},
      {"/close_session", "GET POST"},
  };
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  const Route* route = nullptr;
  std::string model_suffix;
  for (const Route& r : kRoutes)
    if (path == r.path) route = &r;
  if (!route && path.rfind("/v1/models/", 0) == 0) {
    static const Route kModel{"/v1/models/{model}", "GET"};
    route = &kModel;
    model_suffix = path.substr(std::string("/v1/models/").size());
  }
  std::string response_id;  // /v1/responses/{id}[/cancel]
  if (!route && path.rfind("/v1/responses/", 0) == 0) {
    static const Route kResponse{"/v1/responses/{id}", "GET DELETE"};
    static const Route kCancel{"/v1/responses/{id}/cancel", "POST"};
    response_id = path.substr(std::string("/v1/responses/").size());
    const bool cancel = response_id.size() > 7 && response_id.compare(response_id.size() - 7, 7, "/cancel") == 0;
    if (cancel) response_id.resize(response_id.size() - 7);
    if (response_id.find('/') == std::string::npos) route = cancel ? &kCancel : &kResponse;
  }
  if (!route || (std::string_view(route->path) == "/metrics" && !m.opt.enable_metrics)) {
    return m.send_error(*out, "unknown",
                        make_error(404, "no route " + req.method + " " + path, "invalid_request_error", "not_found"));
  }
  const std::string name = route->path;
  // Authentication first: an unauthenticated client learns nothing else.
  if (!m.opt.api_key.empty() && name != "/health") {
    const std::string* auth = req.header("authorization");
    const std::string expected = "Bearer " + m.opt.api_key;
    if (!auth || !constant_time_equal(*auth, expected))
      return m.send_error(*out, name, make_error(401, "Invalid or missing API key (send Authorization: Bearer <key>)",
                                                 "authentication_error", "invalid_api_key"));
  }
  {
    const std::string methods = std::string(" ") + route->methods + " ";
    if (methods.find(" " + req.method + " ") == std::string::npos) {
      std::string allow = route->methods;
      std::replace(allow.begin(), allow.end(), ' ', ',');
      m.metrics.on_http_request(name, 405);
      return out->respond(405, "application/json",
                          dump_json(error_json(make_error(405, "method " + req.method + " is not allowed on " + path,
                                                          "invalid_request_error", "method_not_allowed"))),
                          {{"Allow", allow}});
    }
  }
  if (!ready()) {
    return m.send_error(*out, name,
                        make_error(503, "the server is starting (loading the model); retry shortly", "service_unavailable"));
  }
  const bool is_openai_post = req.method == "POST" && name.rfind("/v1/", 0) == 0;
  if (is_openai_post && !json_content_type(req))
    return m.send_error(*out, name, bad_request("Content-Type must be application/json"));

  if (name == "/generate") return m.handle_generate(req, out, name);
  if (name == "/v1/completions") return m.handle_completion(req, out, name);
  if (name == "/v1/chat/completions") return m.handle_chat(req, out, name);
  if (name == "/v1/score") return m.handle_score(req, out, name);
  if (name == "/v1/responses") return m.handle_responses(req, out, name);
  if (name == "/v1/responses/{id}" || name == "/v1/responses/{id}/cancel") {
    auto not_found = [&] {
      ApiError e = make_error(404, "No response with id '" + response_id + "' (responses are kept in this server's "
                              "memory: the most recent, up to 1024 or 256 MB)", "invalid_request_error", "not_found");
      return m.send_error(*out, name, e);
    };
    if (name == "/v1/responses/{id}/cancel") {
      if (!m.responses.get(response_id)) return not_found();
      return m.send_error(*out, name, bad_request("only background responses can be cancelled; this server runs none "
                                                  "(this one has completed)"));
    }
    if (req.method == "DELETE") {
      if (!m.responses.erase(response_id)) return not_found();
      return m.send_json(*out, name, 200,
                         Json{{"id", response_id}, {"object", "response.deleted"}, {"deleted", true}});
    }
    auto e = m.responses.get(response_id);
    if (!e) return not_found();
    return m.send_json(*out, name, 200, e->response);
  }
  if (name == "/health" || name == "/health_generate") return m.handle_health(out, name);
  if (name == "/v1/tokenize") return m.handle_tokenize(req, *out, name);
  if (name == "/v1/detokenize") return m.handle_detokenize(req, *out, name);
  if (name == "/v1/models") {
    Json list = Json::object();
    list["object"] = "list";
    list["data"] = Json::array({m.models_entry()});
    return m.send_json(*out, name, 200, list);
  }
  if (name == "/v1/models/{model}") {
    if (model_suffix != m.opt.served_model_name) return m.send_error(*out, name, m.model_not_found(model_suffix));
    return m.send_json(*out, name, 200, m.models_entry());
  }
  if (name == "/get_model_info") {
    Json info = Json::object();
    info["model_path"] = m.opt.model_path;
    info["tokenizer_path"] = m.tok ? Json(m.opt.tokenizer_path) : Json(nullptr);
    info["served_model_name"] = m.opt.served_model_name;
    info["is_generation"] = true;
    info["preferred_sampling_params"] =
        m.opt.preferred_sampling_params.empty() ? Json(nullptr) : m.opt.preferred_sampling_params;
    info["weight_version"] = m.weight_version();
    info["max_context_length"] = m.engine->context_length();
    return m.send_json(*out, name, 200, info);
  }
  if (name == "/get_server_info" || name == "/server_info") return m.send_json(*out, name, 200, m.server_info());
  if (name == "/get_load") {  // SGLang's shape, one entry a data-parallel rank (what routers poll)
    const EngineStats st = m.engine->stats();
    Json rank = Json::object();
    rank["dp_rank"] = 0;
    rank["num_reqs"] = st.num_running + st.num_waiting;
    rank["num_waiting_reqs"] = st.num_waiting;
    rank["num_tokens"] = st.used_tokens;
    return m.send_json(*out, name, 200, Json::array({rank}));
  }
  if (name == "/flush_cache") {
    Status st = m.engine->flush_cache();
    if (!st) return m.send_error(*out, name, bad_request("cache not flushed: " + st.message()));
    return m.send_text(*out, name, 200, "Cache flushed.\n");
  }
  if (name == "/metrics") {
    return m.send_text(*out, name, 200, m.metrics.render(m.engine->stats(), m.opt.served_model_name),
                       "text/plain; version=0.0.4; charset=utf-8");
  }
  if (name == "/separate_reasoning" || name == "/parse_function_call") {
    Json body, result;
    if (auto e = parse_json_body(req.body, &body)) return m.send_error(*out, name, *e);
    if (auto e = name == "/separate_reasoning" ? separate_reasoning(body, &result) : parse_function_call(body, &result))
      return m.send_error(*out, name, *e);
    return m.send_json(*out, name, 200, result);
  }
  if (name == "/abort_request") {  // SGLang's AbortReq: {"rid": ...} or {"abort_all": true}
    Json body;
    if (auto e = parse_json_body(req.body, &body)) return m.send_error(*out, name, *e);
    const bool all = body.contains("abort_all") && body["abort_all"].is_boolean() && body["abort_all"].get<bool>();
    if (body.contains("abort_all") && !body["abort_all"].is_boolean() && !body["abort_all"].is_null())
      return m.send_error(*out, name, bad_request("'abort_all' must be a boolean", "abort_all"));
    if (all) {
      m.engine->abort_all();
      return m.send_text(*out, name, 200, "");
    }
    if (!body.contains("rid") || !body["rid"].is_string())
      return m.send_error(*out, name, bad_request("'rid' (a string) is required, or 'abort_all': true", "rid"));
    m.engine->abort(body["rid"].get<std::string>());
    return m.send_text(*out, name, 200, "");
  }
  if (name == "/pause_generation" || name == "/continue_generation") {
    const bool pause = name == "/pause_generation";
    PauseMode mode = PauseMode::kAbort;
    if (pause) {
      if (auto e = parse_pause_mode(req.body, &mode)) return m.send_error(*out, name, *e);
      m.engine->pause(mode);
    } else {
      m.engine->resume();
    }
    Json r = Json::object();
    r["message"] = pause ? "Generation paused successfully." : "Generation continued successfully.";
    r["status"] = "ok";
    return m.send_json(*out, name, 200, r);
  }
  if (name == "/start_profile") {  // SGLang's answers: plain text
    ProfileOptions options;
    if (auto e = parse_profile_request(req.body, &options)) return m.send_error(*out, name, *e);
    if (Status s = m.engine->start_profile(options); !s.is_ok())
      return m.send_error(*out, name, bad_request(s.message(), ""));
    return m.send_text(*out, name, 200, "Start profiling.\n");
  }
  if (name == "/stop_profile") {
    std::vector<std::string> paths;
    if (Status s = m.engine->stop_profile(&paths); !s.is_ok())
      return m.send_error(*out, name, bad_request(s.message(), ""));
    std::string text = "Stop profiling. This will take some time.\n";
    for (const std::string& p : paths) text += "Profile written to " + p + "\n";
    return m.send_text(*out, name, 200, text);
  }
  if (name == "/start_expert_distribution_record" || name == "/stop_expert_distribution_record" ||
      name == "/dump_expert_distribution_record") {  // SGLang's answers: plain text
    const ExpertRecordOp op = name == "/start_expert_distribution_record"  ? ExpertRecordOp::kStart
                              : name == "/stop_expert_distribution_record" ? ExpertRecordOp::kStop
                                                                            : ExpertRecordOp::kDump;
    std::string path;
    if (Status s = m.engine->expert_distribution(op, &path); !s.is_ok())
      return m.send_error(*out, name, bad_request(s.message(), ""));
    return m.send_text(*out, name, 200,
                       op == ExpertRecordOp::kStart  ? "Start recording the expert distribution.\n"
                       : op == ExpertRecordOp::kStop ? "Stop recording the expert distribution.\n"
                                                     : "Dump expert distribution record.\nWritten to " + path + "\n");
  }
  if (name == "/update_weights_from_disk") {  // SGLang's answer: {success, message, num_paused_requests}
    const auto answer = [](bool ok, const std::string& message) {
      return Json{{"success", ok}, {"message", message}, {"num_paused_requests", 0}};
    };
    UpdateWeightsRequest u;
    if (auto e = parse_update_weights_request(req.body, &u)) return m.send_json(*out, name, 400, answer(false, e->message));
    auto self = m.shared_from_this();
    const bool queued = m.admin_pool->post([self, out, u, name, answer] {
      if (!self->admin_enter()) {
        out->post([self, out, name, answer] { self->send_json(*out, name, 503, answer(false, "the server is shutting down")); });
        return;
      }
      if (u.abort_all_requests) self->engine->abort_all();
      const Status st = self->engine->update_weights_from_disk(u.model_path, u.flush_cache, u.keep_pause);
      self->admin_leave();
      if (st.is_ok() && !u.weight_version.empty()) {
        std::lock_guard<std::mutex> lock(self->weight_version_mu);
        self->weight_version_ = u.weight_version;
      }
      out->post([self, out, name, st, answer] {
        self->send_json(*out, name, st.is_ok() ? 200 : 400,
                        answer(st.is_ok(), st.is_ok() ? "Succeeded to update model weights." : st.message()));
      });
    });
    if (!queued) return m.send_json(*out, name, 503, answer(false, "weight updates are queued already; retry"));
    return;
  }
  if (name == "/open_session") {  // SGLang's OpenSessionReqInput; answers the session id as a JSON string
    Json body = Json::object();
    if (!req.body.empty())
      if (auto e = parse_json_body(req.body, &body)) return m.send_error(*out, name, *e);
    std::string id;
    if (auto e = parse_open_session(body, &id)) return m.send_error(*out, name, *e);
    Result<std::string> sid = m.sessions.open(id);
    if (!sid) return m.send_error(*out, name, bad_request(sid.status().message(), "session_id"));
    return m.send_json(*out, name, 200, Json(sid.value()));
  }
  if (name == "/close_session") {  // SGLang's CloseSessionReqInput: {"session_id": ...}
    Json body;
    if (auto e = parse_json_body(req.body, &body)) return m.send_error(*out, name, *e);
    if (!body.is_object() || !body.contains("session_id") || !body["session_id"].is_string())
      return m.send_error(*out, name, bad_request("'session_id' (a string) is required", "session_id"));
    const std::string id = body["session_id"].get<std::string>();
    if (!m.sessions.close(id))
      return m.send_error(*out, name, bad_request("session '" + id + "' is not open", "session_id"));
    return m.send_text(*out, name, 200, "");
  }
  m.send_error(*out, name, make_error(404, "no route " + path, "invalid_request_error", "not_found"));
}

}  // namespace ds
