// The batch engine on the CPU backend with the fixtures: batched, chunked, retracted and prefix-cached
// execution must give exactly what the single-sequence runner gives.
#include "runner/batch_engine.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <condition_variable>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runner/engine_test_util.h"

#include "model/deepseek_model.h"
#include "runner/sequence_runner.h"

namespace ds {
namespace {

std::string fixture(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

// Request ids such as "r3" or "p2_1", built by appending (gcc 12's -Wrestrict misfires on "r" + std::to_string(i)).
std::string id_of(const char* prefix, int i, const std::string& suffix = "") {
  std::string s = prefix;
  s += std::to_string(i);
  s += suffix;
  return s;
}

// Collects events per request and waits for completion.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, std::vector<TokenLogprob>> input_lps, output_lps;
  std::map<std::string, EngineEvent> final_event;
  std::map<std::string, std::vector<std::vector<float>>> hidden_prompt, hidden_output;
  std::map<std::string, int> hidden_prompt_events;  // events that carried prompt rows

  Engine::Callback callback() {
    return [this](EngineEvent e) {
      std::lock_guard<std::mutex> lock(mu);
      auto& t = tokens[e.rid];
      t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
      auto& in = input_lps[e.rid];
      in.insert(in.end(), e.input_logprobs.begin(), e.input_logprobs.end());
      auto& o = output_lps[e.rid];
      o.insert(o.end(), e.output_logprobs.begin(), e.output_logprobs.end());
      if (!e.hidden_prompt.empty()) {
        hidden_prompt[e.rid] = e.hidden_prompt;
        ++hidden_prompt_events[e.rid];
      }
      auto& ho = hidden_output[e.rid];
      ho.insert(ho.end(), e.hidden_output.begin(), e.hidden_output.end());
      if (e.finished) final_event[e.rid] = e;
      cv.notify_all();
    };
  }
  bool wait(size_t n, int seconds = 120) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return final_event.size() >= n; });
  }
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int len, int vocab) {
  std::uniform_int_distribution<int> d(2, vocab - 1);
  std::vector<int32_t> p(len);
  for (auto& t : p) t = d(rng);
  return p;
}

// Greedy continuations from the single-sequence reference path.
std::vector<std::vector<int32_t>> reference(const std::string& name, const std::vector<std::vector<int32_t>>& prompts,
                                            int max_new) {
  auto cfg = load_model_config(fixture(name)).value();
  auto w = load_weights(fixture(name), cfg).value();
  auto ops = make_cpu_ops();
  DeepseekModel model(cfg, w, *ops);
  SequenceRunner runner(model, *ops);
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : prompts) {
    GenerateOptions o;
    o.max_new_tokens = max_new;
    o.sampling.temperature = 0;
    o.sampling.ignore_eos = true;
    out.push_back(runner.generate(p, o).output_ids);
  }
  return out;
}

EngineRequest greedy(const std::string& rid, std::vector<int32_t> ids, int max_new) {
  EngineRequest r;
  r.rid = rid;
  r.input_ids = std::move(ids);
  r.sampling.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

struct Case {
  std::string fixture;
  int64_t max_total_tokens;
  int32_t chunked_prefill_size;
  int32_t page_size = 64;
  int max_new = 10;
};

class BatchEngineTest : public ::testing::TestWithParam<Case> {};

TEST_P(BatchEngineTest, ConcurrentGreedyEqualsSequential) {
  const Case c = GetParam();
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) prompts.push_back(random_prompt(rng, 5 + 23 * i % 150, 1024));
  const int kNew = c.max_new;
  auto want = reference(c.fixture, prompts, kNew);

  BatchEngineOptions o;
  o.model_path = fixture(c.fixture);
  o.max_total_tokens = c.max_total_tokens;
  o.chunked_prefill_size = c.chunked_prefill_size;
  o.page_size = c.page_size;
  o.verbose = false;
  auto engine = make_batch_engine(o);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  Collector col;
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE((*engine)->submit(greedy(id_of("r", i), prompts[i], kNew), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(prompts.size()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string rid = id_of("r", i);
    EXPECT_EQ(col.tokens[rid], want[i]) << c.fixture << " " << rid;
    EXPECT_EQ(col.final_event[rid].reason.kind, FinishReason::Kind::kLength);
    EXPECT_EQ(col.final_event[rid].completion_tokens, kNew);
  }
  EngineStats s = (*engine)->stats();
  if (c.max_total_tokens <= 512) {
    EXPECT_GT(s.num_retractions, 0u) << "the small pool must force retraction";
  }
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_EQ(s.used_tokens, s.cached_tokens) << "only the radix cache holds pages when idle";
}

INSTANTIATE_TEST_SUITE_P(Configs, BatchEngineTest,
                         ::testing::Values(Case{"v3", 65536, 8192}, Case{"v2_lite", 65536, 40},
                                           Case{"v32", 65536, 64}, Case{"v3", 320, 8192, 16, 48}));

// The prompt-logprob tests' reference: SequenceRunner::score of `prompt` on the v3 fixture (CPU), and an engine on
// the same fixture prefilling chunked_prefill_size tokens a step.
ScoreResult v3_score(const std::vector<int32_t>& prompt, int top_k) {
  auto cfg = load_model_config(fixture("v3")).value();
  auto w = load_weights(fixture("v3"), cfg).value();
  auto ops = make_cpu_ops();
  DeepseekModel model(cfg, w, *ops);
  return SequenceRunner(model, *ops).score(prompt, top_k);
}
std::unique_ptr<Engine> v3_engine(int64_t chunked_prefill_size) {
  BatchEngineOptions o;
  o.model_path = fixture("v3");
  o.chunked_prefill_size = chunked_prefill_size;
  o.verbose = false;
  return make_batch_engine(o).value();
}

TEST(BatchEngine, PromptLogprobsMatchScoreAndPrefixCacheIsUsed) {
  std::mt19937 rng(3);
  std::vector<int32_t> prompt = random_prompt(rng, 150, 1024);
  ScoreResult ref = v3_score(prompt, 3);
  auto engine = v3_engine(64);
  Collector col;
  EngineRequest r = greedy("a", prompt, 4);
  r.return_logprob = true;
  r.logprob_start_len = 0;
  r.top_logprobs_num = 3;
  ASSERT_TRUE(engine->submit(r, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(1));
  ASSERT_EQ(col.input_lps["a"].size(), prompt.size());
  EXPECT_TRUE(std::isnan(col.input_lps["a"][0].logprob));
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(col.input_lps["a"][i].id, prompt[i]);
    EXPECT_NEAR(col.input_lps["a"][i].logprob, ref.token_logprobs[i], 1e-4) << i;
    ASSERT_EQ(col.input_lps["a"][i].top.size(), 3u);
    EXPECT_EQ(col.input_lps["a"][i].top[0].second, ref.top_logprobs[i][0].second) << i;
  }
  ASSERT_EQ(col.output_lps["a"].size(), 4u);
  EXPECT_EQ(col.output_lps["a"][0].id, col.tokens["a"][0]);
  EXPECT_NEAR(col.output_lps["a"][0].logprob, ref.next_top[0].first, 1e-4);

  // Same prompt again: its full pages come from the radix cache, the output is unchanged.
  ASSERT_TRUE(engine->submit(greedy("b", prompt, 4), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(2));
  EXPECT_GT(col.final_event["b"].cached_tokens, 0);
  EXPECT_EQ(col.tokens["b"], col.tokens["a"]);

  // Prompt logprobs from position 100 with the prompt cached: reuse stops at 100, positions [100, n) are real.
  EngineRequest c = greedy("c", prompt, 2);
  c.return_logprob = true;
  c.logprob_start_len = 100;
  ASSERT_TRUE(engine->submit(c, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(3));
  EXPECT_GT(col.final_event["c"].cached_tokens, 0);
  EXPECT_LE(col.final_event["c"].cached_tokens, 100);
  ASSERT_EQ(col.input_lps["c"].size(), prompt.size() - 100);
  for (size_t i = 100; i < prompt.size(); ++i)
    EXPECT_NEAR(col.input_lps["c"][i - 100].logprob, ref.token_logprobs[i], 1e-4) << i;
}

// return_hidden_states: every prompt row, then one row a fed output token, equal to one prefill of the prompt and the
// output but its last token; the prompt prefilled in 64-token chunks under overlap scheduling, a second request on the
// same prompt computed whole (no prefix-cache reuse), and a request beside them that did not ask gets no rows.
TEST(BatchEngine, HiddenStatesAreTheFinalNormedRowsOfPromptAndFedOutput) {
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = random_prompt(rng, 150, 1024);
  BatchEngineOptions o;
  o.model_path = fixture("v3");
  o.chunked_prefill_size = 64;
  o.verbose = false;
  {
    auto off = make_batch_engine(o).value();
    EngineRequest r = greedy("x", prompt, 2);
    r.return_hidden_states = true;
    const Status st = off->submit(r, [](EngineEvent) {});
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("--enable-return-hidden-states"), std::string::npos) << st.message();
  }
  o.enable_return_hidden_states = true;
  auto engine = make_batch_engine(o).value();
  Collector col;
  constexpr int kNew = 6;
  EngineRequest a = greedy("a", prompt, kNew);
  a.return_hidden_states = true;
  ASSERT_TRUE(engine->submit(a, col.callback()).is_ok());
  ASSERT_TRUE(engine->submit(greedy("plain", prompt, kNew), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(2));
  EngineRequest b = a;
  b.rid = "b";
  ASSERT_TRUE(engine->submit(b, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(3));
  EXPECT_EQ(col.final_event["b"].cached_tokens, 0);
  EXPECT_TRUE(col.hidden_prompt["plain"].empty());
  EXPECT_TRUE(col.hidden_output["plain"].empty());

  auto cfg = load_model_config(fixture("v3")).value();
  auto w = load_weights(fixture("v3"), cfg).value();
  auto ops = make_cpu_ops();
  DeepseekModel model(cfg, w, *ops);
  for (const std::string rid : {"a", "b"}) {
    SCOPED_TRACE(rid);
    const std::vector<int32_t>& out = col.tokens[rid];
    ASSERT_EQ(out.size(), static_cast<size_t>(kNew));
    EXPECT_EQ(out, col.tokens["plain"]);
    std::vector<int32_t> fed = prompt;
    fed.insert(fed.end(), out.begin(), out.end() - 1);
    const Tensor ref = SequenceRunner(model, *ops).hidden_states(fed);  // [prompt + kNew - 1, d]
    const int64_t d = ref.dim(1);
    EXPECT_EQ(col.hidden_prompt_events[rid], 1);
    ASSERT_EQ(col.hidden_prompt[rid].size(), prompt.size());
    ASSERT_EQ(col.hidden_output[rid].size(), static_cast<size_t>(kNew - 1));
    double worst = 0, scale = 0;
    for (int64_t p = 0; p < ref.dim(0); ++p) {
      const std::vector<float>& row = p < static_cast<int64_t>(prompt.size())
                                          ? col.hidden_prompt[rid][static_cast<size_t>(p)]
                                          : col.hidden_output[rid][static_cast<size_t>(p) - prompt.size()];
      ASSERT_EQ(static_cast<int64_t>(row.size()), d) << p;
      for (int64_t k = 0; k < d; ++k) {
        const double r = ref.f32()[p * d + k];
        worst = std::max(worst, std::fabs(row[static_cast<size_t>(k)] - r));
        scale = std::max(scale, std::fabs(r));
      }
    }
    EXPECT_GT(scale, 0.1);
    EXPECT_LT(worst, 1e-3 * scale) << "max |diff| " << worst << " of max |ref| " << scale;
  }
}

// return_routed_experts: at the end, the routed picks of every fed token (the prompt, the output but its last token)
// in every layer, equal to one prefill's of those tokens (0 in the dense layers); the prompt prefilled in chunks, the
// same prompt cached before still computed whole; refused without the option.
TEST(BatchEngine, RoutedExpertsAreEveryFedTokensPicks) {
  std::mt19937 rng(13);
  const std::vector<int32_t> prompt = random_prompt(rng, 90, 1024);
  BatchEngineOptions o;
  o.model_path = fixture("v3");
  o.chunked_prefill_size = 32;
  o.verbose = false;
  {
    auto off = make_batch_engine(o).value();
    EngineRequest r = greedy("x", prompt, 2);
    r.return_routed_experts = true;
    const Status st = off->submit(r, [](EngineEvent) {});
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("--enable-return-routed-experts"), std::string::npos) << st.message();
  }
  o.enable_return_routed_experts = true;
  auto engine = make_batch_engine(o).value();
  Collector col;
  constexpr int kNew = 7;
  ASSERT_TRUE(engine->submit(greedy("plain", prompt, kNew), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(1));
  EngineRequest a = greedy("a", prompt, kNew);
  a.return_routed_experts = true;
  ASSERT_TRUE(engine->submit(a, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(2));
  EXPECT_EQ(col.final_event["a"].cached_tokens, 0);
  EXPECT_TRUE(col.final_event["plain"].routed_experts.empty());
  ASSERT_EQ(col.tokens["a"], col.tokens["plain"]);

  auto cfg = load_model_config(fixture("v3")).value();
  auto w = load_weights(fixture("v3"), cfg).value();
  auto ops = make_cpu_ops();
  DeepseekModel model(cfg, w, *ops);
  std::vector<int32_t> fed = prompt;
  fed.insert(fed.end(), col.tokens["a"].begin(), col.tokens["a"].end() - 1);
  const Tensor ref = SequenceRunner(model, *ops).routed_experts(fed);  // [fed, layers * top_k]
  const int64_t L = cfg.num_hidden_layers, k = cfg.num_experts_per_tok;
  ASSERT_EQ(ref.dim(1), L * k);
  const std::vector<int32_t>& got = col.final_event["a"].routed_experts;
  ASSERT_EQ(static_cast<int64_t>(got.size()), static_cast<int64_t>(fed.size()) * L * k);
  for (int64_t t = 0; t < static_cast<int64_t>(fed.size()); ++t)
    for (int64_t l = 0; l < L; ++l) {
      std::set<int32_t> picks;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t g = got[static_cast<size_t>((t * L + l) * k + j)];
        EXPECT_EQ(g, ref.data_as<int32_t>()[(t * L + l) * k + j]) << "token " << t << " layer " << l;
        if (cfg.is_moe_layer(static_cast<int>(l))) {
          EXPECT_TRUE(g >= 0 && g < cfg.n_routed_experts) << g;
          picks.insert(g);
        } else {
          EXPECT_EQ(g, 0) << "dense layer " << l;
        }
      }
      if (cfg.is_moe_layer(static_cast<int>(l))) EXPECT_EQ(static_cast<int64_t>(picks.size()), k);
    }
}

// A prompt of 1,300 tokens in one prefill step: its prompt-row log-softmax comes back 1,024 rows at a time (two
// blocks); every position (past the first block too) matches SequenceRunner::score, and the asked ids' logprobs
// come with each.
TEST(BatchEngine, PromptLogprobsAcrossLogSoftmaxBlocks) {
  std::mt19937 rng(5);
  std::vector<int32_t> prompt = random_prompt(rng, 1300, 1024);
  ScoreResult ref = v3_score(prompt, 1);
  auto engine = v3_engine(2048);
  Collector col;
  EngineRequest r = greedy("a", prompt, 1);
  r.return_logprob = true;
  r.logprob_start_len = 0;
  r.token_ids_logprob = {prompt[1100], 3};
  ASSERT_TRUE(engine->submit(r, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(1));
  ASSERT_EQ(col.input_lps["a"].size(), prompt.size());
  for (size_t i = 1; i < prompt.size(); ++i) {
    const TokenLogprob& t = col.input_lps["a"][i];
    ASSERT_NEAR(t.logprob, ref.token_logprobs[i], 1e-4) << i;
    ASSERT_EQ(t.ids.size(), 2u) << i;
    EXPECT_EQ(t.ids[0].second, prompt[1100]);
    if (prompt[i] == prompt[1100]) {
      EXPECT_EQ(t.ids[0].first, t.logprob) << i;
    }
  }
}

// Overlap scheduling (each step planned and run before the previous one completes) changes nothing a client
// sees: the same tokens for greedy and seeded sampling, the same logprobs, stops and min_new_tokens found a
// step late discard that step's token, and a penalised request (which turns overlap off while it runs) too.
TEST(BatchEngine, OverlapScheduleGivesTheSameResults) {
  std::mt19937 rng(21);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    EngineRequest r = greedy(id_of("o", i), random_prompt(rng, 8 + 13 * i, 1024), 6 + 3 * i);
    if (i % 3 == 1) {  // seeded sampling
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 100 + i;
    }
    if (i % 4 == 2) r.sampling.min_new_tokens = 3;
    if (i == 7) r.sampling.presence_penalty = 0.5f;
    r.return_logprob = i % 2 == 0;
    r.top_logprobs_num = i % 2 == 0 ? 2 : 0;
    if (i == 8) r.logprob_start_len = 0;  // prompt logprobs: its prefill steps wait for the device in the launch
    reqs.push_back(r);
  }
  std::map<std::string, std::vector<int32_t>> tokens[2];
  std::map<std::string, std::vector<TokenLogprob>> lps[2], input_lps[2];
  uint64_t ahead[2] = {0, 0};
  for (int overlap = 0; overlap < 2; ++overlap) {
    BatchEngineOptions o;
    o.model_path = fixture("v3");
    o.chunked_prefill_size = 48;
    o.verbose = false;
    o.disable_overlap_schedule = overlap == 0;
    auto engine = make_batch_engine(o).value();
    Collector col;
    std::vector<EngineRequest> rs = reqs;
    if (overlap) {  // stop on a token the serial run produced mid-way: found one step late with overlap
      // (the serial run's tokens of o3 are known here)
      rs[3].sampling.stop_token_ids = {tokens[0]["o3"][2]};
    } else {
      rs[3].sampling.stop_token_ids = {};
    }
    for (const auto& r : rs) ASSERT_TRUE(engine->submit(r, col.callback()).is_ok());
    ASSERT_TRUE(col.wait(rs.size()));
    tokens[overlap] = col.tokens;
    lps[overlap] = col.output_lps;
    input_lps[overlap] = col.input_lps;
    ahead[overlap] = engine->stats().num_steps_planned_ahead;
    EngineStats st = engine->stats();
    EXPECT_EQ(st.used_tokens, st.cached_tokens) << "pool idle after the last event";
  }
  EXPECT_EQ(ahead[0], 0u);
  EXPECT_GT(ahead[1], 0u) << "no step was planned ahead";
  ASSERT_EQ(input_lps[0]["o8"].size(), reqs[8].input_ids.size());
  ASSERT_EQ(input_lps[1]["o8"].size(), reqs[8].input_ids.size());
  for (size_t k = 1; k < reqs[8].input_ids.size(); ++k) {
    EXPECT_EQ(input_lps[1]["o8"][k].id, input_lps[0]["o8"][k].id) << k;
    EXPECT_NEAR(input_lps[1]["o8"][k].logprob, input_lps[0]["o8"][k].logprob, 1e-4) << k;
  }
  for (const auto& r : reqs) {
    if (r.rid == "o3") {  // stopped at its third token with overlap
      ASSERT_GE(tokens[0]["o3"].size(), 3u);
      std::vector<int32_t> want(tokens[0]["o3"].begin(), tokens[0]["o3"].begin() + 3);
      // The stop token may appear earlier in the output: it stops at its first occurrence.
      auto first = std::find(want.begin(), want.end(), tokens[0]["o3"][2]);
      want.erase(first + 1, want.end());
      EXPECT_EQ(tokens[1]["o3"], want);
      continue;
    }
    EXPECT_EQ(tokens[1][r.rid], tokens[0][r.rid]) << r.rid;
    ASSERT_EQ(lps[1][r.rid].size(), lps[0][r.rid].size()) << r.rid;
    // Batches are composed differently with and without overlap, and the fp32 CPU sums are not bit-identical
    // across batch compositions: logprobs agree to float rounding.
    for (size_t k = 0; k < lps[0][r.rid].size(); ++k) {
      const TokenLogprob &a = lps[1][r.rid][k], &b = lps[0][r.rid][k];
      EXPECT_EQ(a.id, b.id) << r.rid;
      EXPECT_NEAR(a.logprob, b.logprob, 1e-4) << r.rid;
      ASSERT_EQ(a.top.size(), b.top.size()) << r.rid;
      for (size_t j = 0; j < a.top.size(); ++j) {
        EXPECT_EQ(a.top[j].second, b.top[j].second) << r.rid;
        EXPECT_NEAR(a.top[j].first, b.top[j].first, 1e-4) << r.rid;
      }
    }
  }
}

// /start_profile and /stop_profile on the real loop (overlap schedule, chunked prefill): every step of the requests
// run while on is a span with its shape, the steps' token counts add up to the prompts' and outputs' tokens, and a
// step planned while the previous was in flight overlaps it on the other track.
TEST(BatchEngine, ProfileRecordsEveryStepWithItsShape) {
  BatchEngineOptions o;
  o.model_path = fixture("v3");
  o.chunked_prefill_size = 16;
  o.verbose = false;
  auto engine = make_batch_engine(o).value();
  const test::ScopedTempDir dir("dserve_engine_profile");
  ProfileOptions po;
  po.output_dir = dir.path.string();
  ASSERT_TRUE(engine->start_profile(po).is_ok());
  EXPECT_FALSE(engine->start_profile(po).is_ok());
  std::mt19937 rng(5);
  Collector col;
  const int prompt_lens[2] = {40, 9}, max_new[2] = {5, 8};
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(engine->submit(greedy(id_of("p", i), random_prompt(rng, prompt_lens[i], 1024), max_new[i]),
                               col.callback())
                    .is_ok());
  ASSERT_TRUE(col.wait(2));
  std::vector<std::string> paths;
  ASSERT_TRUE(engine->stop_profile(&paths).is_ok());
  ASSERT_EQ(paths.size(), 1u);
  std::ifstream in(paths[0]);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int64_t prefill_tokens = 0, decode_tokens = 0, steps = 0, overlapping = 0;
  double prev_end = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++steps;
    const auto& a = e["args"];
    EXPECT_LE(a["prefill_tokens"].get<int64_t>(), 16) << "chunked prefill: at most 16 prompt tokens a step";
    prefill_tokens += a["prefill_tokens"].get<int64_t>();
    decode_tokens += a["decode_seqs"].get<int64_t>();
    EXPECT_EQ(a["tokens"].get<int64_t>(), a["prefill_tokens"].get<int64_t>() + a["decode_seqs"].get<int64_t>());
    const double ts = e["ts"].get<double>();
    if (ts < prev_end) ++overlapping;
    prev_end = ts + e["dur"].get<double>();
  }
  EXPECT_EQ(prefill_tokens, prompt_lens[0] + prompt_lens[1]);
  // Each output token but a request's first (sampled by its last prefill chunk) is a decode step's.
  EXPECT_EQ(decode_tokens, max_new[0] - 1 + max_new[1] - 1);
  EXPECT_GE(steps, 4);
  EXPECT_GT(overlapping, 0) << "with the overlap schedule some step is planned while the previous runs";
  EXPECT_FALSE(engine->stop_profile(&paths).is_ok());
}

// SGLang's expert distribution recorder on the real loop (overlap schedule, chunked prefill): the steps between
// /start_ and /stop_ count top_k picks in every MoE layer for each token they forward (prompts, and outputs but each
// request's last), the dense layer none; a request before the start or after the stop adds nothing; the dump lands
// in $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR. Without the mode, or with a mode this server lacks, it is refused.
TEST(BatchEngine, ExpertRecorderCountsTheRecordedSteps) {
  EXPECT_FALSE(check_expert_recorder_flags("per_token", -1, false).is_ok());
  EXPECT_FALSE(check_expert_recorder_flags("stat", 1000, true).is_ok());
  EXPECT_FALSE(check_expert_recorder_flags("", -1, true).is_ok());
  EXPECT_TRUE(check_expert_recorder_flags("stat", -1, true).is_ok());
  BatchEngineOptions o;
  o.model_path = fixture("v3");
  o.chunked_prefill_size = 16;
  o.disable_radix_cache = true;  // every prompt token forwarded
  o.verbose = false;
  {
    auto off = make_batch_engine(o).value();
    std::string path;
    const Status st = off->expert_distribution(ExpertRecordOp::kStart, &path);
    EXPECT_NE(st.message().find("--expert-distribution-recorder-mode"), std::string::npos) << st.message();
  }
  const test::ScopedTempDir dir("dserve_engine_experts");
  ::setenv("SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR", dir.path.c_str(), 1);
  o.expert_recorder_mode = "stat";
  auto engine = make_batch_engine(o).value();
  ::unsetenv("SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR");
  const ModelConfig cfg = engine->model_config();
  std::mt19937 rng(9);
  Collector col;
  std::string path;
  size_t submitted = 0;
  const auto run = [&](int prompt_len, int max_new) {
    ASSERT_TRUE(engine->submit(greedy(id_of("e", static_cast<int>(submitted)), random_prompt(rng, prompt_len, 1024), max_new),
                               col.callback())
                    .is_ok());
    ASSERT_TRUE(col.wait(++submitted));
  };
  run(20, 4);  // before the start
  ASSERT_TRUE(engine->expert_distribution(ExpertRecordOp::kStart, &path).is_ok());
  run(40, 5);
  run(9, 8);
  ASSERT_TRUE(engine->expert_distribution(ExpertRecordOp::kStop, &path).is_ok());
  run(12, 3);  // after the stop
  ASSERT_TRUE(engine->expert_distribution(ExpertRecordOp::kDump, &path).is_ok());
  EXPECT_EQ(std::filesystem::path(path).parent_path(), dir.path);
  std::ifstream in(path);
  const nlohmann::json d = nlohmann::json::parse(in);
  ASSERT_EQ(d["logical_count"].size(), 1u);
  const auto& rows = d["logical_count"][0];
  ASSERT_EQ(static_cast<int>(rows.size()), cfg.num_hidden_layers);
  const int64_t forwarded = 40 + 4 + 9 + 7;
  for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
    ASSERT_EQ(static_cast<int>(rows[layer].size()), cfg.n_routed_experts);
    int64_t sum = 0;
    for (const auto& c : rows[layer]) sum += c.get<int64_t>();
    EXPECT_EQ(sum, cfg.is_moe_layer(layer) ? forwarded * cfg.num_experts_per_tok : 0) << "layer " << layer;
  }
}

// /update_weights_from_disk on the real loop: after an update to another checkpoint of the same config the engine
// generates what a fresh engine on that checkpoint does (the prefix cache dropped: the same prompt again is not
// served from the old weights' KV), and back again; a request running when the update comes finishes on the old
// weights first; another config, a missing directory and a malformed checkpoint are refused with the model intact.
TEST(BatchEngine, UpdateWeightsFromDiskSwapsTheModelInPlace) {
  const test::ScopedTempDir dir("dserve_engine_update");
  const std::string a = fixture("v3"), b = (dir.path / "reversed").string();
  ASSERT_TRUE(test::write_reversed_checkpoint(a, b));
  BatchEngineOptions o;
  o.model_path = a;
  o.chunked_prefill_size = 16;
  o.verbose = false;
  std::mt19937 rng(17);
  const std::vector<int32_t> prompt = random_prompt(rng, 30, 1024), other = random_prompt(rng, 9, 1024);
  const auto alone = [&](const std::string& model, const std::vector<int32_t>& p, int n) {
    BatchEngineOptions f = o;
    f.model_path = model;
    return test::run_engine(f, {greedy("x", p, n)}).tokens["x"];
  };
  const std::vector<int32_t> on_a = alone(a, prompt, 8), on_b = alone(b, prompt, 8), long_a = alone(a, other, 24);
  ASSERT_EQ(on_a.size(), 8u);
  ASSERT_NE(on_a, on_b) << "the reversed checkpoint must be another model";
  auto engine = make_batch_engine(o).value();
  Collector col;
  size_t n = 0;
  const auto gen = [&](const std::vector<int32_t>& p, int max_new) {
    const std::string rid = id_of("u", static_cast<int>(n));
    EXPECT_TRUE(engine->submit(greedy(rid, p, max_new), col.callback()).is_ok());
    EXPECT_TRUE(col.wait(++n));
    std::lock_guard<std::mutex> lock(col.mu);
    return col.tokens[rid];
  };
  EXPECT_EQ(gen(prompt, 8), on_a);
  // A request running when the update comes: the update waits for it (its tokens are all the old weights').
  ASSERT_TRUE(engine->submit(greedy("running", other, 24), col.callback()).is_ok());
  ++n;
  ASSERT_TRUE(engine->update_weights_from_disk(b, true, false).is_ok());
  ASSERT_TRUE(col.wait(n));
  {
    std::lock_guard<std::mutex> lock(col.mu);
    EXPECT_EQ(col.tokens["running"], long_a);
  }
  EXPECT_EQ(gen(prompt, 8), on_b);  // the prompt's old KV was dropped with the cache
  ASSERT_TRUE(engine->update_weights_from_disk(a, true, false).is_ok());
  EXPECT_EQ(gen(prompt, 8), on_a);
  // Refusals name the problem and leave the model as it was.
  Status st = engine->update_weights_from_disk((dir.path / "missing").string(), true, false);
  EXPECT_NE(st.message().find("not a directory"), std::string::npos) << st.message();
  st = engine->update_weights_from_disk(fixture("v2_lite"), true, false);
  EXPECT_NE(st.message().find("another model"), std::string::npos) << st.message();
  const std::filesystem::path broken = dir.path / "broken";
  std::filesystem::create_directories(broken);
  std::filesystem::copy_file(a + "/config.json", broken / "config.json");
  st = engine->update_weights_from_disk(broken.string(), true, false);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(gen(prompt, 8), on_a);
  // SGLang's RL flow, pause_generation (in place) / update / continue_generation: paused, the update does not wait for
  // the paused request (its KV kept, so the cache is not flushed under it); keep_pause leaves the engine paused, the
  // default resumes it, and the request finishes on the new weights.
  ASSERT_TRUE(engine->submit(greedy("paused", other, 40), col.callback()).is_ok());
  ++n;
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(col.mu);
      if (col.tokens["paused"].size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  engine->pause(PauseMode::kInPlace);
  ASSERT_TRUE(engine->update_weights_from_disk(b, true, /*keep_pause=*/true).is_ok());
  EXPECT_TRUE(engine->stats().paused);
  EXPECT_EQ(engine->stats().num_running, 1);
  ASSERT_TRUE(engine->update_weights_from_disk(b, true, /*keep_pause=*/false).is_ok());
  EXPECT_FALSE(engine->stats().paused);
  ASSERT_TRUE(col.wait(n));
  {
    std::lock_guard<std::mutex> lock(col.mu);
    EXPECT_EQ(col.tokens["paused"].size(), 40u);
  }
  EXPECT_EQ(gen(prompt, 8), on_b);
}

TEST(BatchEngine, AbortReturnsPagesAndRejectsBadInput) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  o.disable_radix_cache = true;
  auto engine = make_batch_engine(o).value();
  Collector col;
  std::mt19937 rng(5);
  ASSERT_TRUE(engine->submit(greedy("long", random_prompt(rng, 40, 1024), 100000), col.callback()).is_ok());
  EXPECT_FALSE(engine->submit(greedy("long", random_prompt(rng, 4, 1024), 4), col.callback()).is_ok()) << "duplicate rid";
  EXPECT_FALSE(engine->submit(greedy("bad", {1, 5000}, 4), col.callback()).is_ok()) << "id outside vocab";
  EXPECT_FALSE(engine->submit(greedy("empty", {}, 4), col.callback()).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine->abort("long");
  ASSERT_TRUE(col.wait(1));
  EXPECT_EQ(col.final_event["long"].reason.kind, FinishReason::Kind::kAbort);
  // With overlap scheduling the step planned ahead still holds the pages when the abort event arrives; they
  // are returned when that step completes (within a step or two).
  EngineStats s = engine->stats();
  for (int i = 0; i < 200 && s.used_tokens != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = engine->stats();
  }
  EXPECT_EQ(s.used_tokens, 0);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  // The engine still serves.
  ASSERT_TRUE(engine->submit(greedy("after", random_prompt(rng, 6, 1024), 3), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(2));
  EXPECT_EQ(col.tokens["after"].size(), 3u);
}

// SGLang's /pause_generation modes, paused from the request's own event (its third token) so the pause lands
// mid-generation: no token comes while paused (a request submitted meanwhile waits too), in_place keeps the request
// running with its pages, retract moves it to the waiting queue (a flush is then allowed), abort ends it; after
// resume the kept requests end with exactly the unpaused greedy tokens.
TEST(BatchEngine, PauseModesHoldRetractOrAbort) {
  std::mt19937 rng(9);
  const std::vector<int32_t> prompt = random_prompt(rng, 40, 1024);
  const int kNew = 48;
  const std::vector<int32_t> want = reference("v3", {prompt}, kNew)[0];
  auto wait_for = [](const std::function<bool()>& ok) {
    for (int i = 0; i < 1000 && !ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return ok();
  };
  for (PauseMode mode : {PauseMode::kInPlace, PauseMode::kRetract, PauseMode::kAbort}) {
    SCOPED_TRACE(mode == PauseMode::kInPlace ? "in_place" : mode == PauseMode::kRetract ? "retract" : "abort");
    auto engine = v3_engine(8192);
    Engine* e = engine.get();
    Collector col;
    Engine::Callback collect = col.callback();
    std::atomic<int> seen{0};
    ASSERT_TRUE(e->submit(greedy("a", prompt, kNew), [&, collect](EngineEvent ev) {
                  const int k = static_cast<int>(ev.new_tokens.size());
                  const int n = seen += k;
                  collect(std::move(ev));
                  if (n >= 3 && n - k < 3) e->pause(mode);
                }).is_ok());
    ASSERT_TRUE(wait_for([&] { return e->stats().paused; }));
    if (mode == PauseMode::kAbort) {
      ASSERT_TRUE(col.wait(1));
      EXPECT_EQ(col.final_event["a"].reason.kind, FinishReason::Kind::kAbort);
    }
    // The step in flight at the pause completes; after that nothing moves.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int held = seen.load();
    EXPECT_GE(held, 3);
    EXPECT_LT(held, kNew);
    ASSERT_TRUE(e->submit(greedy("b", prompt, 5), col.callback()).is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(seen.load(), held);
    {
      std::lock_guard<std::mutex> lock(col.mu);
      EXPECT_TRUE(col.tokens["b"].empty());
    }
    const bool kept = mode != PauseMode::kAbort;
    if (mode == PauseMode::kRetract) {
      ASSERT_TRUE(wait_for([&] { return e->stats().num_waiting == 2; }));
      EXPECT_EQ(e->stats().num_running, 0);
      EXPECT_TRUE(e->flush_cache().is_ok());  // nothing holds KV
      EXPECT_EQ(e->stats().used_tokens, 0);
    } else if (mode == PauseMode::kInPlace) {
      EXPECT_EQ(e->stats().num_running, 1);
      EXPECT_FALSE(e->flush_cache().is_ok());  // the running request holds its pages
    }
    e->resume();
    EXPECT_FALSE(e->stats().paused);
    ASSERT_TRUE(col.wait(2));
    std::lock_guard<std::mutex> lock(col.mu);
    EXPECT_EQ(col.tokens["b"], std::vector<int32_t>(want.begin(), want.begin() + 5));
    if (kept) {
      EXPECT_EQ(col.final_event["a"].reason.kind, FinishReason::Kind::kLength);
      EXPECT_EQ(col.tokens["a"], want);
    } else {
      EXPECT_EQ(col.tokens["a"], std::vector<int32_t>(want.begin(), want.begin() + held));
    }
  }
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

// An explicit --max-total-tokens far beyond memory, or beyond the page ids, is refused with an error naming the flag
// (before: an allocation check aborted the process); a modest one is what the engine gets.
TEST(BatchEngine, OversizedPoolIsRefused) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  o.max_total_tokens = int64_t{1} << 36;  // ~7 x 10^10 tokens (2^30 pages of 64): terabytes of cache
  auto huge = make_batch_engine(o);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.status().message().find("--max-total-tokens"), std::string::npos) << huge.status().message();
  EXPECT_NE(huge.status().message().find("GiB is free"), std::string::npos) << huge.status().message();
  o.max_total_tokens = int64_t{1} << 45;  // past INT32_MAX pages
  auto past = make_batch_engine(o);
  ASSERT_FALSE(past.is_ok());
  EXPECT_NE(past.status().message().find("too large"), std::string::npos) << past.status().message();
  o.max_total_tokens = 4096;
  auto fine = make_batch_engine(o);
  ASSERT_TRUE(fine.is_ok()) << fine.status().message();
  EXPECT_EQ((*fine)->stats().max_total_tokens, 4096);
  EXPECT_EQ((*fine)->stats().max_running_requests, 64) << "the default 256 capped at the pool's 64 pages";
}

// --context-length past the model's max_position_embeddings is refused, as SGLang refuses it, unless
// DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (then taken, up to int32 positions).
TEST(BatchEngine, LongerContextThanTheModelNeedsTheOverride) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  o.max_total_tokens = 2048;
  const int64_t max_pos = load_model_config(fixture("v2_lite")).value().max_position_embeddings;
  o.context_length = max_pos + 1;
  unsetenv("DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN");
  auto refused = make_batch_engine(o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("max_position_embeddings"), std::string::npos) << refused.status().message();
  o.context_length = max_pos;
  EXPECT_TRUE(make_batch_engine(o).is_ok());
  setenv("DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1", 1);
  o.context_length = max_pos + 1;
  auto allowed = make_batch_engine(o);
  o.context_length = int64_t{1} << 40;
  auto past_int32 = make_batch_engine(o);
  unsetenv("DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN");
  ASSERT_TRUE(allowed.is_ok()) << allowed.status().message();
  EXPECT_FALSE(past_int32.is_ok());
}

// A --max-running-requests far past the pool is the pool's page count (each running request holds a page), made at
// once: before, a billion-row limit built a billion free rows and per-row buffers before the server could start.
TEST(BatchEngine, RunningLimitIsCappedByThePool) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  o.max_total_tokens = 2048;  // 32 pages of 64
  o.max_running_requests = 1000000000;
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = make_batch_engine(o);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_EQ((*engine)->stats().max_running_requests, 32);
  Collector col;
  std::mt19937 rng(9);
  ASSERT_TRUE((*engine)->submit(greedy("one", random_prompt(rng, 8, 1024), 3), col.callback()).is_ok());
  ASSERT_TRUE(col.wait(1));
  EXPECT_EQ(col.tokens["one"].size(), 3u);
}

// repetition_penalty > 1 must make already-seen tokens rarer in greedy output.
TEST(BatchEngine, RepetitionPenaltyDiscouragesSeenTokens) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  auto engine = make_batch_engine(o).value();
  Collector col;
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(random_prompt(rng, 30, 1024));
  for (int i = 0; i < 6; ++i) {
    for (float rp : {1.0f, 2.0f}) {
      EngineRequest r = greedy(id_of("p", i, rp == 1.0f ? "_1" : "_2"), prompts[i], 24);
      r.sampling.repetition_penalty = rp;
      ASSERT_TRUE(engine->submit(r, col.callback()).is_ok());
    }
  }
  ASSERT_TRUE(col.wait(12));
  auto repeats = [&](const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
    std::set<int32_t> seen(prompt.begin(), prompt.end());
    int n = 0;
    for (int32_t t : out) n += !seen.insert(t).second;
    return n;
  };
  int with = 0, without = 0, differ = 0;
  for (int i = 0; i < 6; ++i) {
    const auto& a = col.tokens[id_of("p", i, "_1")];
    const auto& b = col.tokens[id_of("p", i, "_2")];
    without += repeats(prompts[i], a);
    with += repeats(prompts[i], b);
    differ += a != b;
  }
  EXPECT_GT(differ, 0);
  EXPECT_LT(with, without) << "repeated tokens with penalty " << with << ", without " << without;
}

// logit_bias: +100 on one token makes greedy decoding emit it every step, -100 on a request's own greedy tokens
// keeps them out, the reported logprobs stay the raw logits'; an id past the vocabulary is refused by name.
TEST(BatchEngine, LogitBiasSteersSampling) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  auto engine = make_batch_engine(o).value();
  std::mt19937 rng(12);
  const std::vector<int32_t> prompt = random_prompt(rng, 20, 1024);
  Collector col;
  EngineRequest plain = greedy("plain", prompt, 8);
  plain.return_logprob = true;
  ASSERT_TRUE(engine->submit(plain, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(1));
  const std::vector<int32_t> base = col.tokens["plain"];
  ASSERT_EQ(base.size(), 8u);
  EngineRequest forced = greedy("forced", prompt, 8);
  forced.sampling.logit_bias = {{77, 100.0f}};
  forced.return_logprob = true;
  EngineRequest avoid = greedy("avoid", prompt, 8);
  for (int32_t t : base) avoid.sampling.logit_bias.emplace_back(t, -100.0f);
  ASSERT_TRUE(engine->submit(forced, col.callback()).is_ok());
  ASSERT_TRUE(engine->submit(avoid, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(3));
  EXPECT_EQ(col.tokens["forced"], std::vector<int32_t>(8, 77));
  for (int32_t t : col.tokens["avoid"]) EXPECT_EQ(std::count(base.begin(), base.end(), t), 0) << t;
  ASSERT_FALSE(col.output_lps["forced"].empty());
  EXPECT_LT(col.output_lps["forced"][0].logprob, -0.01) << "a logprob of the raw logits, not of the biased ones";
  EngineRequest bad = greedy("bad", prompt, 4);
  bad.sampling.logit_bias = {{1 << 20, 1.0f}};
  const Status st = engine->submit(bad, col.callback());
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("logit_bias token id 1048576"), std::string::npos) << st.message();
}

// Constrained decoding on a synthetic vocabulary (token id -> one letter, id 1 the EOS and ids past 600 without
// bytes): greedy and seeded sampled outputs spell a whole match of the regex and end with the EOS once nothing can
// follow; a request whose grammar was made for another vocabulary size is refused.
TEST(BatchEngine, GrammarConstrainsTheOutput) {
  BatchEngineOptions o;
  o.model_path = fixture("v2_lite");
  o.verbose = false;
  auto engine = make_batch_engine(o).value();
  const test::LetterGrammar g = test::letter_grammar(engine->model_config().vocab_size);
  std::mt19937 rng(13);
  Collector col;
  std::vector<std::string> rids;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = greedy(id_of("g", i, ""), random_prompt(rng, 10 + 7 * i, 1024), 24);
    r.sampling.ignore_eos = false;
    if (i % 2) r.sampling.temperature = 1.0f, r.sampling.seed = 70 + i;
    r.grammar = g.fsm;
    rids.push_back(r.rid);
    ASSERT_TRUE(engine->submit(r, col.callback()).is_ok());
  }
  ASSERT_TRUE(col.wait(rids.size()));
  for (const std::string& rid : rids) {
    const auto& toks = col.tokens[rid];
    ASSERT_FALSE(toks.empty()) << rid << ": " << col.final_event[rid].error << " " << col.final_event[rid].reason.matched_text;
    EXPECT_EQ(toks.back(), 1) << rid << " ends with the EOS";
    const std::string text = g.text_before_eos(toks);
    EXPECT_TRUE(g.dfa.matches(text)) << rid << ": '" << text << "'";
    EXPECT_EQ(text.size() + 1, toks.size()) << rid << ": a token that spells nothing";
    EXPECT_EQ(col.final_event[rid].reason.kind, FinishReason::Kind::kStop) << rid;
  }
  // min_new_tokens past the grammar's end: the end of sequence still comes once nothing else can.
  EngineRequest early = greedy("early", random_prompt(rng, 12, 1024), 24);
  early.sampling.ignore_eos = false;
  early.sampling.min_new_tokens = 20;
  early.grammar = g.fsm;
  ASSERT_TRUE(engine->submit(early, col.callback()).is_ok());
  ASSERT_TRUE(col.wait(rids.size() + 1));
  {  // the match, then EOS ids (which end nothing before min_new_tokens) until the request may stop
    const auto& toks = col.tokens["early"];
    const auto first_eos = std::find(toks.begin(), toks.end(), 1);
    ASSERT_NE(first_eos, toks.end());
    const std::vector<int32_t> head(toks.begin(), first_eos + 1);
    EXPECT_TRUE(g.dfa.matches(g.text_before_eos(head))) << g.text_before_eos(head);
    EXPECT_EQ(g.text_before_eos(head).size() + 1, head.size()) << "a token that spells nothing";
    EXPECT_TRUE(std::all_of(first_eos, toks.end(), [](int32_t t) { return t == 1; }));
    EXPECT_GE(toks.size(), 20u);
  }
  EngineRequest bad = greedy("bad", {5, 6, 7}, 4);
  bad.grammar = std::make_shared<const TokenFsm>(g.dfa, std::make_shared<const VocabTrie>(std::vector<std::string>(10)));
  const Status st = engine->submit(bad, col.callback());
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("made for 10 token ids"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ds
