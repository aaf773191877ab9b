// The batch engine with tensor parallelism on the CPU backend (ranks as threads, runner/tp_ranks.h): what a client
// sees equals the single-rank engine's, greedy and seeded, with logprobs, chunked prefill, and MTP drafts.
#include <cmath>
#include <tuple>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/batch_engine.h"
#include "runner/engine_test_util.h"

namespace ds {
namespace {

using Outcome = test::EngineRun;

Outcome run(const std::string& fx, int tp, int spec, const std::vector<EngineRequest>& reqs, int ep = 1, int dp = 1) {
  BatchEngineOptions o;
  o.enable_return_hidden_states = true;  // (requests that ask: HiddenStatesAndRoutedExpertsSameAsOneRank)
  o.enable_return_routed_experts = true;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + fx;
  o.chunked_prefill_size = 40;
  o.page_size = 16;
  o.max_total_tokens = 4096;
  o.verbose = false;
  o.tp_size = tp;
  o.ep_size = ep;
  o.dp_size = dp;
  o.speculative_num_steps = spec;
  return test::run_engine(o, reqs);
}

std::vector<EngineRequest> requests() {
  std::mt19937 rng(23);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.rid = "t";
    r.rid += std::to_string(i);
    for (int k = 0; k < 7 + 21 * i; ++k) r.input_ids.push_back(static_cast<int32_t>(2 + rng() % 1000));
    r.sampling.max_new_tokens = 9;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = 40 + i;
    r.sampling.ignore_eos = true;
    r.return_logprob = true;
    r.top_logprobs_num = i % 3 == 0 ? 2 : 0;
    reqs.push_back(r);
  }
  return reqs;
}

void expect_same(const Outcome& a, const Outcome& b, const std::vector<EngineRequest>& reqs) {
  for (const auto& r : reqs) {
    SCOPED_TRACE(r.rid);
    ASSERT_EQ(a.tokens.at(r.rid), b.tokens.at(r.rid));
    ASSERT_EQ(a.lps.at(r.rid).size(), b.lps.at(r.rid).size());
    for (size_t k = 0; k < a.lps.at(r.rid).size(); ++k)
      EXPECT_NEAR(a.lps.at(r.rid)[k].logprob, b.lps.at(r.rid)[k].logprob, 1e-4) << k;
  }
}

// Rank r's GPU is --base-gpu-id + r x --gpu-id-step, from any first rank (a data-parallel rank's own); a negative base
// or a step below 1 is an error naming both flags.
TEST(RankGpus, BasePlusRankTimesStep) {
  BatchEngineOptions o;
  o.base_gpu_id = 2;
  o.gpu_id_step = 3;
  auto all = rank_gpus(o, 0, 3);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  EXPECT_EQ(*all, (std::vector<int>{2, 5, 8}));
  auto one = rank_gpus(o, 2, 1);
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(*one, (std::vector<int>{8}));
  for (auto [base, step] : std::vector<std::pair<int, int>>{{-1, 1}, {0, 0}}) {
    o.base_gpu_id = base;
    o.gpu_id_step = step;
    auto bad = rank_gpus(o, 0, 2);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_NE(bad.status().message().find("--base-gpu-id"), std::string::npos) << bad.status().message();
    EXPECT_NE(bad.status().message().find("--gpu-id-step"), std::string::npos) << bad.status().message();
  }
}

TEST(TensorParallelEngine, SameResultsAsOneRank) {
  const auto reqs = requests();
  for (const char* fx : {"v3", "v2_lite"}) {
    SCOPED_TRACE(fx);
    const Outcome one = run(fx, 1, 0, reqs);
    for (int tp : {2, 4}) {
      expect_same(run(fx, tp, 0, reqs), one, reqs);
      expect_same(run(fx, tp, 0, reqs, tp), one, reqs);  // experts dealt out whole (--ep-size)
    }
  }
  // With MTP drafts (verify steps and the drafter on every rank): the same again.
  const Outcome spec_one = run("v3", 1, 2, reqs);
  const Outcome spec_two = run("v3", 2, 2, reqs);
  expect_same(spec_two, spec_one, reqs);
  EXPECT_EQ(spec_two.stats.spec_draft_tokens, spec_one.stats.spec_draft_tokens);
}

// /update_weights_from_disk with tensor parallelism (2 ranks; and experts dealt out whole): every rank takes its
// shard of the new checkpoint, so the engine then gives what one rank on that checkpoint gives; data-parallel
// attention refuses it by name.
TEST(TensorParallelEngine, UpdateWeightsFromDiskShardsTheCheckpoint) {
  const test::ScopedTempDir dir("dserve_tp_update");
  const std::string a = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  const std::string b = (dir.path / "reversed").string();
  ASSERT_TRUE(test::write_reversed_checkpoint(a, b));
  auto reqs = requests();
  reqs.resize(3);
  BatchEngineOptions one;
  one.model_path = b;
  one.chunked_prefill_size = 40;
  one.page_size = 16;
  one.max_total_tokens = 4096;
  one.verbose = false;
  const Outcome want = test::run_engine(one, reqs);
  for (int ep : {1, 2}) {
    SCOPED_TRACE(ep);
    BatchEngineOptions o = one;
    o.model_path = a;
    o.tp_size = 2;
    o.ep_size = ep;
    auto engine = make_batch_engine(o);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    const Status st = (*engine)->update_weights_from_disk(b, true, false);
    ASSERT_TRUE(st.is_ok()) << st.message();
    expect_same(test::run_requests(**engine, reqs), want, reqs);
  }
  BatchEngineOptions dp = one;
  dp.model_path = a;
  dp.tp_size = 2;
  dp.dp_size = 2;
  auto engine = make_batch_engine(dp);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  EXPECT_NE((*engine)->update_weights_from_disk(b, true, false).message().find("--dp-size"), std::string::npos);
}

// Data-parallel attention: two or four ranks, each with its own scheduler and pool and the requests the controller
// gave it, stepping in lockstep (idle ranks too); MLPs sharded over the ranks (or experts dealt out): a client sees
// the one-rank engine's tokens and logprobs, and every pool ends idle.
TEST(DataParallelAttentionEngine, SameResultsAsOneRank) {
  const auto reqs = requests();
  for (const char* fx : {"v3", "v2_lite"}) {
    SCOPED_TRACE(fx);
    const Outcome one = run(fx, 1, 0, reqs);
    for (int dp : {2, 4}) {
      SCOPED_TRACE("dp " + std::to_string(dp));
      const Outcome got = run(fx, dp, 0, reqs, 1, dp);
      expect_same(got, one, reqs);
      EXPECT_EQ(got.stats.num_running + got.stats.num_waiting, 0);
      EXPECT_EQ(got.stats.used_tokens, got.stats.cached_tokens);
      expect_same(run(fx, dp, 0, reqs, dp, dp), one, reqs);  // experts dealt out whole
    }
  }
}

// return_hidden_states and return_routed_experts under tensor parallelism (rank 0's rows: the whole hidden state after
// the all-reduce, the routing every rank makes alike; experts cut or dealt out) and data-parallel attention (each rank
// its own requests' rows, its rows of the MLPs' gathered routing; idle ranks record nothing): the one-rank engine's
// rows to float rounding and its routed picks.
TEST(TensorParallelEngine, HiddenStatesAndRoutedExpertsSameAsOneRank) {
  auto reqs = requests();
  for (auto& r : reqs) {
    r.return_hidden_states = true;
    r.return_routed_experts = true;
  }
  const Outcome one = run("v3", 1, 0, reqs);
  for (const auto [tp, ep, dp] : std::vector<std::tuple<int, int, int>>{{2, 1, 1}, {2, 2, 1}, {2, 1, 2}, {4, 1, 4}}) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " ep " + std::to_string(ep) + " dp " + std::to_string(dp));
    const Outcome got = run("v3", tp, 0, reqs, ep, dp);
    expect_same(got, one, reqs);
    for (const auto& r : reqs) {
      SCOPED_TRACE(r.rid);
      const auto& a = got.hidden.at(r.rid);
      const auto& b = one.hidden.at(r.rid);
      ASSERT_EQ(b.size(), r.input_ids.size() + one.tokens.at(r.rid).size() - 1);
      test::expect_same_hidden_rows(a, b, 1e-4);
      EXPECT_EQ(got.final_event.at(r.rid).routed_experts, one.final_event.at(r.rid).routed_experts);
      EXPECT_EQ(one.final_event.at(r.rid).routed_experts.size(), b.size() * 3 * 4);  // v3: 3 layers, top-4
    }
  }
}

// Data-parallel attention with MTP drafts: every rank verifies and drafts its own sequences, the MTP layer's MLP
// gathered over the ranks as the main layers' are (a rank with nothing to draft, or idle, makes zero-token MTP
// forwards so the collectives meet): the one-rank engine's tokens and logprobs, with or without drafts.
TEST(DataParallelAttentionEngine, SpeculativeDecodingSameResultsAsOneRank) {
  const auto reqs = requests();
  const Outcome one = run("v3", 1, 0, reqs);
  for (int dp : {2, 4}) {
    for (int steps : {1, 3}) {
      SCOPED_TRACE("dp " + std::to_string(dp) + " steps " + std::to_string(steps));
      const Outcome got = run("v3", dp, steps, reqs, 1, dp);
      expect_same(got, one, reqs);
      EXPECT_GT(got.stats.spec_verify_steps, 0u);
      EXPECT_GT(got.stats.spec_draft_tokens, 0u);
      EXPECT_EQ(got.stats.speculative_num_steps, steps);
      EXPECT_EQ(got.stats.used_tokens, got.stats.cached_tokens);
    }
  }
}

// /start_profile with data-parallel attention: each rank writes its own trace (-DP-<rank>), all ranks start or
// none (a refused start leaves none on), and the ranks' spans together cover every request's prompt tokens.
TEST(DataParallelAttentionEngine, ProfileWritesATraceARank) {
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  o.page_size = 16;
  o.max_total_tokens = 4096;
  o.verbose = false;
  o.tp_size = 2;
  o.dp_size = 2;
  auto engine = make_batch_engine(o).value();
  const test::ScopedTempDir dir("dserve_dp_profile");
  ProfileOptions po;
  po.output_dir = (dir.path / "missing").string();
  EXPECT_FALSE(engine->start_profile(po).is_ok());
  po.output_dir = dir.path.string();
  ASSERT_TRUE(engine->start_profile(po).is_ok()) << "the refused start left no rank on";
  const auto reqs = requests();
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
  int64_t prompt_tokens = 0;
  for (const auto& r : reqs) {
    ASSERT_TRUE(engine
                    ->submit(r,
                             [&](EngineEvent e) {
                               std::lock_guard<std::mutex> lock(mu);
                               finished += e.finished;
                               cv.notify_all();
                             })
                    .is_ok());
    prompt_tokens += static_cast<int64_t>(r.input_ids.size());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(300), [&] { return finished == reqs.size(); }));
  }
  std::vector<std::string> paths;
  ASSERT_TRUE(engine->stop_profile(&paths).is_ok());
  ASSERT_EQ(paths.size(), 2u);
  int64_t prefill = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(paths[r].find("-DP-" + std::to_string(r) + ".trace.json"), std::string::npos) << paths[r];
    std::ifstream in(paths[r]);
    const nlohmann::json trace = nlohmann::json::parse(in);
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X") prefill += e["args"]["prefill_tokens"].get<int64_t>();
  }
  EXPECT_EQ(prefill, prompt_tokens);
}

// --load-format dummy with --tp-size: each rank makes its own shard (no whole model in memory); the ranks agree on
// every token (TpRanks fails a step whose ranks sampled differently), so their replicated tensors are the same.
TEST(TensorParallelEngine, DummyWeightsMadeRankByRankServe) {
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  o.load_format = "dummy";
  o.page_size = 16;
  o.max_total_tokens = 4096;
  o.verbose = false;
  o.tp_size = 2;
  const auto reqs = requests();
  const Outcome two = test::run_engine(o, reqs);
  for (const auto& r : reqs) {
    ASSERT_EQ(two.tokens.at(r.rid).size(), 9u) << r.rid;
    EXPECT_TRUE(two.final_event.at(r.rid).error.empty()) << two.final_event.at(r.rid).error;
  }
}

TEST(TensorParallelEngine, WhatDoesNotShardIsRefused) {
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  o.verbose = false;
  o.tp_size = 3;
  auto e = make_batch_engine(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("attention heads"), std::string::npos) << e.status().message();
  o.tp_size = 0;
  EXPECT_FALSE(make_batch_engine(o).is_ok());
  o.tp_size = 2;
  o.ep_size = 4;
  e = make_batch_engine(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--ep-size 4"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace ds
