// Request parsing and validation: field types, ranges, defaults, batch shapes and unknown/unsupported fields.
#include "http/api_request.h"

#include <cmath>
#include <limits>
#include <map>

#include <gtest/gtest.h>

namespace ds {
namespace {

Json parse(const std::string& s) { return Json::parse(s); }

TEST(ParseJsonBody, RejectsMalformedAndNonObjects) {
  Json j;
  EXPECT_TRUE(parse_json_body("", &j).has_value());
  EXPECT_TRUE(parse_json_body("{\"a\": ", &j).has_value());
  EXPECT_TRUE(parse_json_body("[1, 2]", &j).has_value());
  EXPECT_TRUE(parse_json_body("{\"t\": NaN}", &j).has_value());
  EXPECT_FALSE(parse_json_body("{\"a\": 1}", &j).has_value());
  EXPECT_EQ(j["a"], 1);
}

TEST(ErrorJson, OpenAiShape) {
  ApiError e = bad_request("bad thing", "temperature");
  Json j = error_json(e);
  EXPECT_EQ(j["error"]["message"], "bad thing");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(GenerateRequest, SingleIdsWithSampling) {
  GenerateRequest g;
  auto err = parse_generate_request(parse(R"({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 9,
      "temperature": 0, "top_p": 0.5, "top_k": 3, "min_p": 0.1, "stop": "xy", "stop_token_ids": [4],
      "ignore_eos": true, "min_new_tokens": 2, "seed": 11, "no_stop_trim": true, "skip_special_tokens": false},
      "stream": true, "return_logprob": true, "logprob_start_len": 1, "top_logprobs_num": 2, "rid": "abc"})"),
                                    &g);
  ASSERT_FALSE(err.has_value()) << err->message;
  ASSERT_EQ(g.prompts.size(), 1u);
  EXPECT_FALSE(g.batch);
  EXPECT_EQ(g.prompts[0].ids, (std::vector<int32_t>{5, 6, 7}));
  const SamplingSpec& s = g.sampling[0];
  EXPECT_EQ(s.engine.max_new_tokens, 9);
  EXPECT_TRUE(s.max_new_tokens_set);
  EXPECT_EQ(s.engine.temperature, 0.0f);
  EXPECT_FLOAT_EQ(s.engine.top_p, 0.5f);
  EXPECT_EQ(s.engine.top_k, 3);
  EXPECT_EQ(s.engine.stop_token_ids, (std::vector<TokenId>{4}));
  EXPECT_TRUE(s.engine.ignore_eos);
  EXPECT_EQ(s.engine.min_new_tokens, 2);
  EXPECT_EQ(s.engine.seed, 11u);
  EXPECT_TRUE(s.seed_set);
  EXPECT_EQ(s.text.stop, (std::vector<std::string>{"xy"}));
  EXPECT_TRUE(s.text.no_stop_trim);
  EXPECT_FALSE(s.text.skip_special_tokens);
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.return_logprob);
  EXPECT_EQ(g.logprob_start_len, 1);
  EXPECT_EQ(g.top_logprobs_num, 2);
  EXPECT_EQ(g.rids, (std::vector<std::string>{"abc"}));
}

TEST(GenerateRequest, DefaultsAndBatches) {
  GenerateRequest g;
  ASSERT_FALSE(parse_generate_request(parse(R"({"text": "hi"})"), &g).has_value());
  EXPECT_TRUE(g.prompts[0].is_text);
  EXPECT_EQ(g.sampling[0].engine.max_new_tokens, 128);
  EXPECT_FALSE(g.sampling[0].max_new_tokens_set);
  EXPECT_EQ(g.rids, (std::vector<std::string>{""}));

  GenerateRequest b;
  ASSERT_FALSE(parse_generate_request(
                   parse(R"({"input_ids": [[1, 2], [3]], "sampling_params": [{"max_new_tokens": 1}, {"n": 2}]})"), &b)
                   .has_value());
  EXPECT_TRUE(b.batch);
  ASSERT_EQ(b.prompts.size(), 2u);
  EXPECT_EQ(b.sampling[0].engine.max_new_tokens, 1);
  EXPECT_EQ(b.sampling[1].n, 2);

  GenerateRequest t;
  ASSERT_FALSE(parse_generate_request(parse(R"({"text": ["a", "b", "c"], "sampling_params": {"top_k": 5}})"), &t)
                   .has_value());
  ASSERT_EQ(t.sampling.size(), 3u);
  EXPECT_EQ(t.sampling[2].engine.top_k, 5);  // one dict applies to every prompt
}

struct BadCase {
  const char* body;
  const char* param;  // expected error param ("" = not checked)
};

TEST(GenerateRequest, RejectsInvalidInput) {
  const BadCase cases[] = {
      {R"({})", "text"},
      {R"({"text": "a", "input_ids": [1]})", "text"},
      {R"({"text": 5})", "text"},
      {R"({"text": []})", "text"},
      {R"({"input_ids": [1, -2]})", "input_ids"},
      {R"({"input_ids": [1, 2.5]})", "input_ids"},
      {R"({"input_ids": ["a"]})", "input_ids"},
      {R"({"input_ids": [[1], 2]})", "input_ids"},
      {R"({"input_ids": [1], "sampling_params": {"temperature": -1}})", "sampling_params.temperature"},
      {R"({"input_ids": [1], "sampling_params": {"temperature": "hot"}})", "sampling_params.temperature"},
      {R"({"input_ids": [1], "sampling_params": {"top_p": 0}})", "sampling_params.top_p"},
      {R"({"input_ids": [1], "sampling_params": {"top_p": 1.5}})", "sampling_params.top_p"},
      {R"({"input_ids": [1], "sampling_params": {"top_k": 0}})", "sampling_params.top_k"},
      {R"({"input_ids": [1], "sampling_params": {"top_k": -2}})", "sampling_params.top_k"},
      {R"({"input_ids": [1], "sampling_params": {"min_p": 2}})", "sampling_params.min_p"},
      {R"({"input_ids": [1], "sampling_params": {"frequency_penalty": 3}})", "sampling_params.frequency_penalty"},
      {R"({"input_ids": [1], "sampling_params": {"presence_penalty": -2.5}})", "sampling_params.presence_penalty"},
      {R"({"input_ids": [1], "sampling_params": {"repetition_penalty": 0}})", "sampling_params.repetition_penalty"},
      // In range as doubles but 0.0f as the floats the engine uses (a division by zero in the penalty).
      {R"({"input_ids": [1], "sampling_params": {"repetition_penalty": 1e-300}})", "sampling_params.repetition_penalty"},
      {R"({"input_ids": [1], "sampling_params": {"top_p": 1e-50}})", "sampling_params.top_p"},
      {R"({"input_ids": [1], "sampling_params": {"temperature": 1e300}})", "sampling_params.temperature"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": -1}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 1.5}})", "sampling_params.max_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 2, "min_new_tokens": 3}})", "sampling_params.min_new_tokens"},
      {R"({"input_ids": [1], "sampling_params": {"n": 0}})", "sampling_params.n"},
      {R"({"input_ids": [1], "sampling_params": {"stop": [""]}})", "sampling_params.stop"},
      {R"({"input_ids": [1], "sampling_params": {"stop": [1]}})", "sampling_params.stop"},
      {R"({"input_ids": [1], "sampling_params": {"stop_token_ids": [-1]}})", "sampling_params.stop_token_ids"},
      {R"({"input_ids": [1], "sampling_params": {"ignore_eos": "yes"}})", "sampling_params.ignore_eos"},
      {R"({"input_ids": [1], "sampling_params": {"bogus": 1}})", "sampling_params.bogus"},
      {R"({"input_ids": [1], "sampling_params": {"regex": 7}})", "sampling_params.regex"},
      {R"({"input_ids": [1], "sampling_params": [{}, {}]})", "sampling_params"},
      {R"({"input_ids": [1], "sampling_params": 3})", "sampling_params"},
      {R"({"input_ids": [1], "stream": 1})", "stream"},
      {R"({"input_ids": [1], "logprob_start_len": -2})", "logprob_start_len"},
      {R"({"input_ids": [1], "rid": ["a", "b"]})", "rid"},
      {R"({"input_ids": [1], "rid": ""})", "rid"},
      {R"({"input_ids": [1], "image_data": "x.png"})", "image_data"},
      {R"({"input_ids": [1], "what": true})", "what"},
  };
  for (const BadCase& c : cases) {
    GenerateRequest g;
    auto err = parse_generate_request(parse(c.body), &g);
    ASSERT_TRUE(err.has_value()) << c.body;
    EXPECT_EQ(err->status, 400) << c.body;
    EXPECT_FALSE(err->message.empty());
    if (*c.param) {
      EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
    }
  }
}

TEST(GenerateRequest, NullMeansAbsent) {
  GenerateRequest g;
  ASSERT_FALSE(parse_generate_request(parse(R"({"input_ids": [1], "sampling_params": {"temperature": null,
      "stop": null}, "rid": null, "image_data": null})"),
                                      &g)
                   .has_value());
  EXPECT_EQ(g.sampling[0].engine.temperature, 1.0f);
}

TEST(CompletionRequest, OpenAiFieldsAndDefaults) {
  CompletionRequest c;
  auto err = parse_completion_request(parse(R"({"model": "m", "prompt": "hello", "max_tokens": 7, "n": 3,
      "stop": ["a", "b"], "logprobs": 2, "echo": true, "stream": true, "stream_options": {"include_usage": true},
      "seed": 5, "user": "u", "min_tokens": 1, "presence_penalty": 0.5, "best_of": 3})"),
                                      &c);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_EQ(c.model, "m");
  EXPECT_EQ(c.sampling.engine.max_new_tokens, 7);
  EXPECT_EQ(c.sampling.n, 3);
  EXPECT_EQ(c.sampling.text.stop.size(), 2u);
  EXPECT_EQ(c.logprobs, 2);
  EXPECT_TRUE(c.echo);
  EXPECT_TRUE(c.include_usage);
  EXPECT_EQ(c.sampling.engine.min_new_tokens, 1);
  EXPECT_TRUE(c.sampling.engine.logit_bias.empty());

  CompletionRequest b;  // OpenAI's logit_bias: token id strings -> [-100, 100]
  ASSERT_FALSE(parse_completion_request(parse(R"({"prompt": "x", "logit_bias": {"50256": -100, "7": 2.5}})"), &b)
                   .has_value());
  ASSERT_EQ(b.sampling.engine.logit_bias.size(), 2u);
  std::map<int32_t, float> bias(b.sampling.engine.logit_bias.begin(), b.sampling.engine.logit_bias.end());
  EXPECT_EQ(bias.at(50256), -100.0f);
  EXPECT_EQ(bias.at(7), 2.5f);

  CompletionRequest d;
  ASSERT_FALSE(parse_completion_request(parse(R"({"prompt": [[1, 2], [3]]})"), &d).has_value());
  EXPECT_EQ(d.prompts.size(), 2u);
  EXPECT_EQ(d.sampling.engine.max_new_tokens, 16);  // OpenAI's default
  EXPECT_FALSE(d.sampling.max_new_tokens_set);
  EXPECT_EQ(d.logprobs, -1);
}

TEST(CompletionRequest, RejectsInvalidInput) {
  const BadCase cases[] = {
      {R"({"model": "m"})", "prompt"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": -5})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": "10"})", "max_tokens"},
      {R"({"prompt": "x", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "x", "logprobs": 50})", "logprobs"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"bad": true}})", "stream_options.bad"},
      {R"({"prompt": "x", "suffix": "tail"})", "suffix"},
      {R"({"prompt": "x", "response_format": {"type": "yaml"}})", "response_format"},
      {R"({"prompt": "x", "best_of": 2})", "best_of"},
      {R"({"prompt": "x", "logit_bias": {"a5": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"-5": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 100.5}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": "1"}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": [5, 1]})", "logit_bias"},
      {R"({"prompt": "x", "model": 7})", "model"},
      {R"({"prompt": "x", "unknown_field": 1})", "unknown_field"},
      {R"({"prompt": {"a": 1}})", "prompt"},
  };
  for (const BadCase& c : cases) {
    CompletionRequest r;
    auto err = parse_completion_request(parse(c.body), &r);
    ASSERT_TRUE(err.has_value()) << c.body;
    EXPECT_EQ(err->status, 400);
    if (*c.param) {
      EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
    }
  }
}

TEST(ChatRequest, FieldsToolsAndThinking) {
  ChatRequest c;
  auto err = parse_chat_request(parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
      "max_completion_tokens": 12, "logprobs": true, "top_logprobs": 3, "tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto",
      "chat_template_kwargs": {"thinking": true}, "stream": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true}, "response_format": {"type": "text"}})"),
                                &c);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_EQ(c.sampling.engine.max_new_tokens, 12);
  EXPECT_TRUE(c.logprobs);
  EXPECT_EQ(c.top_logprobs, 3);
  EXPECT_TRUE(c.tools.is_array());
  EXPECT_EQ(c.tool_choice, "auto");
  EXPECT_TRUE(c.thinking);
  EXPECT_TRUE(c.continuous_usage_stats);
  EXPECT_FALSE(ChatRequest().sampling.max_new_tokens_set);
  // A tool without "type" takes SGLang's default ("function").
  ChatRequest u;
  err = parse_chat_request(
      parse(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": {"name": "g"}}]})"), &u);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_EQ(u.tools[0]["function"]["name"], "g");
}

// Constraints: SGLang's regex / json_schema (string or object) sampling parameters, OpenAI's response_format.
TEST(ChatRequest, ConstraintsFromSamplingParametersAndResponseFormat) {
  ChatRequest c;
  ASSERT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}})"), &c)
                   .has_value());
  EXPECT_EQ(nlohmann::json::parse(c.sampling.json_schema), nlohmann::json::parse(R"({"type": "integer"})"));
  EXPECT_TRUE(c.sampling.json_schema_from_response_format);
  ChatRequest o;
  ASSERT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_object"}})"), &o).has_value());
  EXPECT_EQ(nlohmann::json::parse(o.sampling.json_schema)["type"], "object");
  ChatRequest t;
  ASSERT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "text"}, "regex": "[ab]+"})"), &t).has_value());
  EXPECT_EQ(t.sampling.regex, "[ab]+");
  EXPECT_TRUE(t.sampling.json_schema.empty());
  GenerateRequest g;
  ASSERT_FALSE(parse_generate_request(parse(R"({"input_ids": [1, 2], "sampling_params":
      {"json_schema": {"type": "string"}}})"), &g).has_value());
  EXPECT_EQ(nlohmann::json::parse(g.sampling[0].json_schema)["type"], "string");
}

TEST(ChatRequest, RejectsInvalidInput) {
  const BadCase cases[] = {
      {R"({"model": "m"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "wizard", "content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x"}]})", "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x", "function": {"name": "f"}}]})",
       "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"function": {"name": 3}}]})", "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "always"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function"}})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})", "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})", "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "regex": "a", "json_schema": "{}"})", "regex"},
      {R"({"messages": [{"role": "user", "content": "x"}], "ebnf": 5})", "ebnf"},
      // Fields of the wrong type inside objects (these threw out of the parser and aborted the server).
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": 5}})", "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": 5, "function": {"name": "f"}}})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "regex": "a", "ebnf": "root ::= \"a\""})", "regex"},
      {R"({"messages": [{"role": "user", "content": "x"}], "ebnf": "root ::= \"a\"", "response_format": {"type": "json_object"}})", "response_format"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"thinking": "yes"}})", "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 1000})", "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "frobnicate": 1})", "frobnicate"},
  };
  for (const BadCase& c : cases) {
    ChatRequest r;
    auto err = parse_chat_request(parse(c.body), &r);
    ASSERT_TRUE(err.has_value()) << c.body;
    EXPECT_EQ(err->status, 400);
    if (*c.param) {
      EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
    }
  }
}

// A checkpoint's generation_config.json (DeepSeek-V3's own fields) gives the chat defaults; what a request sets
// (null is unset) keeps its value.
TEST(SamplingDefaults, GenerationConfigFillsWhatAChatRequestLeavesUnset) {
  Result<SamplingDefaults> d = parse_sampling_defaults(R"({"_from_model_config": true, "bos_token_id": 0,
      "eos_token_id": 1, "do_sample": true, "temperature": 0.6, "top_p": 0.95, "transformers_version": "4.46.3"})",
                                                       "generation_config.json");
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->describe(), "temperature=0.6 top_p=0.95");
  ChatRequest c;
  ASSERT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "hi"}], "top_p": null,
      "top_k": 5})"), &c));
  apply_sampling_defaults(*d, &c.sampling);
  EXPECT_FLOAT_EQ(c.sampling.engine.temperature, 0.6f);
  EXPECT_FLOAT_EQ(c.sampling.engine.top_p, 0.95f);
  EXPECT_EQ(c.sampling.engine.top_k, 5);
  ChatRequest greedy;
  ASSERT_FALSE(parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 0})"),
                                  &greedy));
  apply_sampling_defaults(*d, &greedy.sampling);
  EXPECT_EQ(greedy.sampling.engine.temperature, 0.0f);  // the request's 0 is not a missing value
  EXPECT_FLOAT_EQ(greedy.sampling.engine.top_p, 0.95f);
  // top_k 0 is transformers' "off"; min_p and repetition_penalty are taken too.
  Result<SamplingDefaults> k = parse_sampling_defaults(R"({"top_k": 0, "min_p": 0.05, "repetition_penalty": 1.1})", "g");
  ASSERT_TRUE(k.is_ok()) << k.status().message();
  EXPECT_EQ(k->top_k, -1);
  EXPECT_EQ(k->describe(), "top_k=-1 min_p=0.05 repetition_penalty=1.1");
  EXPECT_TRUE(parse_sampling_defaults(R"({"do_sample": false})", "g")->empty());
}

TEST(SamplingDefaults, BadGenerationConfigNamesTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"temperature": "0.6"})", "'temperature' must be a number"},
      {R"({"top_p": 0})", "'top_p' must be in (0, 1]"},
      {R"({"top_k": 2.5})", "'top_k' must be an integer"},
      {R"({"repetition_penalty": 3})", "'repetition_penalty'"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"temperature": )", "not a JSON object"},
  };
  for (const auto& [text, needle] : cases) {
    Result<SamplingDefaults> d = parse_sampling_defaults(text, "gen.json");
    ASSERT_FALSE(d.is_ok()) << text;
    EXPECT_NE(d.status().message().find(needle), std::string::npos) << d.status().message();
    EXPECT_NE(d.status().message().find("gen.json"), std::string::npos) << d.status().message();
  }
}

// --preferred-sampling-params: keys a /generate request's sampling_params (each of a list, or none) lack; checked
// at startup as /generate would check them.
TEST(PreferredSamplingParams, FillWhatGenerateRequestsLack) {
  Result<Json> p = parse_preferred_sampling_params(R"({"temperature": 0.3, "max_new_tokens": 7})");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  Json none = parse(R"({"input_ids": [1]})");
  merge_preferred_sampling(*p, &none);
  GenerateRequest g;
  ASSERT_FALSE(parse_generate_request(none, &g));
  EXPECT_FLOAT_EQ(g.sampling[0].engine.temperature, 0.3f);
  EXPECT_EQ(g.sampling[0].engine.max_new_tokens, 7);
  Json list = parse(R"({"input_ids": [[1], [2]], "sampling_params": [{"temperature": 0}, {"temperature": null}]})");
  merge_preferred_sampling(*p, &list);
  GenerateRequest b;
  ASSERT_FALSE(parse_generate_request(list, &b));
  EXPECT_EQ(b.sampling[0].engine.temperature, 0.0f);  // the request's own value
  EXPECT_FLOAT_EQ(b.sampling[1].engine.temperature, 0.3f);
  EXPECT_EQ(b.sampling[0].engine.max_new_tokens, 7);
  for (const char* bad : {"[1]", "{\"temperature\": -1}", "{\"frobnicate\": 1}", "not json"}) {
    Result<Json> r = parse_preferred_sampling_params(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--preferred-sampling-params"), std::string::npos) << r.status().message();
  }
}

TEST(DumpJson, InvalidUtf8IsReplacedNotThrown) {
  Json j = std::string("a\xff" "b");
  EXPECT_EQ(dump_json(j), "\"a\xEF\xBF\xBD" "b\"");
}

TEST(ScoreRequest, TextAndIdFormsAndTheirPrompts) {
  ScoreRequest t;
  auto err = parse_score_request(parse(R"({"query": "Is it ", "items": ["red", "blue"], "label_token_ids": [7, 3],
      "apply_softmax": true, "model": "m"})"), &t);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_TRUE(t.query.is_text);
  ASSERT_EQ(t.items.size(), 2u);
  EXPECT_EQ(t.label_token_ids, (std::vector<int32_t>{7, 3}));
  EXPECT_TRUE(t.apply_softmax);
  EXPECT_FALSE(t.item_first);
  EXPECT_EQ(t.model, "m");
  EXPECT_EQ(score_prompt(t, 1).text, "Is it blue");
  t.item_first = true;
  EXPECT_EQ(score_prompt(t, 0).text, "redIs it ");
  EXPECT_TRUE(score_prompt(t, 0).is_text);

  ScoreRequest one;  // a single string item
  ASSERT_FALSE(parse_score_request(parse(R"({"query": "q", "items": "x", "label_token_ids": [1]})"), &one));
  ASSERT_EQ(one.items.size(), 1u);
  EXPECT_EQ(score_prompt(one, 0).text, "qx");

  ScoreRequest ids;
  err = parse_score_request(parse(R"({"query": [1, 2], "items": [[3], [], [4, 5]], "label_token_ids": [9],
      "item_first": true})"), &ids);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_FALSE(ids.query.is_text);
  ASSERT_EQ(ids.items.size(), 3u);
  EXPECT_EQ(score_prompt(ids, 2).ids, (std::vector<int32_t>{4, 5, 1, 2}));
  EXPECT_EQ(score_prompt(ids, 1).ids, (std::vector<int32_t>{1, 2}));
  ids.item_first = false;
  EXPECT_EQ(score_prompt(ids, 0).ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(score_prompt(ids, 0).is_text);
}

TEST(ScoreRequest, BadBodiesNameTheField) {
  const std::map<std::string, std::string> bad = {
      {R"({"items": ["a"], "label_token_ids": [1]})", "query"},
      {R"({"query": 5, "items": ["a"], "label_token_ids": [1]})", "query"},
      {R"({"query": ["a"], "items": ["a"], "label_token_ids": [1]})", "query"},
      {R"({"query": "q", "label_token_ids": [1]})", "items"},
      {R"({"query": "q", "items": [], "label_token_ids": [1]})", "items"},
      {R"({"query": "q", "items": 3, "label_token_ids": [1]})", "items"},
      {R"({"query": [1], "items": [1, 2], "label_token_ids": [1]})", "items"},
      {R"({"query": "q", "items": ["a", [1]], "label_token_ids": [1]})", "items"},
      {R"({"query": [1], "items": [[1], [-2]], "label_token_ids": [1]})", "items"},
      {R"({"query": "q", "items": [[1]], "label_token_ids": [1]})", "items"},
      {R"({"query": [1], "items": ["a"], "label_token_ids": [1]})", "items"},
      {R"({"query": "q", "items": ["a"]})", "label_token_ids"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": []})", "label_token_ids"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": [1.5]})", "label_token_ids"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": 3})", "label_token_ids"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": [1], "apply_softmax": "yes"})", "apply_softmax"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": [1], "item_first": 1})", "item_first"},
      {R"({"query": "q", "items": ["a"], "label_token_ids": [1], "temperature": 0})", "temperature"},
  };
  for (const auto& [body, param] : bad) {
    ScoreRequest r;
    auto err = parse_score_request(parse(body), &r);
    ASSERT_TRUE(err.has_value()) << body;
    EXPECT_EQ(err->status, 400) << body;
    EXPECT_EQ(err->param, param) << body << ": " << err->message;
    EXPECT_NE(err->message.find(param), std::string::npos) << body << ": " << err->message;
  }
}

TEST(ScoreRequest, LabelScoresAreProbabilitiesOrTheirSoftmax) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> lps = {std::log(0.5), std::log(0.1), -inf};
  const std::vector<double> p = label_scores(lps, false);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[0], 0.5, 1e-12);
  EXPECT_NEAR(p[1], 0.1, 1e-12);
  EXPECT_EQ(p[2], 0.0);
  const std::vector<double> s = label_scores(lps, true);
  EXPECT_NEAR(s[0], 0.5 / 0.6, 1e-12);
  EXPECT_NEAR(s[1], 0.1 / 0.6, 1e-12);
  EXPECT_EQ(s[2], 0.0);
  // Far below exp's range: the softmax still normalises (shifted by the largest).
  const std::vector<double> tiny = label_scores({-2000.0, -2000.0 - std::log(3.0)}, true);
  EXPECT_NEAR(tiny[0], 0.75, 1e-12);
  EXPECT_NEAR(tiny[1], 0.25, 1e-12);
  EXPECT_EQ(label_scores({-inf, -inf}, true), (std::vector<double>{0.0, 0.0}));
}

TEST(PauseMode, DefaultAbortAndTheThreeNames) {
  PauseMode m = PauseMode::kInPlace;
  EXPECT_FALSE(parse_pause_mode("", &m).has_value());
  EXPECT_EQ(m, PauseMode::kAbort);
  EXPECT_FALSE(parse_pause_mode(" {} ", &m).has_value());
  EXPECT_EQ(m, PauseMode::kAbort);
  EXPECT_FALSE(parse_pause_mode(R"({"mode": "retract"})", &m).has_value());
  EXPECT_EQ(m, PauseMode::kRetract);
  EXPECT_FALSE(parse_pause_mode(R"({"mode": "in_place"})", &m).has_value());
  EXPECT_EQ(m, PauseMode::kInPlace);
  EXPECT_FALSE(parse_pause_mode(R"({"mode": "abort"})", &m).has_value());
  EXPECT_EQ(m, PauseMode::kAbort);
  for (const char* bad : {R"({"mode": "later"})", R"({"mode": 1})", R"({"modes": "abort"})", "[1]", "{"}) {
    auto e = parse_pause_mode(bad, &m);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->status, 400) << bad;
  }
  EXPECT_NE(parse_pause_mode(R"({"mode": "later"})", &m)->message.find("in_place"), std::string::npos);
}

// /update_weights_from_disk's body (SGLang's UpdateWeightFromDiskReqInput): defaults, the accepted and ignored
// switches, and each refusal naming its field.
TEST(UpdateWeightsRequest, FieldsDefaultsAndRefusals) {
  UpdateWeightsRequest u;
  ASSERT_FALSE(parse_update_weights_request(R"({"model_path": "/m"})", &u).has_value());
  EXPECT_EQ(u.model_path, "/m");
  EXPECT_TRUE(u.flush_cache);
  EXPECT_FALSE(u.abort_all_requests);
  EXPECT_EQ(u.weight_version, "");
  ASSERT_FALSE(parse_update_weights_request(R"({"model_path": "/m", "load_format": "auto", "flush_cache": false,
      "abort_all_requests": true, "weight_version": "step-7", "recapture_cuda_graph": true, "torch_empty_cache": true,
      "token_step": 3, "is_async": false, "keep_pause": false})", &u).has_value());
  EXPECT_FALSE(u.flush_cache);
  EXPECT_TRUE(u.abort_all_requests);
  EXPECT_FALSE(u.keep_pause);
  EXPECT_EQ(u.weight_version, "step-7");
  ASSERT_FALSE(parse_update_weights_request(R"({"model_path": "/m", "keep_pause": true})", &u).has_value());
  EXPECT_TRUE(u.keep_pause);
  const auto msg = [&](const char* body) {
    auto e = parse_update_weights_request(body, &u);
    EXPECT_TRUE(e.has_value()) << body;
    if (e) EXPECT_EQ(e->status, 400) << body;
    return e ? e->message : std::string();
  };
  EXPECT_NE(msg("{}").find("'model_path' (a string) is required"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": ""})").find("must not be empty"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": 3})").find("must be a string"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": "/m", "load_format": "dummy"})").find("only auto"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": "/m", "is_async": true})").find("is_async"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": "/m", "keep_pause": 1})").find("keep_pause"), std::string::npos);
  EXPECT_NE(msg(R"({"model_path": "/m", "flush": true})").find("Unrecognized request argument supplied: flush"),
            std::string::npos);
  EXPECT_NE(msg("not json").find("JSON"), std::string::npos);
}

TEST(StructuralTagRequest, SamplingParamsAndResponseFormat) {
  GenerateRequest g;
  auto err = parse_generate_request(parse(R"({"text": "x", "sampling_params": {"structural_tag":
      {"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}], "triggers": ["<a"]}}})"), &g);
  ASSERT_FALSE(err.has_value()) << err->message;
  const Json tag = Json::parse(g.sampling[0].structural_tag);
  EXPECT_EQ(tag["triggers"][0], "<a");
  EXPECT_EQ(g.sampling[0].constraints(), 1);
  GenerateRequest text;  // SGLang sends it as JSON text
  ASSERT_FALSE(parse_generate_request(parse(R"({"text": "x", "sampling_params": {"structural_tag": "{\"triggers\": []}"}})"),
                                      &text));
  EXPECT_EQ(text.sampling[0].structural_tag, R"({"triggers": []})");

  ChatRequest c;
  err = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type":
      "structural_tag", "structures": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<a"]}})"), &c);
  ASSERT_FALSE(err.has_value()) << err->message;
  EXPECT_TRUE(c.sampling.structural_tag_from_response_format);
  EXPECT_EQ(Json::parse(c.sampling.structural_tag)["structures"][0]["end"], "</a>");
  EXPECT_FALSE(Json::parse(c.sampling.structural_tag).contains("type"));

  const std::pair<const char*, const char*> bad[] = {
      {R"({"text": "x", "sampling_params": {"structural_tag": 5}})", "sampling_params.structural_tag"},
      {R"({"text": "x", "sampling_params": {"structural_tag": "{}", "regex": "a"}})", "sampling_params.regex"},
      {R"({"text": "x", "sampling_params": {"structural_tag": "{}", "ebnf": "root ::= \"a\""}})", "sampling_params.ebnf"},
  };
  for (const auto& [body, param] : bad) {
    GenerateRequest r;
    auto e = parse_generate_request(parse(body), &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
  }
  ChatRequest both;
  auto e = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}], "structural_tag": "{}",
      "response_format": {"type": "structural_tag", "structures": [], "triggers": []}})"), &both);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format");
}

TEST(RequestLimits, SequencesPerRequestAreBounded) {
  Json ids = Json::array();
  for (size_t i = 0; i <= kMaxSequencesPerRequest; ++i) ids.push_back(Json::array({1}));
  GenerateRequest g;
  auto e = parse_generate_request(Json{{"input_ids", ids}}, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "input_ids");
  EXPECT_NE(e->message.find("65537"), std::string::npos) << e->message;
  ids.erase(ids.size() - 1);
  GenerateRequest ok;
  EXPECT_FALSE(parse_generate_request(Json{{"input_ids", ids}}, &ok).has_value());
  // prompts x n
  Json texts = Json::array();
  for (int i = 0; i < 600; ++i) texts.push_back("x");
  GenerateRequest gn;
  e = parse_generate_request(Json{{"text", texts}, {"sampling_params", Json{{"n", 128}}}}, &gn);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "text");
  CompletionRequest c;
  e = parse_completion_request(Json{{"prompt", texts}, {"n", 128}}, &c);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "prompt");
  CompletionRequest c_ok;
  EXPECT_FALSE(parse_completion_request(Json{{"prompt", texts}, {"n", 100}}, &c_ok).has_value());
  Json items = Json::array();
  for (size_t i = 0; i <= kMaxSequencesPerRequest; ++i) items.push_back("a");
  ScoreRequest sr;
  e = parse_score_request(Json{{"query", "q"}, {"items", items}, {"label_token_ids", Json::array({1})}}, &sr);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "items");
  // items x labels: 40,000 x 1,000 scores (each a logprob the engine reports) past the entry bound
  items.erase(items.begin() + 40000, items.end());
  Json labels = Json::array();
  for (int i = 0; i < 1000; ++i) labels.push_back(i);
  ScoreRequest many;
  e = parse_score_request(Json{{"query", "q"}, {"items", items}, {"label_token_ids", labels}}, &many);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "label_token_ids");
}

}  // namespace
}  // namespace ds
