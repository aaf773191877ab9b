// libFuzzer target: raw bytes -> the server's HTTP/1.1 parser (parse_http_request: Beast with the server's
// limits and request conversion) -> the API router and handlers over a FakeEngine -> a response. Every input
// must end in a well-formed answer: a parser error (400/413/431), or a response whose status is one the
// server knows and whose body is JSON (an error object for 4xx/5xx) or an SSE stream. Never a crash or hang.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/api_server.h"
#include "http/fake_engine.h"
#include "http/http_server.h"
#include "http/http_test_util.h"
#include "text/tokenizer.h"

namespace {

void require(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "fuzz_http: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

// The connection's strand: posted functions queue here and run on the fuzzing thread. One for the whole run,
// so that a late event of a finished input runs (and frees its job) during the next one.
struct Strand {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
};

class FuzzResponder : public ds::HttpResponder {
 public:
  explicit FuzzResponder(std::shared_ptr<Strand> strand) : strand_(std::move(strand)) {}
  void post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(strand_->mu);
    strand_->q.push_back(std::move(fn));
    strand_->cv.notify_one();
  }
  void post_after(std::chrono::milliseconds, std::function<void()>) override {}  // timeouts never fire here
  void respond(int status, std::string_view content_type, std::string body, const ds::HttpHeaders&) override {
    require(!done && !streaming, "respond() once, before any stream");
    this->status = status;
    this->content_type = std::string(content_type);
    this->body = std::move(body);
    done = true;
    on_disconnect_ = nullptr;
  }
  void start_stream(int status, std::string_view content_type, const ds::HttpHeaders&) override {
    require(!done && !streaming, "start_stream() once");
    this->status = status;
    this->content_type = std::string(content_type);
    streaming = true;
  }
  void stream_write(std::string data) override {
    require(streaming && !done, "stream_write() inside a stream");
    body += data;
  }
  void stream_end() override {
    require(streaming && !done, "stream_end() once");
    done = true;
    on_disconnect_ = nullptr;
  }
  void set_on_disconnect(std::function<void()> fn) override { on_disconnect_ = std::move(fn); }
  bool disconnected() const override { return gone_; }
  // The client leaves (a request that runs too long for a fuzz input).
  void leave() {
    gone_ = true;
    if (auto fn = std::move(on_disconnect_)) fn();
  }

  int status = 0;
  std::string content_type;
  std::string body;
  bool streaming = false;
  bool done = false;

 private:
  std::shared_ptr<Strand> strand_;
  std::function<void()> on_disconnect_;
  bool gone_ = false;
};

struct Server {
  std::unique_ptr<ds::Tokenizer> tok;
  std::unique_ptr<ds::FakeEngine> engine;
  std::unique_ptr<ds::ApiServer> api;
  ds::HttpServerOptions http;

  Server() {
    auto t = ds::Tokenizer::from_json_text(ds::testing::tiny_tokenizer_json(), ds::testing::tiny_tokenizer_config_json());
    require(t.is_ok(), "tiny tokenizer loads");
    tok = std::make_unique<ds::Tokenizer>(std::move(t.value()));
    ds::FakeEngineOptions fo;
    fo.vocab_size = 258;
    fo.output_vocab = 128;
    fo.eos_token_ids = {257};
    fo.context_length = 48;  // bounds every generation (prompt + max_new_tokens) to a few steps
    fo.max_total_tokens = 4096;
    fo.step_us = 0;
    engine = std::make_unique<ds::FakeEngine>(fo);
    ds::ApiServerOptions ao;
    ao.model_path = "/models/tiny";
    ao.served_model_name = "tiny";
    ao.chat_template = "v3";
    ao.enable_metrics = true;
    ao.max_queued_requests = 64;
    api = std::make_unique<ds::ApiServer>(ao);
    require(api->init().is_ok(), "api init");
    require(api->set_backend(engine.get(), tok.get()).is_ok(), "api backend");
    http.max_body_bytes = 1 << 16;
    http.max_header_bytes = 8 << 10;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* server = new Server();  // lives for the whole run (the engine thread too)
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  ds::ParsedHttpRequest p = ds::parse_http_request(raw, server->http);
  if (p.incomplete) return 0;  // the server waits for more bytes, then the connection times out
  if (p.status != 0) {
    require(p.status == 400 || p.status == 413 || p.status == 431, "parser error status", std::to_string(p.status));
    require(!p.message.empty(), "parser error message");
    return 0;
  }
  static auto strand = std::make_shared<Strand>();
  auto out = std::make_shared<FuzzResponder>(strand);
  server->api->handle(std::move(p.request), out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool left = false;
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(strand->mu);
      if ((out->done || left) && strand->q.empty() && server->engine->num_live() == 0) break;
      if (!strand->cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return !strand->q.empty(); })) {
        if (!left && std::chrono::steady_clock::now() > deadline) {
          lock.unlock();
          out->leave();  // never expected: the FakeEngine's context bound ends every request quickly
          left = true;
        }
        continue;
      }
      fn = std::move(strand->q.front());
      strand->q.pop_front();
    }
    fn();
  }
  require(left || out->done, "a response completes");
  if (!out->done) return 0;
  require(std::strcmp(ds::http_reason(out->status), "Unknown") != 0, "known status", std::to_string(out->status));
  if (out->streaming) {
    require(out->status == 200, "streams start with 200");
    require(out->body.empty() || out->body.rfind("data: ", 0) == 0, "SSE framing", out->body.substr(0, 80));
    return 0;
  }
  if (out->content_type == "application/json") {
    nlohmann::json j = nlohmann::json::parse(out->body, nullptr, false);
    require(!j.is_discarded(), "JSON body", out->body.substr(0, 200));
    if (out->status >= 400) require(j.is_object() && j.contains("error"), "error object", out->body.substr(0, 200));
  }
  return 0;
}
