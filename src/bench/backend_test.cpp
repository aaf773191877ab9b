// Tests of the bench-serving backends: request bodies per API, and reading streamed / whole / failed
// responses into TTFT, inter-token latencies and server token counts.
#include "bench/backend.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

using json = nlohmann::json;

DatasetRow ids_row() {
  DatasetRow r;
  r.ids = {5, 6, 7};
  r.use_ids = true;
  r.text = "hello";
  r.prompt_len = 3;
  return r;
}

TEST(BenchBackend, Names) {
  EXPECT_EQ(*parse_backend("sglang"), Backend::kSglang);
  EXPECT_EQ(*parse_backend("vllm-chat"), Backend::kVllmChat);
  EXPECT_FALSE(parse_backend("trt").is_ok());
  EXPECT_STREQ(api_path(Backend::kSglang), "/generate");
  EXPECT_STREQ(api_path(Backend::kSglangOai), "/v1/completions");
  EXPECT_STREQ(api_path(Backend::kVllm), "/v1/completions");
  EXPECT_STREQ(api_path(Backend::kSglangOaiChat), "/v1/chat/completions");
  EXPECT_EQ(default_port(Backend::kVllm), 8000);
  EXPECT_EQ(default_port(Backend::kSglangOai), 30000);
}

TEST(BenchBackend, NativeBody) {
  RequestOptions o;
  json j = json::parse(build_request_body(Backend::kSglang, ids_row(), 17, o));
  EXPECT_EQ(j["input_ids"], json({5, 6, 7}));
  EXPECT_FALSE(j.contains("text"));
  EXPECT_EQ(j["sampling_params"]["max_new_tokens"], 17);
  EXPECT_EQ(j["sampling_params"]["ignore_eos"], true);
  EXPECT_EQ(j["sampling_params"]["temperature"], 0.0);
  EXPECT_EQ(j["stream"], true);
  DatasetRow t = ids_row();
  t.use_ids = false;
  o.ignore_eos = false;
  o.stream = false;
  o.extra_body = {{"rid", "x"}, {"stream", true}};
  j = json::parse(build_request_body(Backend::kSglang, t, 4, o));
  EXPECT_EQ(j["text"], "hello");
  EXPECT_FALSE(j.contains("input_ids"));
  EXPECT_EQ(j["sampling_params"]["ignore_eos"], false);
  EXPECT_EQ(j["rid"], "x");
  EXPECT_EQ(j["stream"], true);  // the extra body wins
}

TEST(BenchBackend, OpenAiBodies) {
  RequestOptions o;
  o.model = "m";
  o.extra_body = {{"temperature", 0.7}};
  json j = json::parse(build_request_body(Backend::kVllm, ids_row(), 9, o));
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], json({5, 6, 7}));
  EXPECT_EQ(j["max_tokens"], 9);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["temperature"], 0.7);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  j = json::parse(build_request_body(Backend::kSglangOaiChat, ids_row(), 9, RequestOptions{}));
  EXPECT_EQ(j["messages"], json::parse(R"([{"role":"user","content":"hello"}])"));
  EXPECT_EQ(j["max_completion_tokens"], 9);
  EXPECT_FALSE(j.contains("prompt"));
  RequestOptions ns;
  ns.stream = false;
  j = json::parse(build_request_body(Backend::kSglangOai, ids_row(), 9, ns));
  EXPECT_FALSE(j.contains("stream_options"));
}

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

TEST(BenchBackend, NativeStreamCumulative) {
  ResponseReader r(Backend::kSglang, 100);
  r.on_headers(200, "text/event-stream; charset=utf-8");
  r.on_bytes(sse({{"text", "a"}, {"meta_info", {{"completion_tokens", 1}, {"prompt_tokens", 3}}}}), 0.1);
  r.on_bytes(sse({{"text", "ab"}, {"meta_info", {{"completion_tokens", 2}}}}), 0.2);
  // One chunk with two new tokens: its 0.2 s gap is split between them.
  r.on_bytes(sse({{"text", "abcd"}, {"meta_info", {{"completion_tokens", 4}}}}), 0.4);
  r.on_bytes("data: [DONE]\n\n", 0.41);
  RequestOutput o = r.finish(0.42, Status::ok());
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_DOUBLE_EQ(o.ttft, 0.1);
  ASSERT_EQ(o.itl.size(), 3u);
  EXPECT_NEAR(o.itl[0], 0.1, 1e-12);
  EXPECT_NEAR(o.itl[1], 0.1, 1e-12);
  EXPECT_NEAR(o.itl[2], 0.1, 1e-12);
  EXPECT_EQ(o.output_len, 4);
  EXPECT_TRUE(o.output_len_from_server);
  EXPECT_EQ(o.server_prompt_tokens, 3);
  EXPECT_EQ(o.generated_text, "abcd");
  EXPECT_DOUBLE_EQ(o.latency, 0.42);
}

TEST(BenchBackend, NativeStreamIdsOnlyAndSplitChunks) {
  // --skip-tokenizer-init servers send empty text and output_ids; chunks may split anywhere.
  ResponseReader r(Backend::kSglang, 3);
  r.on_headers(200, "text/event-stream");
  std::string all;
  for (int i = 1; i <= 3; ++i)
    all += sse({{"text", ""}, {"output_ids", {i}}, {"meta_info", {{"completion_tokens", i}, {"spec_verify_ct", 1}}}});
  r.on_bytes(all.substr(0, 10), 0.05);
  r.on_bytes(all.substr(10, all.size() / 2 - 10), 0.1);
  r.on_bytes(all.substr(all.size() / 2), 0.3);
  RequestOutput o = r.finish(0.3, Status::ok());
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_EQ(o.output_len, 3);
  EXPECT_DOUBLE_EQ(o.ttft, 0.1);
  ASSERT_EQ(o.itl.size(), 2u);  // tokens 2 and 3 arrived in one read at 0.3, as two events
  EXPECT_NEAR(o.itl[0], 0.2, 1e-12);
  EXPECT_NEAR(o.itl[1], 0.0, 1e-12);
  EXPECT_EQ(o.spec_verify_ct.value_or(-1), 1);
}

TEST(BenchBackend, CompletionsStreamWithUsageChunk) {
  ResponseReader r(Backend::kSglangOai, 50);
  r.on_headers(200, "text/event-stream");
  r.on_bytes(sse({{"choices", {{{"text", "x"}, {"index", 0}}}}}), 0.2);
  r.on_bytes(sse({{"choices", {{{"text", ""}}}}}), 0.25);  // empty pieces are not tokens
  r.on_bytes(sse({{"choices", {{{"text", "y"}}}}}), 0.3);
  r.on_bytes(sse({{"choices", json::array()}, {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 2}}}}) +
                 "data: [DONE]\n\n",
             0.31);
  RequestOutput o = r.finish(0.31, Status::ok());
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_EQ(o.generated_text, "xy");
  EXPECT_DOUBLE_EQ(o.ttft, 0.2);
  ASSERT_EQ(o.itl.size(), 1u);
  EXPECT_NEAR(o.itl[0], 0.1, 1e-12);
  EXPECT_EQ(o.output_len, 2);
  EXPECT_EQ(o.server_prompt_tokens, 7);
}

TEST(BenchBackend, CompletionsWithoutUsageFallsBackToRequested) {
  ResponseReader r(Backend::kVllm, 50);
  r.on_headers(200, "text/event-stream");
  r.on_bytes(sse({{"choices", {{{"text", "x"}}}}}), 0.2);
  RequestOutput o = r.finish(0.3, Status::ok());
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.output_len, 50);
  EXPECT_FALSE(o.output_len_from_server);
}

TEST(BenchBackend, ChatStreamCountsReasoning) {
  ResponseReader r(Backend::kVllmChat, 10);
  r.on_headers(200, "text/event-stream");
  r.on_bytes(sse({{"choices", {{{"delta", {{"role", "assistant"}}}}}}}), 0.1);  // no content yet
  r.on_bytes(sse({{"choices", {{{"delta", {{"reasoning_content", "think"}}}}}}}), 0.2);
  r.on_bytes(sse({{"choices", {{{"delta", {{"content", "answer"}}}}}}}), 0.5);
  RequestOutput o = r.finish(0.5, Status::ok());
  ASSERT_TRUE(o.success);
  EXPECT_DOUBLE_EQ(o.ttft, 0.2);
  EXPECT_EQ(o.generated_text, "thinkanswer");
  ASSERT_EQ(o.itl.size(), 1u);
  EXPECT_NEAR(o.itl[0], 0.3, 1e-12);
}

TEST(BenchBackend, WholeResponses) {
  ResponseReader r(Backend::kSglangOaiChat, 10);
  r.on_headers(200, "application/json");
  const std::string body =
      json({{"choices", {{{"message", {{"content", "hi there"}}}}}}, {"usage", {{"completion_tokens", 3}}}}).dump();
  r.on_bytes(body.substr(0, 5), 0.5);
  r.on_bytes(body.substr(5), 0.9);
  RequestOutput o = r.finish(1.0, Status::ok());
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_EQ(o.generated_text, "hi there");
  EXPECT_EQ(o.output_len, 3);
  EXPECT_DOUBLE_EQ(o.ttft, 1.0);  // no streaming: the first token is seen with the whole reply
  EXPECT_TRUE(o.itl.empty());

  ResponseReader n(Backend::kSglang, 10);
  n.on_headers(200, "application/json");
  n.on_bytes(json({{"text", "abc"}, {"meta_info", {{"completion_tokens", 5}, {"spec_accept_length", 2.5}}}}).dump(),
             0.7);
  o = n.finish(0.8, Status::ok());
  ASSERT_TRUE(o.success);
  EXPECT_EQ(o.output_len, 5);
  EXPECT_DOUBLE_EQ(o.ttft, 0.8);
  EXPECT_DOUBLE_EQ(o.spec_accept_length.value_or(0), 2.5);
}

TEST(BenchBackend, Failures) {
  ResponseReader a(Backend::kSglang, 10);
  a.on_headers(503, "application/json");
  a.on_bytes("{\"error\":\"overloaded\"}", 0.1);
  RequestOutput o = a.finish(0.1, Status::ok());
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.error.find("HTTP 503"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("overloaded"), std::string::npos) << o.error;

  ResponseReader b(Backend::kSglang, 10);
  b.on_headers(200, "text/event-stream");
  b.on_bytes(sse({{"text", "a"}, {"meta_info", {{"completion_tokens", 1}}}}), 0.1);
  b.on_bytes(sse({{"error", {{"message", "out of memory"}}}}), 0.2);
  o = b.finish(0.2, Status::ok());
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.error.find("out of memory"), std::string::npos) << o.error;

  ResponseReader c(Backend::kVllm, 10);
  c.on_headers(200, "text/event-stream");
  c.on_bytes("data: {not json\n\n", 0.1);
  EXPECT_FALSE(c.finish(0.1, Status::ok()).success);

  ResponseReader d(Backend::kVllm, 10);
  d.on_headers(200, "text/event-stream");
  o = d.finish(0.1, error("read failed: connection reset"));
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.error.find("connection reset"), std::string::npos);

  ResponseReader e(Backend::kSglang, 10);
  e.on_headers(200, "application/json");
  e.on_bytes("<html>", 0.1);
  EXPECT_FALSE(e.finish(0.1, Status::ok()).success);
}

TEST(BenchBackend, NewlineSeparatedEventsStillRead) {
  // Some servers end each event with a single newline; the reader then sees joined data lines.
  ResponseReader r(Backend::kSglangOai, 10);
  r.on_headers(200, "text/event-stream");
  r.on_bytes("data: {\"choices\":[{\"text\":\"a\"}]}\ndata: {\"choices\":[{\"text\":\"b\"}]}\n", 0.1);
  RequestOutput o = r.finish(0.2, Status::ok());
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_EQ(o.generated_text, "ab");
}

}  // namespace
}  // namespace ds::bench
