// The HTTP API end to end in one process: HttpServer + ApiServer + FakeEngine + a tiny byte tokenizer, driven
// by a raw socket client. Expected outputs come from the FakeEngine recurrence and byte decoding, computed here.
#include "http/api_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <numeric>
#include <thread>

#include "http/api_request.h"
#include "http/fake_engine.h"
#include "http/http_server.h"
#include "http/http_test_util.h"

namespace ds {
namespace {

using testing::http_call;
using testing::HttpReply;
using testing::sse_events;
using testing::TestConnection;

constexpr int64_t kVocab = 128;  // FakeEngine ids stay ASCII: one byte of text per token

// The FakeEngine continuation of `last` (its recurrence), n tokens.
std::vector<int32_t> continuation(int32_t last, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(last = FakeEngine::next_token(last, kVocab));
  return out;
}
std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += static_cast<char>(id);
  return s;
}

struct TestSetup {
  FakeEngineOptions engine;
  ApiServerOptions api;
  bool tokenizer = true;
  size_t max_body = 1 << 20;
};

class ApiServerTest : public ::testing::Test {
 protected:
  void start(TestSetup s = {}) {
    dir_ = std::filesystem::temp_directory_path() / ("dserve_http_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << testing::tiny_tokenizer_json();
    std::ofstream(dir_ / "tokenizer_config.json") << testing::tiny_tokenizer_config_json();
    if (s.tokenizer) {
      auto t = Tokenizer::load(dir_.string());
      ASSERT_TRUE(t.is_ok()) << t.status().message();
      tok_ = std::make_unique<Tokenizer>(std::move(t.value()));
    }
    if (s.engine.vocab_size == FakeEngineOptions().vocab_size) s.engine.vocab_size = 258;  // the tiny tokenizer's
    if (s.engine.output_vocab == 0) s.engine.output_vocab = kVocab;
    s.engine.eos_token_ids = {257};
    s.engine.step_us = s.engine.step_us == FakeEngineOptions().step_us ? 500 : s.engine.step_us;
    engine_ = std::make_unique<FakeEngine>(s.engine);
    if (s.api.served_model_name.empty()) s.api.served_model_name = "tiny";
    s.api.model_path = "/models/tiny";
    s.api.tokenizer_path = dir_.string();
    if (s.api.chat_template.empty()) s.api.chat_template = "v3";
    api_ = std::make_unique<ApiServer>(s.api);
    ASSERT_TRUE(api_->init().is_ok());
    ASSERT_TRUE(api_->set_backend(engine_.get(), tok_.get()).is_ok());
    HttpServerOptions ho;
    ho.port = 0;
    ho.io_threads = 2;
    ho.max_body_bytes = s.max_body;
    server_ = std::make_unique<HttpServer>(ho, [this](HttpRequest r, std::shared_ptr<HttpResponder> o) {
      api_->handle(std::move(r), std::move(o));
    });
    ASSERT_TRUE(server_->start().is_ok());
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->stop();
    engine_.reset();
    server_.reset();
    api_.reset();
    std::filesystem::remove_all(dir_);
  }
  HttpReply post(const std::string& path, const std::string& body, std::vector<std::string> headers = {}) {
    headers.push_back("Content-Type: application/json");
    return http_call(port_, "POST", path, body, headers);
  }
  Json post_json(const std::string& path, const std::string& body, int expect_status = 200) {
    HttpReply r = post(path, body);
    EXPECT_EQ(r.status, expect_status) << path << " " << body << " -> " << r.body;
    Json j = Json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }
  // A request that must succeed: the server still serves after a bad one.
  void expect_still_serving() {
    Json j = post_json("/generate", R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}})");
    EXPECT_EQ(j["output_ids"].size(), 2u);
  }
  bool wait_for(const std::function<bool()>& cond, int ms = 5000) {
    for (int i = 0; i < ms / 10; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return cond();
  }

  std::filesystem::path dir_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(ApiServerTest, GenerateInputIds) {
  start();
  Json j = post_json("/generate", R"({"input_ids": [3, 4, 5], "sampling_params": {"max_new_tokens": 6, "temperature": 0}})");
  const auto expected = continuation(5, 6);
  EXPECT_EQ(j["output_ids"].get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(j["text"], bytes_of(expected));
  EXPECT_EQ(j["meta_info"]["finish_reason"]["type"], "length");
  EXPECT_EQ(j["meta_info"]["finish_reason"]["length"], 6);
  EXPECT_EQ(j["meta_info"]["prompt_tokens"], 3);
  EXPECT_EQ(j["meta_info"]["completion_tokens"], 6);
  EXPECT_EQ(j["meta_info"]["cached_tokens"], 0);
  EXPECT_TRUE(j["meta_info"]["e2e_latency"].is_number());
  EXPECT_TRUE(j["meta_info"]["id"].is_string());
}

TEST_F(ApiServerTest, GenerateTextPromptGetsBos) {
  start();
  Json j = post_json("/generate", R"({"text": "hi", "sampling_params": {"max_new_tokens": 4}})");
  EXPECT_EQ(j["meta_info"]["prompt_tokens"], 3);  // BOS + 'h' + 'i'
  EXPECT_EQ(j["text"], bytes_of(continuation('i', 4)));
}

TEST_F(ApiServerTest, StopStringTrimsAndFinishesInEngine) {
  start();
  const auto ids = continuation('i', 60);
  const std::string full = bytes_of(ids);
  const std::string stop = full.substr(20, 3);
  const size_t at = full.find(stop);
  Json j = post_json("/generate", R"({"text": "hi", "sampling_params": {"max_new_tokens": 60, "stop": )" +
                                      Json(stop).dump() + "}}");
  EXPECT_EQ(j["text"], full.substr(0, at));
  EXPECT_EQ(j["meta_info"]["finish_reason"]["type"], "stop");
  EXPECT_EQ(j["meta_info"]["finish_reason"]["matched"], stop);
  // Tokens up to the one completing the stop string (one byte per token).
  EXPECT_EQ(j["output_ids"].size(), at + stop.size());
  EXPECT_EQ(j["meta_info"]["completion_tokens"], at + stop.size());
  EXPECT_EQ(engine_->num_stop_finishes(), 1u);

  Json k = post_json("/generate", R"({"text": "hi", "sampling_params": {"max_new_tokens": 60, "no_stop_trim": true,
      "stop": )" + Json(stop).dump() + "}}");
  EXPECT_EQ(k["text"], full.substr(0, at + stop.size()));
}

TEST_F(ApiServerTest, StopTokenIdIsTrimmedFromText) {
  start();
  const auto ids = continuation(5, 40);
  const int32_t stop_id = ids[7];
  const size_t first = std::find(ids.begin(), ids.end(), stop_id) - ids.begin();
  Json j = post_json("/generate", R"({"input_ids": [5], "sampling_params": {"max_new_tokens": 40, "stop_token_ids": [)" +
                                      std::to_string(stop_id) + "]}}");
  EXPECT_EQ(j["output_ids"].size(), first + 1);
  EXPECT_EQ(j["output_ids"].back(), stop_id);
  EXPECT_EQ(j["text"], bytes_of(std::vector<int32_t>(ids.begin(), ids.begin() + first)));
  EXPECT_EQ(j["meta_info"]["finish_reason"]["matched"], stop_id);
}

TEST_F(ApiServerTest, GenerateStreamIsCumulativeAndEndsWithDone) {
  start();
  HttpReply r = post("/generate", R"({"input_ids": [9], "stream": true, "sampling_params": {"max_new_tokens": 12}})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const std::string full = bytes_of(continuation(9, 12));
  std::string prev;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    const std::string text = c["text"];
    EXPECT_EQ(full.compare(0, text.size(), text), 0) << "chunk text is not a prefix of the output";
    EXPECT_GE(text.size(), prev.size());
    prev = text;
    EXPECT_EQ(c["output_ids"].size(), text.size());
    if (i + 2 < events.size()) {
      EXPECT_TRUE(c["meta_info"]["finish_reason"].is_null());
    }
  }
  EXPECT_EQ(prev, full);
  EXPECT_EQ(Json::parse(events[events.size() - 2])["meta_info"]["finish_reason"]["type"], "length");
}

// --stream-interval 4: a chunk for the first token, then every 4 tokens, then the end (SGLang's stream_output).
TEST_F(ApiServerTest, StreamIntervalSpacesTheChunks) {
  TestSetup setup;
  setup.api.stream_interval = 4;
  start(setup);
  HttpReply r = post("/generate", R"({"input_ids": [9], "stream": true, "sampling_params": {"max_new_tokens": 12}})");
  ASSERT_EQ(r.status, 200);
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<size_t> sizes;
  for (size_t i = 0; i + 1 < events.size(); ++i) sizes.push_back(Json::parse(events[i])["output_ids"].size());
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 5, 9, 12}));
  EXPECT_EQ(Json::parse(events[events.size() - 2])["text"], bytes_of(continuation(9, 12)));
  // The chat stream's deltas still add up to the whole answer.
  HttpReply c = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10,
      "stream": true})");
  std::string streamed;
  size_t chunks = 0;
  for (const std::string& e : sse_events(c.body)) {
    if (e == "[DONE]") break;
    const Json chunk = Json::parse(e);
    const Json& d = chunk["choices"][0]["delta"];
    if (d.contains("content") && !d["content"].get<std::string>().empty()) {  // not the opening role chunk
      streamed += d["content"].get<std::string>();
      ++chunks;
    }
  }
  EXPECT_EQ(streamed.size(), 10u) << c.body;
  EXPECT_EQ(chunks, 4u);  // tokens 1, 5, 9 and the end, not ten
}

// --incremental-streaming-output: /generate chunks carry the new text and ids only; meta_info stays cumulative.
TEST_F(ApiServerTest, IncrementalStreamingOutputSendsDisjointPieces) {
  TestSetup setup;
  setup.api.incremental_streaming_output = true;
  setup.api.stream_interval = 3;
  start(setup);
  HttpReply r = post("/generate", R"({"input_ids": [9], "stream": true, "sampling_params": {"max_new_tokens": 8}})");
  ASSERT_EQ(r.status, 200);
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  std::vector<int32_t> ids;
  std::vector<int> completion_tokens;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    text += c["text"].get<std::string>();
    for (const Json& id : c["output_ids"]) ids.push_back(id.get<int32_t>());
    completion_tokens.push_back(c["meta_info"]["completion_tokens"].get<int>());
  }
  EXPECT_EQ(ids, continuation(9, 8));
  EXPECT_EQ(text, bytes_of(continuation(9, 8)));
  EXPECT_EQ(completion_tokens, (std::vector<int>{1, 4, 7, 8}));
  // Logprobs too: each output token's once over the chunks, the prompt's in the first chunk only.
  HttpReply lr = post("/generate", R"({"input_ids": [9, 4, 2], "stream": true, "return_logprob": true,
      "logprob_start_len": 0, "sampling_params": {"max_new_tokens": 8}})");
  auto levents = sse_events(lr.body);
  std::vector<int32_t> lp_ids;
  size_t input_lps = 0;
  for (size_t i = 0; i + 1 < levents.size(); ++i) {
    Json c = Json::parse(levents[i]);
    for (const Json& t : c["meta_info"]["output_token_logprobs"]) lp_ids.push_back(t[1].get<int32_t>());
    if (i > 0) {
      EXPECT_TRUE(c["meta_info"]["input_token_logprobs"].empty()) << levents[i];
    } else {
      input_lps = c["meta_info"]["input_token_logprobs"].size();
    }
  }
  EXPECT_EQ(lp_ids, continuation(2, 8));
  EXPECT_EQ(input_lps, 3u);
  // Without streaming the answer is whole.
  Json j = post_json("/generate", R"({"input_ids": [9], "sampling_params": {"max_new_tokens": 8}})");
  EXPECT_EQ(j["text"], bytes_of(continuation(9, 8)));
}

// --sampling-defaults model: chat requests take the generation_config's values where they set none; /generate and
// /v1/completions keep the protocol's (as SGLang).
TEST_F(ApiServerTest, ChatTakesTheModelsSamplingDefaults) {
  TestSetup setup;
  setup.api.chat_sampling_defaults.temperature = 0.6f;
  setup.api.chat_sampling_defaults.top_p = 0.95f;
  start(setup);
  post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})");
  SamplingParams got = engine_->last_sampling();
  EXPECT_FLOAT_EQ(got.temperature, 0.6f);
  EXPECT_FLOAT_EQ(got.top_p, 0.95f);
  post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
      "temperature": 0.2})");
  got = engine_->last_sampling();
  EXPECT_FLOAT_EQ(got.temperature, 0.2f);
  EXPECT_FLOAT_EQ(got.top_p, 0.95f);
  post_json("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2})");
  EXPECT_FLOAT_EQ(engine_->last_sampling().temperature, 1.0f);
  post_json("/generate", R"({"text": "Hi", "sampling_params": {"max_new_tokens": 2}})");
  EXPECT_FLOAT_EQ(engine_->last_sampling().temperature, 1.0f);
  EXPECT_FLOAT_EQ(engine_->last_sampling().top_p, 1.0f);
}

// --log-requests: a line a finished sequence, with sampling and (cut) text at level 2; nothing without the flag.
TEST_F(ApiServerTest, LogRequestsWritesALineAFinishedSequence) {
  TestSetup setup;
  setup.api.log_requests_level = 2;
  start(setup);
  ::testing::internal::CaptureStderr();
  post_json("/generate", R"({"text": "Hi", "rid": "req-7", "sampling_params": {"max_new_tokens": 3,
      "temperature": 0.5}})");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("Finish: /generate rid=req-7 prompt_tokens=3 completion_tokens=3 finish=length"),
            std::string::npos) << log;
  EXPECT_NE(log.find("temperature=0.5"), std::string::npos) << log;
  EXPECT_NE(log.find("prompt=\"Hi\" output="), std::string::npos) << log;
}

TEST_F(ApiServerTest, NoRequestLogByDefault) {
  start();
  ::testing::internal::CaptureStderr();
  post_json("/generate", R"({"text": "Hi", "sampling_params": {"max_new_tokens": 2}})");
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("Finish:"), std::string::npos);
}

// --preferred-sampling-params: /generate requests take its keys where they give none; /get_model_info shows it.
TEST_F(ApiServerTest, GenerateTakesPreferredSamplingParams) {
  TestSetup setup;
  setup.api.preferred_sampling_params = Json{{"temperature", 0.25}, {"max_new_tokens", 3}};
  start(setup);
  Json j = post_json("/generate", R"({"input_ids": [9]})");
  EXPECT_EQ(j["output_ids"].size(), 3u);
  EXPECT_FLOAT_EQ(engine_->last_sampling().temperature, 0.25f);
  post_json("/generate", R"({"input_ids": [9], "sampling_params": {"temperature": 0.5, "max_new_tokens": 2}})");
  EXPECT_FLOAT_EQ(engine_->last_sampling().temperature, 0.5f);
  Json info = Json::parse(http_call(port_, "GET", "/get_model_info").body);
  EXPECT_EQ(info["preferred_sampling_params"]["max_new_tokens"], 3);
}

TEST_F(ApiServerTest, StreamNeverShowsAStopStringPrefixThatMatches) {
  start();
  const std::string full = bytes_of(continuation(9, 80));
  const std::string stop = full.substr(30, 4);
  HttpReply r = post("/generate", R"({"input_ids": [9], "stream": true, "sampling_params": {"max_new_tokens": 80,
      "stop": )" + Json(stop).dump() + "}}");
  ASSERT_EQ(r.status, 200);
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 2u);
  for (size_t i = 0; i + 1 < events.size(); ++i)
    EXPECT_EQ(Json::parse(events[i])["text"].get<std::string>().find(stop), std::string::npos);
  EXPECT_EQ(Json::parse(events[events.size() - 2])["text"], full.substr(0, full.find(stop)));
}

TEST_F(ApiServerTest, ClientDisconnectMidStreamAbortsTheRequest) {
  TestSetup s;
  s.engine.context_length = 1 << 20;
  start(s);
  TestConnection c(port_);
  ASSERT_TRUE(c.send_request("POST", "/generate",
                             R"({"input_ids": [1], "stream": true, "sampling_params": {"max_new_tokens": 500000}})"));
  ASSERT_EQ(c.read_status_and_headers(), 200);
  EXPECT_FALSE(c.read_some().empty());
  ASSERT_TRUE(wait_for([&] { return engine_->num_live() == 1; }));
  // /get_load (SGLang's shape) counts the running request and its tokens.
  Json load = Json::parse(http_call(port_, "GET", "/get_load").body);
  ASSERT_TRUE(load.is_array() && load.size() == 1) << load.dump();
  EXPECT_EQ(load[0]["dp_rank"], 0);
  EXPECT_EQ(load[0]["num_reqs"], 1);
  EXPECT_EQ(load[0]["num_waiting_reqs"], 0);
  EXPECT_GE(load[0]["num_tokens"].get<int64_t>(), 2);
  c.close();
  EXPECT_TRUE(wait_for([&] { return engine_->num_aborts() == 1 && engine_->num_live() == 0; }))
      << "aborts=" << engine_->num_aborts() << " live=" << engine_->num_live();
  EXPECT_EQ(engine_->stats().used_tokens, 0);
  EXPECT_EQ(Json::parse(http_call(port_, "GET", "/get_load").body)[0]["num_reqs"], 0);
  expect_still_serving();
}

TEST_F(ApiServerTest, ClientDisconnectWhileWaitingForNonStreamingResponseAborts) {
  TestSetup s;
  s.engine.context_length = 1 << 20;
  start(s);
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", R"({"prompt": [1, 2], "max_tokens": 500000})"));
    ASSERT_TRUE(wait_for([&] { return engine_->num_live() == 1; }));
  }
  EXPECT_TRUE(wait_for([&] { return engine_->num_aborts() == 1 && engine_->num_live() == 0; }));
  expect_still_serving();
}

TEST_F(ApiServerTest, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing) {
  TestSetup s;
  s.engine.context_length = 64;
  start(s);
  struct Case {
    const char* path;
    std::string body;
    int status;
  };
  const Case cases[] = {
      {"/generate", "{not json", 400},
      {"/generate", "[1,2]", 400},
      {"/generate", R"({"input_ids": [1], "sampling_params": {"temperature": -1}})", 400},
      {"/generate", R"({"input_ids": [500]})", 400},  // engine: outside the vocabulary
      {"/generate", R"({"input_ids": []})", 400},
      {"/generate", R"({"input_ids": [1], "sampling_params": {"stop_token_ids": [4000]}})", 400},
      {"/generate", "{\"input_ids\": " + Json(std::vector<int>(64, 1)).dump() + "}", 400},  // prompt >= context
      {"/generate", R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 64}})", 400},  // prompt + max > context
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -3})", 400},
      {"/v1/completions", R"({"prompt": "x", "temperature": "warm"})", 400},
      {"/v1/completions", R"({"prompt": "x", "model": "other"})", 404},
      {"/v1/completions", R"({"prompt": "x", "surprise": 1})", 400},
      {"/v1/chat/completions", R"({"messages": []})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1000})", 400},
      {"/v1/nothing", "{}", 404},
  };
  for (const Case& c : cases) {
    HttpReply r = post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body << " -> " << r.body;
    Json j = Json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code"));
    expect_still_serving();
  }
  Json ctx = post_json("/generate", "{\"input_ids\": " + Json(std::vector<int>(64, 1)).dump() + "}", 400);
  EXPECT_EQ(ctx["error"]["code"], "context_length_exceeded");
  // Wrong method, missing content type.
  EXPECT_EQ(http_call(port_, "GET", "/generate").status, 405);
  EXPECT_EQ(http_call(port_, "DELETE", "/v1/models").status, 405);
  EXPECT_EQ(http_call(port_, "POST", "/v1/completions", R"({"prompt": "x"})", {}).status, 400);
  expect_still_serving();
}

TEST_F(ApiServerTest, OversizedBodyGets413) {
  TestSetup s;
  s.max_body = 64 << 10;
  start(s);
  std::string big = R"({"input_ids": [1], "pad": ")" + std::string(100 << 10, 'x') + "\"}";
  HttpReply r = post("/generate", big);
  EXPECT_EQ(r.status, 413);
  expect_still_serving();
}

TEST_F(ApiServerTest, ApiKeyRequiredExceptHealth) {
  TestSetup s;
  s.api.api_key = "sekret";
  start(s);
  EXPECT_EQ(post("/generate", R"({"input_ids": [1]})").status, 401);
  EXPECT_EQ(post("/generate", R"({"input_ids": [1]})", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(post("/generate", R"({"input_ids": [1]})", {"Authorization: Bearer sekret-longer"}).status, 401);
  EXPECT_EQ(http_call(port_, "GET", "/v1/models").status, 401);
  EXPECT_EQ(http_call(port_, "GET", "/health").status, 200);
  HttpReply ok = post("/generate", R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 1}})",
                      {"Authorization: Bearer sekret"});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(http_call(port_, "GET", "/v1/models", "", {"Authorization: Bearer sekret"}).status, 200);
}

TEST_F(ApiServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  start();
  TestConnection c(port_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send_request("POST", "/generate", R"({"input_ids": [7], "sampling_params": {"max_new_tokens": 3}})"));
    HttpReply r = c.read_reply();
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(Json::parse(r.body)["text"], bytes_of(continuation(7, 3)));
  }
  // A streamed response on the same connection, then a plain one again.
  ASSERT_TRUE(c.send_request("POST", "/generate", R"({"input_ids": [7], "stream": true, "sampling_params": {"max_new_tokens": 3}})"));
  HttpReply s = c.read_reply();
  EXPECT_EQ(sse_events(s.body).back(), "[DONE]");
  ASSERT_TRUE(c.send_request("GET", "/v1/models", "", {}));
  EXPECT_EQ(c.read_reply().status, 200);
}

TEST_F(ApiServerTest, ExpectContinueIsAnswered) {
  start();
  TestConnection c(port_);
  const std::string body = R"({"input_ids": [7], "sampling_params": {"max_new_tokens": 2}})";
  ASSERT_TRUE(c.send_raw("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_EQ(c.read_some().rfind("HTTP/1.1 100 Continue", 0), 0u);
  ASSERT_TRUE(c.send_raw(body));
  HttpReply r = c.read_reply();
  EXPECT_EQ(r.status, 200);
}

TEST_F(ApiServerTest, BatchAndParallelSamples) {
  start();
  Json j = post_json("/generate", R"({"input_ids": [[3], [4, 5]], "sampling_params": {"max_new_tokens": 2}})");
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["output_ids"].get<std::vector<int32_t>>(), continuation(3, 2));
  EXPECT_EQ(j[1]["output_ids"].get<std::vector<int32_t>>(), continuation(5, 2));
  EXPECT_EQ(j[1]["meta_info"]["prompt_tokens"], 2);

  Json n = post_json("/generate", R"({"input_ids": [3], "sampling_params": {"max_new_tokens": 2, "n": 3}})");
  ASSERT_TRUE(n.is_array());
  EXPECT_EQ(n.size(), 3u);
  std::set<std::string> ids;
  for (const auto& x : n) ids.insert(x["meta_info"]["id"].get<std::string>());
  EXPECT_EQ(ids.size(), 3u);

  Json c = post_json("/v1/completions", R"({"prompt": ["ab", "c"], "max_tokens": 3, "n": 2})");
  ASSERT_EQ(c["choices"].size(), 4u);
  EXPECT_EQ(c["usage"]["prompt_tokens"], 3 + 2);  // each prompt counted once (with BOS)
  EXPECT_EQ(c["usage"]["completion_tokens"], 12);
  EXPECT_EQ(c["usage"]["total_tokens"], 17);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(c["choices"][i]["index"], i);
  EXPECT_EQ(c["choices"][0]["text"], bytes_of(continuation('b', 3)));
  EXPECT_EQ(c["choices"][3]["text"], bytes_of(continuation('c', 3)));
}

TEST_F(ApiServerTest, CompletionsShapesLogprobsEchoAndStreaming) {
  start();
  Json j = post_json("/v1/completions", R"({"model": "tiny", "prompt": "hey", "max_tokens": 5, "logprobs": 2, "echo": true})");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  const auto out = continuation('y', 5);
  EXPECT_EQ(j["choices"][0]["text"], "hey" + bytes_of(out));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const Json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u + 5u);  // echo: BOS + "hey" + 5 outputs
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // nothing predicts the first prompt token
  EXPECT_FLOAT_EQ(lp["token_logprobs"][4].get<float>(), FakeEngine::token_logprob(out[0]));
  EXPECT_EQ(lp["top_logprobs"][4].size(), 2u);
  EXPECT_EQ(lp["tokens"][4], std::string(1, static_cast<char>(out[0])));

  HttpReply r = post("/v1/completions", R"({"prompt": "hey", "max_tokens": 5, "stream": true,
      "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200);
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, bytes_of(out));
  EXPECT_EQ(finish, "length");
  Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 4);
}

TEST_F(ApiServerTest, ChatCompletionStreamMatchesNonStream) {
  start();
  Json j = post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 7,
      "logprobs": true, "top_logprobs": 1})");
  EXPECT_EQ(j["object"], "chat.completion");
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  const std::string content = msg["content"];
  EXPECT_EQ(content.size(), 7u);
  EXPECT_EQ(j["usage"]["completion_tokens"], 7);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"].size(), 7u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["bytes"].size(), 1u);

  HttpReply r = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 7,
      "stream": true})");
  auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u);
  Json first = Json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("content")) streamed += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(finish, "length");
}

class ScriptedChatTest : public ApiServerTest {
 protected:
  void start_scripted(const std::string& output, const char* reasoning, const char* tools) {
    TestSetup s;
    auto t = Tokenizer::from_json_text(testing::tiny_tokenizer_json(), testing::tiny_tokenizer_config_json());
    ASSERT_TRUE(t.is_ok());
    auto ids = t.value().encode(output, false);
    ASSERT_TRUE(ids.is_ok());
    s.engine.script = ids.value();
    s.engine.script.push_back(257);  // EOS
    s.api.reasoning_parser = reasoning;
    s.api.tool_call_parser = tools;
    start(s);
  }
};

TEST_F(ScriptedChatTest, ReasoningAndContentAreSeparated) {
  start_scripted("Let me think.</think>The answer is 4.", "deepseek-r1", "");
  Json j = post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "2+2?"}], "max_tokens": 100})");
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Let me think.");
  EXPECT_EQ(msg["content"], "The answer is 4.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["matched_stop"], 257);

  HttpReply r = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "2+2?"}], "stream": true})");
  std::string reasoning, content;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    Json c = Json::parse(e);
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(content, "The answer is 4.");
}

TEST_F(ScriptedChatTest, ToolCallsAreParsed) {
  start_scripted(
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      "", "deepseekv3");
  const std::string req = R"({"messages": [{"role": "user", "content": "weather?"}], "tools": [{"type": "function",
      "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})";
  Json j = post_json("/v1/chat/completions", req);
  const Json& msg = j["choices"][0]["message"];
  ASSERT_TRUE(msg["tool_calls"].is_array()) << j.dump();
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(msg["content"].is_null());

  Json streamed_req = Json::parse(req);
  streamed_req["stream"] = true;
  HttpReply r = post("/v1/chat/completions", streamed_req.dump());
  int calls = 0;
  std::string finish;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    Json c = Json::parse(e);
    if (c["choices"][0]["delta"].contains("tool_calls")) {
      calls += static_cast<int>(c["choices"][0]["delta"]["tool_calls"].size());
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
    }
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ApiServerTest, InfoEndpointsMetricsAndTokenize) {
  TestSetup s;
  s.api.enable_metrics = true;
  s.engine.context_length = 1000;
  start(s);
  Json models = Json::parse(http_call(port_, "GET", "/v1/models").body);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["max_model_len"], 1000);
  EXPECT_EQ(http_call(port_, "GET", "/v1/models/tiny").status, 200);
  EXPECT_EQ(http_call(port_, "GET", "/v1/models/other").status, 404);
  EXPECT_EQ(http_call(port_, "GET", "/health").status, 200);
  EXPECT_EQ(http_call(port_, "GET", "/health_generate").status, 200);
  Json info = Json::parse(http_call(port_, "GET", "/get_model_info").body);
  EXPECT_EQ(info["model_path"], "/models/tiny");
  EXPECT_EQ(info["is_generation"], true);
  Json server = Json::parse(http_call(port_, "GET", "/get_server_info").body);
  EXPECT_EQ(server["internal_states"][0]["context_length"], 1000);
  EXPECT_EQ(server["internal_states"][0]["max_running_requests"], 0);  // the fake engine's "unbounded"
  EXPECT_EQ(http_call(port_, "POST", "/flush_cache").status, 200);

  Json sr = post_json("/separate_reasoning", R"({"text": "a</think>b", "reasoning_parser": "deepseek-r1"})");
  EXPECT_EQ(sr["reasoning_text"], "a");
  EXPECT_EQ(sr["text"], "b");
  post_json("/parse_function_call", R"({"text": "x", "tool_call_parser": "deepseekv3"})", 400);  // no tools

  Json t = post_json("/v1/tokenize", R"({"prompt": "ab"})");
  EXPECT_EQ(t["tokens"], Json::array({256, 'a', 'b'}));
  EXPECT_EQ(t["count"], 3);
  Json d = post_json("/v1/detokenize", R"({"tokens": [104, 105]})");
  EXPECT_EQ(d["text"], "hi");

  post_json("/generate", R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4}})");
  post_json("/generate", R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 5}})");
  HttpReply m = http_call(port_, "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  // Totals count API requests (the two above; health checks are not requests).
  EXPECT_NE(m.body.find("sglang:prompt_tokens_total{model_name=\"tiny\"} 5\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("sglang:generation_tokens_total{model_name=\"tiny\"} 9\n"), std::string::npos);
  EXPECT_NE(m.body.find("sglang:time_to_first_token_seconds_count{model_name=\"tiny\"} 2\n"), std::string::npos);
  EXPECT_NE(m.body.find("sglang:inter_token_latency_seconds_count{model_name=\"tiny\"} 7\n"), std::string::npos);
  EXPECT_NE(m.body.find("sglang:num_running_reqs"), std::string::npos);
  EXPECT_NE(m.body.find("sglang:cache_hit_rate"), std::string::npos);
}

TEST_F(ApiServerTest, MetricsAreOffByDefaultAndSkipTokenizerNeedsIds) {
  TestSetup s;
  s.tokenizer = false;
  start(s);
  EXPECT_EQ(http_call(port_, "GET", "/metrics").status, 404);
  Json j = post_json("/generate", R"({"input_ids": [3], "sampling_params": {"max_new_tokens": 3}})");
  EXPECT_EQ(j["text"], "");
  EXPECT_EQ(j["output_ids"].get<std::vector<int32_t>>(), continuation(3, 3));
  EXPECT_EQ(post("/generate", R"({"text": "hello"})").status, 400);
  EXPECT_EQ(post("/generate", R"({"input_ids": [3], "sampling_params": {"stop": "x"}})").status, 400);
  EXPECT_EQ(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})").status, 400);
  Json c = post_json("/v1/completions", R"({"prompt": [3], "max_tokens": 2})");
  EXPECT_EQ(c["usage"]["completion_tokens"], 2);
}

TEST_F(ApiServerTest, GenerateLogprobs) {
  start();
  Json j = post_json("/generate", R"({"input_ids": [3, 4, 5], "return_logprob": true, "logprob_start_len": 0,
      "top_logprobs_num": 2, "return_text_in_logprobs": true, "sampling_params": {"max_new_tokens": 3}})");
  const Json& m = j["meta_info"];
  ASSERT_EQ(m["input_token_logprobs"].size(), 3u);
  EXPECT_TRUE(m["input_token_logprobs"][0][0].is_null());
  EXPECT_EQ(m["input_token_logprobs"][1][1], 4);
  ASSERT_EQ(m["output_token_logprobs"].size(), 3u);
  const auto out = continuation(5, 3);
  EXPECT_FLOAT_EQ(m["output_token_logprobs"][0][0].get<float>(), FakeEngine::token_logprob(out[0]));
  EXPECT_EQ(m["output_token_logprobs"][0][1], out[0]);
  EXPECT_EQ(m["output_token_logprobs"][0][2], std::string(1, static_cast<char>(out[0])));
  EXPECT_EQ(m["output_top_logprobs"][0].size(), 2u);
}

TEST_F(ApiServerTest, OverloadedServerAnswers503) {
  TestSetup s;
  s.engine.max_running = 1;
  s.engine.context_length = 1 << 20;
  s.api.max_queued_requests = 1;
  start(s);
  // One running, one waiting: the queue is full.
  TestConnection a(port_), b(port_);
  ASSERT_TRUE(a.send_request("POST", "/generate", R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 100000}})"));
  ASSERT_TRUE(b.send_request("POST", "/generate", R"({"input_ids": [2], "sampling_params": {"max_new_tokens": 100000}})"));
  ASSERT_TRUE(wait_for([&] { return engine_->stats().num_waiting == 1; }));
  HttpReply r = post("/generate", R"({"input_ids": [3], "sampling_params": {"max_new_tokens": 1}})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["type"], "service_unavailable");
  EXPECT_EQ(r.headers["retry-after"], "1");
  a.close();
  b.close();
  ASSERT_TRUE(wait_for([&] { return engine_->num_live() == 0; }));
  expect_still_serving();
}

TEST(ApiServerStartup, AnswersServiceUnavailableUntilReady) {
  ApiServerOptions o;
  o.served_model_name = "x";
  ApiServer api(o);
  ASSERT_TRUE(api.init().is_ok());
  HttpServerOptions ho;
  ho.port = 0;
  ho.io_threads = 1;
  HttpServer server(ho, [&api](HttpRequest r, std::shared_ptr<HttpResponder> out) { api.handle(std::move(r), out); });
  ASSERT_TRUE(server.start().is_ok());
  EXPECT_EQ(http_call(server.port(), "GET", "/health").status, 503);
  EXPECT_EQ(http_call(server.port(), "POST", "/generate", R"({"input_ids": [1]})").status, 503);
  FakeEngine engine(FakeEngineOptions{});
  ASSERT_TRUE(api.set_backend(&engine, nullptr).is_ok());
  EXPECT_EQ(http_call(server.port(), "GET", "/health").status, 200);
  server.stop();
}

TEST(ApiServerInit, RejectsUnknownParserNames) {
  ApiServerOptions o;
  o.reasoning_parser = "nope";
  EXPECT_FALSE(ApiServer(o).init().is_ok());
  ApiServerOptions t;
  t.tool_call_parser = "nope";
  EXPECT_FALSE(ApiServer(t).init().is_ok());
}

// SGLang's /start_profile and /stop_profile: plain-text answers, the trace file (a span a step) in the requested
// directory, errors for the wrong state or a bad option, and the server serving on.
TEST_F(ApiServerTest, StartAndStopProfileWriteAStepTrace) {
  start();
  const std::filesystem::path out_dir = dir_ / "profiles";
  std::filesystem::create_directories(out_dir);
  HttpReply r = http_call(port_, "POST", "/stop_profile");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not in progress"), std::string::npos) << r.body;
  post_json("/start_profile", R"({"output_dir": ")" + (dir_ / "missing").string() + R"("})", 400);
  post_json("/start_profile", R"({"activities": ["CPU", "TPU"], "output_dir": ")" + out_dir.string() + R"("})", 400);
  post_json("/start_profile", R"({"num_steps": 0})", 400);
  post_json("/start_profile", R"({"start_step": 3})", 400);
  post_json("/start_profile", R"({"activity": ["CPU"]})", 400);  // a misspelt key
  r = post("/start_profile", R"({"activities": ["CPU", "GPU"], "with_stack": true, "output_dir": ")" +
                                 out_dir.string() + R"("})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Start profiling.\n");
  EXPECT_EQ(post("/start_profile", "").status, 400);  // already on
  Json g = post_json("/generate", R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3}})");
  EXPECT_EQ(g["output_ids"].size(), 3u);
  r = http_call(port_, "GET", "/stop_profile");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.rfind("Stop profiling.", 0), 0u) << r.body;
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(out_dir)) files.push_back(f.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(r.body.find(files[0].string()), std::string::npos) << r.body;  // the answer names the file
  std::ifstream in(files[0]);
  const Json trace = Json::parse(in, nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  int prefill = 0, decode = 0;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    prefill += e["name"] == "prefill";
    decode += e["name"] == "decode";
  }
  EXPECT_EQ(prefill, 1);  // the fake engine: the prompt's step, then a step a further token
  EXPECT_GE(decode, 2);
  expect_still_serving();
}


// SGLang's expert distribution recorder: refused (400, naming the flag) without a recorder; with one, /start_ then
// /stop_ keep the picks of the steps between them (the fake engine's pretend MoE: token t picks expert (t >> 2l) % 4
// in layer l), /dump_ writes them as JSON [1, layers, experts] and forgets them, and a dump while recording goes on
// recording.
// return_hidden_states (SGLang's): refused with 400 naming the flag unless the server has it; then /generate's
// meta_info.hidden_states is [prompt rows, then a row a fed output token] (the fake engine's rows are (position, token,
// 0.5)), cumulative in stream chunks and split over them with --incremental-streaming-output; OpenAI choices carry the
// last fed token's row ([] with one output token), streamed as one chunk a choice at the end.
TEST_F(ApiServerTest, ReturnHiddenStatesAnswersAsSglang) {
  start();
  HttpReply off = post("/generate", R"({"input_ids": [9, 4], "return_hidden_states": true})");
  EXPECT_EQ(off.status, 400) << off.body;
  EXPECT_NE(off.body.find("--enable-return-hidden-states"), std::string::npos) << off.body;
  HttpReply bad = post("/generate", R"({"input_ids": [9, 4], "return_hidden_states": 1})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  expect_still_serving();
}

TEST_F(ApiServerTest, ReturnHiddenStatesRowsAndShapes) {
  TestSetup s;
  s.engine.return_hidden_states = true;
  s.api.incremental_streaming_output = false;
  start(s);
  const std::vector<int32_t> out = continuation(4, 3);
  auto row = [](int pos, int tok) { return Json::array({pos, tok, 0.5}); };
  Json want = Json::array({Json::array({row(0, 9), row(1, 4)}), row(2, out[0]), row(3, out[1])});
  Json g = post_json("/generate", R"({"input_ids": [9, 4], "return_hidden_states": true,
      "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}})");
  EXPECT_EQ(g["meta_info"]["hidden_states"], want) << g.dump();
  Json plain = post_json("/generate", R"({"input_ids": [9, 4], "sampling_params": {"max_new_tokens": 3}})");
  EXPECT_FALSE(plain["meta_info"].contains("hidden_states"));
  // Streamed: each chunk has the list so far; the last the whole of it.
  HttpReply r = post("/generate", R"({"input_ids": [9, 4], "return_hidden_states": true, "stream": true,
      "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}})");
  auto events = sse_events(r.body);
  ASSERT_EQ(events.size(), 4u) << r.body;
  for (size_t i = 0; i < 3; ++i) {
    Json c = Json::parse(events[i]);
    EXPECT_EQ(c["meta_info"]["hidden_states"].size(), i + 1) << events[i];
  }
  EXPECT_EQ(Json::parse(events[2])["meta_info"]["hidden_states"], want);
  // OpenAI: the last entry (the last fed token's row); [] when only the prompt's entry exists.
  Json c = post_json("/v1/completions", R"({"prompt": [9, 4], "max_tokens": 3, "return_hidden_states": true,
      "ignore_eos": true})");
  EXPECT_EQ(c["choices"][0]["hidden_states"], row(3, out[1])) << c.dump();
  Json one = post_json("/v1/completions", R"({"prompt": [9, 4], "max_tokens": 1, "return_hidden_states": true})");
  EXPECT_EQ(one["choices"][0]["hidden_states"], Json::array()) << one.dump();
  Json chat = post_json("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
      "return_hidden_states": true, "ignore_eos": true})");
  ASSERT_EQ(chat["choices"][0]["hidden_states"].size(), 3u) << chat.dump();
  HttpReply cs = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
      "return_hidden_states": true, "ignore_eos": true, "stream": true})");
  auto cevents = sse_events(cs.body);
  ASSERT_GE(cevents.size(), 3u) << cs.body;
  Json last = Json::parse(cevents[cevents.size() - 2]);  // the hidden-states chunk, then [DONE]
  EXPECT_EQ(last["choices"][0]["delta"]["hidden_states"], chat["choices"][0]["hidden_states"]) << cs.body;
  Json none = post_json("/v1/completions", R"({"prompt": [9, 4], "max_tokens": 2})");
  EXPECT_FALSE(none["choices"][0].contains("hidden_states"));
}

TEST_F(ApiServerTest, ReturnHiddenStatesIncrementalChunksAreDisjoint) {
  TestSetup s;
  s.engine.return_hidden_states = true;
  s.api.incremental_streaming_output = true;
  start(s);
  HttpReply r = post("/generate", R"({"input_ids": [9, 4], "return_hidden_states": true, "stream": true,
      "sampling_params": {"max_new_tokens": 4, "ignore_eos": true}})");
  auto events = sse_events(r.body);
  ASSERT_EQ(events.size(), 5u) << r.body;
  Json all = Json::array();
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json c = Json::parse(events[i]);
    for (const Json& e : c["meta_info"]["hidden_states"]) all.push_back(e);
  }
  ASSERT_EQ(all.size(), 4u) << r.body;  // the prompt's entry and the rows of the three fed outputs
  EXPECT_EQ(all[0].size(), 2u);
  for (size_t k = 1; k < 4; ++k) EXPECT_EQ(all[k][0], static_cast<int>(k) + 1) << all.dump();
}

// return_routed_experts (SGLang's): 400 naming the flag without it; with it, meta_info.routed_experts is base64 of the
// little-endian int32 [prompt + output - 1, layers, top_k] picks (the fake engine's pretend MoE: 2 layers, one pick:
// token t picks (t >> 2l) % 4 in layer l), in the final response / chunk only.
TEST_F(ApiServerTest, ReturnRoutedExpertsIsBase64OfThePicks) {
  {
    start();
    HttpReply off = post("/generate", R"({"input_ids": [9, 4], "return_routed_experts": true})");
    EXPECT_EQ(off.status, 400) << off.body;
    EXPECT_NE(off.body.find("--enable-return-routed-experts"), std::string::npos) << off.body;
    TearDown();
  }
  TestSetup s;
  s.engine.return_routed_experts = true;
  start(s);
  const std::vector<int32_t> out = continuation(4, 3);
  std::vector<int32_t> fed = {9, 4, out[0], out[1]};
  std::vector<int32_t> want;
  for (int32_t t : fed)
    for (int l = 0; l < 2; ++l) want.push_back((t >> (2 * l)) % 4);
  auto decode = [](const std::string& b64) {
    static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : b64) {
      if (c == '=') break;
      acc = acc << 6 | static_cast<uint32_t>(kAlphabet.find(c));
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes += static_cast<char>((acc >> bits) & 0xff);
      }
    }
    std::vector<int32_t> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  };
  Json g = post_json("/generate", R"({"input_ids": [9, 4], "return_routed_experts": true,
      "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}})");
  ASSERT_TRUE(g["meta_info"]["routed_experts"].is_string()) << g.dump();
  EXPECT_EQ(decode(g["meta_info"]["routed_experts"].get<std::string>()), want);
  EXPECT_EQ(g["meta_info"]["routed_experts"].get<std::string>().size() % 4, 0u);
  HttpReply r = post("/generate", R"({"input_ids": [9, 4], "return_routed_experts": true, "stream": true,
      "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}})");
  auto events = sse_events(r.body);
  ASSERT_EQ(events.size(), 4u) << r.body;
  for (size_t i = 0; i < 2; ++i) EXPECT_FALSE(Json::parse(events[i])["meta_info"].contains("routed_experts"));
  EXPECT_EQ(decode(Json::parse(events[2])["meta_info"]["routed_experts"].get<std::string>()), want);
  Json plain = post_json("/generate", R"({"input_ids": [9, 4], "sampling_params": {"max_new_tokens": 3}})");
  EXPECT_FALSE(plain["meta_info"].contains("routed_experts"));
}

TEST_F(ApiServerTest, ExpertDistributionRecorderRefusedWhenOff) {
  start();
  for (const char* p : {"/start_expert_distribution_record", "/stop_expert_distribution_record",
                        "/dump_expert_distribution_record"}) {
    HttpReply r = post(p, "");
    EXPECT_EQ(r.status, 400) << p;
    EXPECT_NE(r.body.find("--expert-distribution-recorder-mode"), std::string::npos) << r.body;
  }
  expect_still_serving();
}

TEST_F(ApiServerTest, ExpertDistributionRecorderCountsTheStepsRecorded) {
  TestSetup s;
  s.engine.expert_recorder = true;
  s.engine.expert_recorder_dir = (std::filesystem::temp_directory_path() /
                                  ("dserve_expert_rec_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(s.engine.expert_recorder_dir);
  start(s);
  const std::string gen = R"({"input_ids": [3, 4, 5], "sampling_params": {"max_new_tokens": 6, "ignore_eos": true}})";
  const auto picks = [](const Json& j, std::vector<int64_t>& counts) {
    for (const Json& t : j["output_ids"]) {
      const int32_t tok = t.get<int32_t>();
      for (int l = 0; l < 2; ++l) ++counts[static_cast<size_t>(l * 4 + ((tok >> (2 * l)) % 4))];
    }
  };
  const auto dump = [&](std::vector<int64_t>* counts) {
    HttpReply r = http_call(port_, "GET", "/dump_expert_distribution_record");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body.rfind("Dump expert distribution record.\n", 0), 0u) << r.body;
    const size_t at = r.body.find("Written to ");
    ASSERT_NE(at, std::string::npos) << r.body;
    const std::string file = r.body.substr(at + 11, r.body.size() - at - 12);
    EXPECT_EQ(std::filesystem::path(file).parent_path(), std::filesystem::path(s.engine.expert_recorder_dir));
    std::ifstream in(file);
    const Json d = Json::parse(in, nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << file;
    EXPECT_EQ(d["mode"], "stat");
    EXPECT_EQ(d["num_layers"], 2);
    EXPECT_EQ(d["num_logical_experts"], 4);
    ASSERT_EQ(d["logical_count"].size(), 1u);
    ASSERT_EQ(d["logical_count"][0].size(), 2u);
    counts->clear();
    for (const Json& row : d["logical_count"][0]) {
      ASSERT_EQ(row.size(), 4u);
      for (const Json& c : row) counts->push_back(c.get<int64_t>());
    }
  };
  (void)post_json("/generate", gen);  // before any start: not recorded
  HttpReply r = post("/start_expert_distribution_record", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Start recording the expert distribution.\n");
  std::vector<int64_t> want(8, 0), got;
  picks(post_json("/generate", gen), want);
  picks(post_json("/generate", R"({"input_ids": [9, 10], "sampling_params": {"max_new_tokens": 5, "ignore_eos": true}})"), want);
  r = post("/stop_expert_distribution_record", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Stop recording the expert distribution.\n");
  (void)post_json("/generate", gen);  // after the stop: not recorded
  dump(&got);
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::accumulate(got.begin(), got.begin() + 4, int64_t{0}), 11);  // a pick a layer a generated token
  dump(&got);
  EXPECT_EQ(got, std::vector<int64_t>(8, 0));  // a dump forgets what it wrote
  // A dump while recording: the picks so far, then recording goes on from zero.
  ASSERT_EQ(post("/start_expert_distribution_record", "").status, 200);
  std::fill(want.begin(), want.end(), 0);
  picks(post_json("/generate", gen), want);
  dump(&got);
  EXPECT_EQ(got, want);
  std::fill(want.begin(), want.end(), 0);
  picks(post_json("/generate", R"({"input_ids": [7], "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}})"), want);
  ASSERT_EQ(post("/stop_expert_distribution_record", "").status, 200);
  dump(&got);
  EXPECT_EQ(got, want);
  expect_still_serving();
  std::filesystem::remove_all(s.engine.expert_recorder_dir);
}


// SGLang's /update_weights_from_disk: {success, message, num_paused_requests}; a bad body or a checkpoint the engine
// refuses is a 400 of that shape naming the problem; a good one reaches the engine with its flush flag, and its
// weight_version is what /get_model_info and /generate's meta_info report from then on.
TEST_F(ApiServerTest, UpdateWeightsFromDiskAnswersAsSglang) {
  start();
  HttpReply r = post("/update_weights_from_disk", R"({"model_path": 5})");
  EXPECT_EQ(r.status, 400);
  Json j = Json::parse(r.body, nullptr, false);
  EXPECT_EQ(j["success"], false);
  EXPECT_NE(j["message"].get<std::string>().find("model_path"), std::string::npos) << r.body;
  r = post("/update_weights_from_disk", R"({"model_path": "/no/such/dir"})");
  EXPECT_EQ(r.status, 400);
  j = Json::parse(r.body, nullptr, false);
  EXPECT_EQ(j["success"], false);
  EXPECT_NE(j["message"].get<std::string>().find("not a directory"), std::string::npos) << r.body;
  EXPECT_EQ(post_json("/generate", R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 1}})")
                ["meta_info"]["weight_version"], "default");
  j = post_json("/update_weights_from_disk",
                R"({"model_path": ")" + dir_.string() + R"(", "weight_version": "step-2", "flush_cache": false})");
  EXPECT_EQ(j["success"], true);
  EXPECT_EQ(j["message"], "Succeeded to update model weights.");
  EXPECT_EQ(j["num_paused_requests"], 0);
  const auto seen = engine_->weight_updates();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, dir_.string());
  EXPECT_FALSE(seen[0].second);
  EXPECT_EQ(Json::parse(http_call(port_, "GET", "/get_model_info").body)["weight_version"], "step-2");
  EXPECT_EQ(post_json("/generate", R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 1}})")
                ["meta_info"]["weight_version"], "step-2");
  EXPECT_EQ(http_call(port_, "GET", "/update_weights_from_disk").status, 405);
  expect_still_serving();
  // Draining for shutdown: an update not started yet answers 503 and never reaches the engine; wait_admin_idle then
  // returns at once (nothing inside the engine).
  api_->set_shutting_down();
  r = post("/update_weights_from_disk", R"({"model_path": ")" + dir_.string() + R"("})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("shutting down"), std::string::npos) << r.body;
  api_->wait_admin_idle();
  EXPECT_EQ(engine_->weight_updates().size(), 1u);
}


// The prompt a /generate answer says it ran on: its input_token_logprobs' ids (return_logprob, logprob_start_len 0).
std::vector<int32_t> prompt_of(const Json& j) {
  std::vector<int32_t> ids;
  for (const Json& t : j["meta_info"]["input_token_logprobs"]) ids.push_back(t[1].get<int32_t>());
  return ids;
}

// SGLang's sessions: /open_session answers an id, /generate's session_params continue one of the session's finished
// requests (its prompt and output, cut by offset, or its prompt alone, then the new input without its BOS), replace
// drops a request's other branches and aborts the running ones, /close_session ends it; every misuse is a 400 naming
// the problem and the server serves on.
TEST_F(ApiServerTest, SessionsContinueTheirRequests) {
  start();
  HttpReply r = http_call(port_, "POST", "/open_session", R"({"capacity_of_str_len": 1000})",
                          {"Content-Type: application/json"});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string sid = Json::parse(r.body).get<std::string>();
  EXPECT_EQ(sid.size(), 32u);
  post_json("/open_session", R"({"session_id": "named"})");
  post_json("/open_session", R"({"session_id": "named"})", 400);  // already open
  post_json("/open_session", R"({"capacity": 5})", 400);           // unknown key

  auto gen = [&](const std::string& body, int status = 200) { return post_json("/generate", body, status); };
  const std::string lp = R"("return_logprob": true, "logprob_start_len": 0)";
  Json a = gen(R"({"input_ids": [3, 4, 5], "rid": "r1", "sampling_params": {"max_new_tokens": 4}, )" + lp +
               R"(, "session_params": {"id": ")" + sid + R"("}})");
  const std::vector<int32_t> out1 = a["output_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(out1, continuation(5, 4));
  EXPECT_EQ(prompt_of(a), (std::vector<int32_t>{3, 4, 5}));

  // Continue r1: its prompt, its output, then the new ids.
  Json b = gen(R"({"input_ids": [9], "rid": "r2", "sampling_params": {"max_new_tokens": 2}, )" + lp +
               R"(, "session_params": {"id": ")" + sid + R"(", "rid": "r1"}})");
  std::vector<int32_t> want = {3, 4, 5};
  want.insert(want.end(), out1.begin(), out1.end());
  want.push_back(9);
  EXPECT_EQ(prompt_of(b), want);
  EXPECT_EQ(b["output_ids"].get<std::vector<int32_t>>(), continuation(9, 2));
  // A text turn appended drops its BOS; offset cuts r1's ids; drop_previous_output keeps r1's prompt alone.
  Json c = gen(R"({"text": "hi", "rid": "r3", "sampling_params": {"max_new_tokens": 1}, )" + lp +
               R"(, "session_params": {"id": ")" + sid + R"(", "rid": "r1", "offset": 2}})");
  EXPECT_EQ(prompt_of(c), (std::vector<int32_t>{3, 4, 'h', 'i'}));
  Json d = gen(R"({"input_ids": [7], "rid": "r4", "sampling_params": {"max_new_tokens": 1}, )" + lp +
               R"(, "session_params": {"id": ")" + sid + R"(", "rid": "r1", "drop_previous_output": true}})");
  EXPECT_EQ(prompt_of(d), (std::vector<int32_t>{3, 4, 5, 7}));

  // Misuse: unknown session, unknown or duplicate rid, offset past the ids, a batch, a bad field; then still serving.
  const std::string bad_cases[] = {
      R"({"input_ids": [1], "session_params": {"id": "nope"}})",
      R"({"input_ids": [1], "session_params": {"id": ")" + sid + R"(", "rid": "zz"}})",
      R"({"input_ids": [1], "rid": "r1", "session_params": {"id": ")" + sid + R"("}})",
      R"({"input_ids": [1], "session_params": {"id": ")" + sid + R"(", "rid": "r1", "offset": 100}})",
      R"({"input_ids": [[1], [2]], "session_params": {"id": ")" + sid + R"("}})",
      R"({"input_ids": [1], "session_params": {"id": ")" + sid + R"(", "offset": -1}})",
      R"({"input_ids": [1], "session_params": {"rid": "r1"}})",
      R"({"input_ids": [1], "session_params": "s"})",
  };
  for (const std::string& body : bad_cases) {
    Json e = gen(body, 400);
    EXPECT_TRUE(e.contains("error")) << body;
  }
  // A request refused by the server's own checks (prompt past the context) is not kept: r5 can be used again.
  gen(R"({"input_ids": [1], "rid": "r5", "sampling_params": {"max_new_tokens": 100000}, "session_params": {"id": ")" +
          sid + R"(", "rid": "r1"}})",
      400);
  gen(R"({"input_ids": [1], "rid": "r5", "sampling_params": {"max_new_tokens": 1}, "session_params": {"id": ")" + sid +
      R"(", "rid": "r1"}})");
  expect_still_serving();

  // Replace: a running branch of r1 is aborted when a new request replaces r1's children.
  std::thread slow([&] {
    gen(R"({"input_ids": [2], "rid": "long", "sampling_params": {"max_new_tokens": 3000, "ignore_eos": true},
            "session_params": {"id": ")" + sid + R"(", "rid": "r1"}})");
  });
  ASSERT_TRUE(wait_for([&] { return engine_->num_live() > 0; }));
  const uint64_t aborts = engine_->num_aborts();
  Json f = gen(R"({"input_ids": [8], "rid": "r6", "sampling_params": {"max_new_tokens": 1}, )" + lp +
               R"(, "session_params": {"id": ")" + sid + R"(", "rid": "r1", "replace": true}})");
  std::vector<int32_t> want_f = {3, 4, 5};
  want_f.insert(want_f.end(), out1.begin(), out1.end());
  want_f.push_back(8);
  EXPECT_EQ(prompt_of(f), want_f);
  slow.join();
  EXPECT_GT(engine_->num_aborts(), aborts);

  // Closing: the session is gone for later requests; closing twice is an error.
  EXPECT_EQ(http_call(port_, "POST", "/close_session", R"({"session_id": ")" + sid + R"("})").status, 200);
  EXPECT_EQ(http_call(port_, "POST", "/close_session", R"({"session_id": ")" + sid + R"("})").status, 400);
  EXPECT_EQ(http_call(port_, "POST", "/close_session", "{}").status, 400);
  gen(R"({"input_ids": [1], "session_params": {"id": ")" + sid + R"(", "rid": "r1"}})", 400);
  expect_still_serving();
}

}  // namespace
}  // namespace ds
