// The CPU reference against transformers: every fixture's teacher-forced log-probabilities, greedy
// continuations and MTP draft distributions (tests/fixtures/*/reference.json, made by
// scripts/make_fixtures.py with transformers 5.17 in fp32).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/deepseek_model.h"
#include "runner/attn_metadata.h"
#include "runner/sequence_runner.h"

namespace ds {
namespace {

constexpr double kTol = 2e-3;  // max |logprob difference| allowed by the acceptance criteria

std::string fixture_dir(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

struct Loaded {
  ModelConfig cfg;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<DeepseekModel> model;
  nlohmann::json ref;
};

Loaded load(const std::string& name, const ModelOptions& options = {}) {
  Loaded l;
  auto cfg = load_model_config(fixture_dir(name));
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().message();
  l.cfg = cfg.value();
  auto w = load_weights(fixture_dir(name), l.cfg);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  l.ops = make_cpu_ops();
  l.model = std::make_unique<DeepseekModel>(l.cfg, w.value(), *l.ops, options);
  std::ifstream f(fixture_dir(name) + "/reference.json");
  EXPECT_TRUE(f.good()) << "missing reference.json for " << name;
  l.ref = nlohmann::json::parse(f);
  return l;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// Max |ours - reference| over positions 1..n-1 of a score entry.
double score_diff(const ScoreResult& r, const nlohmann::json& entry) {
  double worst = 0;
  const auto& ref = entry["token_logprobs"];
  for (size_t i = 1; i < ref.size(); ++i) worst = std::max(worst, std::fabs(r.token_logprobs[i] - ref[i].get<double>()));
  return worst;
}

// The reference's score entry with the longest prompt (the first of equals).
const nlohmann::json* longest_score_entry(const nlohmann::json& ref) {
  const nlohmann::json* longest = nullptr;
  for (const auto& e : ref["score"])
    if (!longest || e["input_ids"].size() > (*longest)["input_ids"].size()) longest = &e;
  return longest;
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

// The W8A8 oracle (DSERVE_FP8_NATIVE=1) on the FP8 fixture with 128-multiple dims: the norms' FP8 activations
// (Ops::rms_norm_q, read by the q / kv_a pair, the shared expert and the routed experts) change nothing, to the
// bit, against every linear quantizing for itself (DSERVE_FP8_FUSED_NORM=0).
TEST(FixtureW8A8, NormQuantizationChangesNothing) {
  std::vector<std::vector<float>> runs;
  for (const char* fused : {"1", "0"}) {
    setenv("DSERVE_FP8_NATIVE", "1", 1);
    setenv("DSERVE_FP8_FUSED_NORM", fused, 1);
    Loaded l = load("v3_fp8_h256");
    unsetenv("DSERVE_FP8_NATIVE");
    unsetenv("DSERVE_FP8_FUSED_NORM");
    ASSERT_TRUE(l.model);
    SequenceRunner runner(*l.model, *l.ops);
    std::vector<float> all;
    for (size_t i = 0; i < 2 && i < l.ref["score"].size(); ++i) {  // two prompts keep it short under ASan
      ScoreResult r = runner.score(ids_of(l.ref["score"][i]["input_ids"]), 1);
      all.insert(all.end(), r.token_logprobs.begin() + 1, r.token_logprobs.end());
    }
    runs.push_back(all);
  }
  ASSERT_FALSE(runs[0].empty());
  EXPECT_EQ(runs[0], runs[1]);
}

// The absorbed form's FP8 products (Ops::prepare_absorbed_fp8) on the CPU's W8A8 emulation, v3_fp8_mla128 (the
// fixture with 128-multiple MLA dims; opt-in, DSERVE_FP8_BMM=1), every token in a one-token step: they run
// (DSERVE_FP8_BMM=0, the fp32 products of the dequantized kv_b_proj, gives other results) and stay about as close
// to transformers (mean |logprob diff| within 1.5x + 0.05 of the DSERVE_FP8_BMM=0 run's).
TEST(FixtureW8A8, AbsorbedFp8ProductsStayClose) {
  double mean[2] = {0, 0};
  std::vector<float> lps[2];
  for (int bmm : {1, 0}) {
    setenv("DSERVE_FP8_NATIVE", "1", 1);
    setenv("DSERVE_FP8_BMM", bmm ? "1" : "0", 1);
    Loaded l = load("v3_fp8_mla128");
    unsetenv("DSERVE_FP8_NATIVE");
    unsetenv("DSERVE_FP8_BMM");
    ASSERT_TRUE(l.model);
    SequenceRunner runner(*l.model, *l.ops);
    double sum = 0;
    int64_t n = 0;
    for (size_t i = 0; i < 2 && i < l.ref["score"].size(); ++i) {  // two prompts keep it short under ASan
      const auto& e = l.ref["score"][i];
      ScoreResult r = runner.score(ids_of(e["input_ids"]), 1, AttnMode::kAuto, 1);
      for (size_t p = 1; p < e["token_logprobs"].size(); ++p) {
        sum += std::fabs(r.token_logprobs[p] - e["token_logprobs"][p].get<double>());
        ++n;
      }
      lps[bmm].insert(lps[bmm].end(), r.token_logprobs.begin() + 1, r.token_logprobs.end());
    }
    ASSERT_GT(n, 0);
    mean[bmm] = sum / static_cast<double>(n);
  }
  std::printf("FIXTUREW8A8 v3_fp8_mla128 one-token steps, mean |logprob diff| vs transformers: fp8 products %.4f, "
              "fp32 products %.4f\n", mean[1], mean[0]);
  EXPECT_NE(lps[0], lps[1]) << "DSERVE_FP8_BMM=0 changed nothing: the FP8 products did not run";
  EXPECT_LE(mean[1], 1.5 * mean[0] + 0.05);
}

TEST_P(FixtureTest, ScoreMatchesTransformers) {
  Loaded l = load(GetParam());
  ASSERT_TRUE(l.model);
  SequenceRunner runner(*l.model, *l.ops);
  size_t longest = 0;
  ASSERT_EQ(l.ref["score"].size(), l.ref["next_top"].size());
  for (size_t p = 0; p < l.ref["score"].size(); ++p) {
    const auto& e = l.ref["score"][p];
    std::vector<int32_t> ids = ids_of(e["input_ids"]);
    longest = std::max(longest, ids.size());
    ScoreResult r = runner.score(ids, 5);
    const double d = score_diff(r, e);
    EXPECT_LE(d, kTol) << GetParam() << " prompt of length " << ids.size();
    // Top-k lists: the same ids wherever the reference's neighbouring probabilities are well separated.
    const auto& tops = e["top_logprobs"];
    for (size_t i = 1; i < tops.size(); ++i) {
      for (size_t k = 0; k < tops[i].size() && k < r.top_logprobs[i].size(); ++k) {
        const double ref_lp = tops[i][k][0].get<double>();
        EXPECT_NEAR(r.top_logprobs[i][k].first, ref_lp, kTol) << GetParam() << " pos " << i << " rank " << k;
        const bool separated = (k == 0 || tops[i][k - 1][0].get<double>() - ref_lp > 1e-2) &&
                               (k + 1 >= tops[i].size() || ref_lp - tops[i][k + 1][0].get<double>() > 1e-2);
        if (separated) {
          EXPECT_EQ(r.top_logprobs[i][k].second, tops[i][k][1].get<int>()) << GetParam() << " pos " << i;
        }
      }
    }
    // Distribution after the whole prompt (covers length-1 prompts too), from the same pass.
    const auto& nt = l.ref["next_top"][p];
    EXPECT_EQ(r.next_top.size(), std::min<size_t>(5, nt.size())) << GetParam() << " prompt " << p;
    for (size_t k = 0; k < nt.size() && k < r.next_top.size(); ++k)
      EXPECT_NEAR(r.next_top[k].first, nt[k][0].get<double>(), kTol) << GetParam() << " prompt " << p << " rank " << k;
  }
  EXPECT_GE(longest, 500u) << "fixture must include a prompt of >= 500 tokens";
}

// Shared-experts fusion (ModelOptions, off by default, as the tests above ran): every fixture has shared experts and
// with the fusion runs them as routed ones (V2 / V2-Lite's cut in two parts, V3's one); the first prompt matches
// transformers that way too, and both runs agree to float rounding.
TEST_P(FixtureTest, SharedExpertsFusionOnAndOff) {
  ModelOptions on_opts;
  on_opts.shared_experts_fusion = true;
  Loaded on = load(GetParam(), on_opts);
  Loaded off = load(GetParam());
  ASSERT_TRUE(on.model && off.model);
  EXPECT_GT(on.cfg.n_shared_experts, 0);
  EXPECT_TRUE(on.model->shared_experts_fused()) << GetParam();
  EXPECT_FALSE(off.model->shared_experts_fused()) << GetParam();
  const auto& e = on.ref["score"][0];
  const std::vector<int32_t> ids = ids_of(e["input_ids"]);
  SequenceRunner r_on(*on.model, *on.ops), r_off(*off.model, *off.ops);
  const ScoreResult a = r_on.score(ids, 0), b = r_off.score(ids, 0);
  EXPECT_LE(score_diff(a, e), kTol) << "fusion on";
  double worst = 0;
  for (size_t i = 1; i < a.token_logprobs.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(a.token_logprobs[i] - b.token_logprobs[i])));
  EXPECT_LE(worst, 1e-4) << GetParam();
}

TEST_P(FixtureTest, AbsorbedAndChunkedPathsMatchTransformers) {
  Loaded l = load(GetParam());
  SequenceRunner runner(*l.model, *l.ops);
  // The longest prompt through (a) the absorbed MQA form for the whole prefill and (b) chunked prefill in
  // MHA form over a cached prefix; both must still match the reference.
  const nlohmann::json* longest = longest_score_entry(l.ref);
  std::vector<int32_t> ids = ids_of((*longest)["input_ids"]);
  EXPECT_LE(score_diff(runner.score(ids, 0, AttnMode::kAbsorbed), *longest), kTol) << "absorbed";
  EXPECT_LE(score_diff(runner.score(ids, 0, AttnMode::kMha, 100), *longest), kTol) << "chunked mha";
  EXPECT_LE(score_diff(runner.score(ids, 0, AttnMode::kAbsorbed, 77), *longest), kTol) << "chunked absorbed";
}

// V3.2's prefill form by context length (ModelOptions::sparse_prefill_min_context): at or past the threshold the
// automatic choice is the absorbed sparse form, below it the MHA form with the top-k mask; both match transformers.
TEST(FixtureV32, SparsePrefillFormByContext) {
  ModelOptions sparse_opts, dense_opts;
  sparse_opts.sparse_prefill_min_context = 1;
  dense_opts.sparse_prefill_min_context = int64_t{1} << 40;
  Loaded sparse = load("v32", sparse_opts), dense = load("v32", dense_opts);
  ASSERT_TRUE(sparse.model && dense.model);
  const nlohmann::json* longest = longest_score_entry(sparse.ref);
  const std::vector<int32_t> ids = ids_of((*longest)["input_ids"]);
  ASSERT_GT(ids.size(), static_cast<size_t>(sparse.cfg.index_topk));  // the top-k selects
  SequenceRunner rs(*sparse.model, *sparse.ops), rd(*dense.model, *dense.ops);
  const ScoreResult a = rs.score(ids, 0), b = rd.score(ids, 0);
  EXPECT_LE(score_diff(a, *longest), kTol) << "sparse";
  EXPECT_LE(score_diff(b, *longest), kTol) << "dense";
  // Each automatic choice is exactly the forced form (same backend, same order of operations)...
  EXPECT_EQ(a.token_logprobs, rs.score(ids, 0, AttnMode::kAbsorbed).token_logprobs);
  EXPECT_EQ(b.token_logprobs, rd.score(ids, 0, AttnMode::kMha).token_logprobs);
  // ...and the two forms round differently, so the threshold did choose.
  EXPECT_NE(a.token_logprobs, b.token_logprobs);
}

// The MHA prefill over the context in chunks (ModelOptions::mha_chunk_bytes small enough for chunks of a few
// positions), merged by log-sum-exp: the transformers reference within kTol, the one-pass results within fp32
// rounding, and not bit for bit the one-pass results (so the chunks did run). Prefill chunks of 7 tokens give
// every step after the first a prefix to cut.
TEST(FixtureV3, MhaContextChunksMatchOnePass) {
  Loaded whole = load("v3");
  ASSERT_TRUE(whole.model);
  ModelOptions chunked_opts;
  chunked_opts.mha_chunk_bytes = 3 * DeepseekModel::mha_row_bytes(whole.cfg, DType::kF32);  // 3 context rows a chunk
  Loaded chunked = load("v3", chunked_opts);
  ASSERT_TRUE(chunked.model);
  const nlohmann::json* longest = longest_score_entry(whole.ref);
  const std::vector<int32_t> ids = ids_of((*longest)["input_ids"]);
  ASSERT_GT(ids.size(), 14u);
  SequenceRunner rw(*whole.model, *whole.ops), rc(*chunked.model, *chunked.ops);
  const ScoreResult a = rw.score(ids, 0, AttnMode::kAuto, 7), b = rc.score(ids, 0, AttnMode::kAuto, 7);
  EXPECT_LE(score_diff(b, *longest), kTol);
  ASSERT_EQ(a.token_logprobs.size(), b.token_logprobs.size());
  for (size_t i = 1; i < a.token_logprobs.size(); ++i) EXPECT_NEAR(a.token_logprobs[i], b.token_logprobs[i], 1e-4) << i;
  EXPECT_NE(a.token_logprobs, b.token_logprobs);
}

// The same over a batch of sequences with different prefixes in one step (chunks cutting across sequences and
// leaving some of them out: empty runs), with the metadata's host copies and without them (read back).
TEST(FixtureV3, MhaContextChunksAcrossSequences) {
  Loaded whole = load("v3");
  ASSERT_TRUE(whole.model);
  ModelOptions chunked_opts;
  chunked_opts.mha_chunk_bytes = 4 * DeepseekModel::mha_row_bytes(whole.cfg, DType::kF32);  // 4 rows a chunk
  Loaded chunked = load("v3", chunked_opts);
  ASSERT_TRUE(chunked.model);
  const std::vector<int32_t> ids = ids_of(longest_score_entry(whole.ref)->operator[]("input_ids"));
  ASSERT_GT(ids.size(), 14u);
  // Three sequences: prefixes of 11, 2 and 6 tokens, then 3, 5 and 2 new ones in one step.
  const int64_t prefix[3] = {11, 2, 6}, fresh[3] = {3, 5, 2};
  std::vector<int32_t> pages[3] = {{0}, {1}, {2}};
  const auto tokens = [&](const std::vector<int64_t>& from, const std::vector<int64_t>& count) {
    std::vector<int32_t> t;
    for (size_t s = 0; s < from.size(); ++s)
      for (int64_t i = 0; i < count[s]; ++i) t.push_back(ids[(from[s] + i + 3 * s) % ids.size()]);
    Tensor out = Tensor::empty({static_cast<int64_t>(t.size())}, DType::kI32);
    std::copy(t.begin(), t.end(), out.data_as<int32_t>());
    return out;
  };
  std::vector<Tensor> outs;
  for (int run = 0; run < 3; ++run) {  // one pass; chunks with host copies; chunks reading the metadata back
    Loaded& l = run == 0 ? whole : chunked;
    KvCache cache = make_kv_cache(*l.ops, l.cfg, 64, 3, 0);
    AttnMetadata first = build_attn_metadata(
        {SeqSlice{0, prefix[0], &pages[0]}, SeqSlice{0, prefix[1], &pages[1]}, SeqSlice{0, prefix[2], &pages[2]}}, 64,
        *l.ops);
    (void)l.model->forward(tokens({0, 0, 0}, {prefix[0], prefix[1], prefix[2]}), first, cache);
    AttnMetadata step = build_attn_metadata({SeqSlice{prefix[0], fresh[0], &pages[0]},
                                             SeqSlice{prefix[1], fresh[1], &pages[1]},
                                             SeqSlice{prefix[2], fresh[2], &pages[2]}},
                                            64, *l.ops);
    if (run == 2) step.host_positions = step.host_q_starts = step.host_seq_lens = Tensor();
    outs.push_back(l.model->forward(tokens({prefix[0], prefix[1], prefix[2]}, {fresh[0], fresh[1], fresh[2]}), step,
                                    cache));  // [10, d]
  }
  for (int run = 1; run < 3; ++run) {
    ASSERT_EQ(outs[run].shape(), outs[0].shape());
    double worst = 0;
    bool identical = true;
    for (int64_t i = 0; i < outs[0].numel(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(outs[run].f32()[i] - outs[0].f32()[i])));
      identical = identical && outs[run].f32()[i] == outs[0].f32()[i];
    }
    EXPECT_LE(worst, 1e-4) << "run " << run;
    EXPECT_FALSE(identical) << "run " << run;
  }
  EXPECT_EQ(std::vector<float>(outs[1].f32(), outs[1].f32() + outs[1].numel()),
            std::vector<float>(outs[2].f32(), outs[2].f32() + outs[2].numel()));
}

// The expert counts (SGLang's expert distribution recorder): a MoE layer's row gains top_k picks a real row, rows past
// AttnMetadata::real_rows (a CUDA graph's padding) none, the dense layer's row stays 0, fused shared experts are not
// counted, and the first 3 rows of a 7-token forward count as those 3 tokens forwarded alone (the model is causal).
TEST(FixtureV3, ExpertCountsLeaveOutPaddingRows) {
  for (bool fused : {false, true}) {
    ModelOptions mo;
    mo.shared_experts_fusion = fused;
    Loaded l = load("v3", mo);
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->shared_experts_fused(), fused);
    l.model->enable_expert_counts();
    const std::vector<int32_t> ids = ids_of(longest_score_entry(l.ref)->operator[]("input_ids"));
    ASSERT_GE(ids.size(), 7u);
    const std::vector<int32_t> page = {0};
    const auto counts_of = [&](int64_t n, int32_t real) {
      Tensor& c = l.model->expert_counts();
      l.ops->zero_(c);
      KvCache cache = make_kv_cache(*l.ops, l.cfg, 64, 1, 0);
      AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &page}}, 64, *l.ops);
      if (real >= 0) {
        meta.real_rows = Tensor::empty({1}, DType::kI32);
        meta.real_rows.data_as<int32_t>()[0] = real;
      }
      Tensor tok = Tensor::empty({n}, DType::kI32);
      std::copy(ids.begin(), ids.begin() + n, tok.data_as<int32_t>());
      (void)l.model->forward(tok, meta, cache);
      EXPECT_EQ(c.shape(), (Shape{l.cfg.num_hidden_layers, l.cfg.n_routed_experts}));
      return std::vector<int32_t>(c.data_as<int32_t>(), c.data_as<int32_t>() + c.numel());
    };
    const std::vector<int32_t> padded = counts_of(7, 3), alone = counts_of(3, -1), all = counts_of(7, -1);
    EXPECT_EQ(padded, alone) << "fused " << fused;
    const int64_t E = l.cfg.n_routed_experts, K = l.cfg.num_experts_per_tok;
    for (int layer = 0; layer < l.cfg.num_hidden_layers; ++layer) {
      int64_t sum3 = 0, sum7 = 0;
      for (int64_t e = 0; e < E; ++e) {
        sum3 += padded[static_cast<size_t>(layer * E + e)];
        sum7 += all[static_cast<size_t>(layer * E + e)];
      }
      const bool moe = l.cfg.is_moe_layer(layer);
      EXPECT_EQ(sum3, moe ? 3 * K : 0) << "layer " << layer << " fused " << fused;
      EXPECT_EQ(sum7, moe ? 7 * K : 0) << "layer " << layer << " fused " << fused;
    }
  }
}

// `score` turns a step's hidden rows into log-probabilities 1,024 rows at a time: a 1,500-token step (two blocks)
// gives what 700-token prefill steps (one block each) give, to prefill-order rounding.
TEST(FixtureV3, ScoreLogitBlocks) {
  Loaded l = load("v3");
  ASSERT_TRUE(l.model);
  std::vector<int32_t> ids(1500);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % l.cfg.vocab_size);
  SequenceRunner runner(*l.model, *l.ops);
  const ScoreResult one = runner.score(ids, 2), chunked = runner.score(ids, 2, AttnMode::kAuto, 700);
  ASSERT_EQ(one.token_logprobs.size(), ids.size());
  for (size_t i = 1; i < ids.size(); ++i) {
    ASSERT_NEAR(one.token_logprobs[i], chunked.token_logprobs[i], 1e-4) << i;
    ASSERT_EQ(one.top_logprobs[i].size(), 2u) << i;
    EXPECT_NEAR(one.top_logprobs[i][0].first, chunked.top_logprobs[i][0].first, 1e-4) << i;
  }
  ASSERT_FALSE(one.next_top.empty());
  EXPECT_EQ(one.next_top[0].second, chunked.next_top[0].second);
}

TEST_P(FixtureTest, GreedyGenerationMatchesTransformers) {
  Loaded l = load(GetParam());
  SequenceRunner runner(*l.model, *l.ops);
  for (const auto& e : l.ref["generate"]) {
    GenerateOptions opts;
    opts.max_new_tokens = e["max_new_tokens"].get<int>();
    opts.sampling.ignore_eos = true;
    opts.sampling.temperature = 0.0f;
    GenerateResult r = runner.generate(ids_of(e["input_ids"]), opts);
    const auto ref_ids = e["output_ids"].get<std::vector<int32_t>>();
    const auto margins = e["top2_margin"].get<std::vector<double>>();
    const auto ref_lps = e["output_logprobs"].get<std::vector<double>>();
    ASSERT_EQ(r.output_ids.size(), ref_ids.size());
    int compared = 0;
    for (size_t i = 0; i < ref_ids.size(); ++i) {
      if (margins[i] <= 1e-2) break;  // a near-tie: the continuation may legitimately differ from here on
      EXPECT_EQ(r.output_ids[i], ref_ids[i]) << GetParam() << " step " << i;
      EXPECT_NEAR(r.output_logprobs[i], ref_lps[i], kTol) << GetParam() << " step " << i;
      if (r.output_ids[i] != ref_ids[i]) break;
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

TEST_P(FixtureTest, MtpDraftMatchesReference) {
  Loaded l = load(GetParam());
  if (!l.ref.contains("mtp")) {
    EXPECT_EQ(l.model->num_mtp_layers(), 0) << "checkpoint has an MTP layer but the reference has no mtp entry";
    return;
  }
  ASSERT_GE(l.model->num_mtp_layers(), 1);
  for (const auto& e : l.ref["mtp"]) {
    std::vector<int32_t> ids = ids_of(e["input_ids"]);
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<int32_t> pages(static_cast<size_t>((n + 63) / 64 + 1));
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
    KvCache cache = make_kv_cache(*l.ops, l.cfg, 64, static_cast<int>(pages.size()), l.model->num_mtp_layers());
    AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &pages}}, 64, *l.ops);
    Tensor tok = Tensor::empty({n}, DType::kI32);
    std::copy(ids.begin(), ids.end(), tok.data_as<int32_t>());
    Tensor hidden = l.model->forward(tok, meta, cache);  // [n, d] after model.norm
    // Slot i pairs h_i with token i + 1, at position i.
    std::vector<int64_t> rows;
    for (int64_t i = 0; i + 1 < n; ++i) rows.push_back(i);
    Tensor h = l.ops->select_rows(hidden, rows);
    Tensor next = Tensor::empty({n - 1}, DType::kI32);
    std::copy(ids.begin() + 1, ids.end(), next.data_as<int32_t>());
    AttnMetadata mmeta = build_attn_metadata({SeqSlice{0, n - 1, &pages}}, 64, *l.ops);
    Tensor z = l.model->mtp_forward(0, next, h, mmeta, cache);
    Tensor lp = l.ops->log_softmax(l.model->mtp_logits(0, z));  // [n - 1, vocab]
    const auto& tops = e["draft_top"];
    ASSERT_EQ(static_cast<int64_t>(tops.size()), n - 1);
    double worst = 0;
    for (int64_t i = 0; i + 1 < n; ++i)
      for (const auto& pair : tops[i]) {
        const int id = pair[1].get<int>();
        worst = std::max(worst, std::fabs(lp.f32()[i * lp.dim(1) + id] - pair[0].get<double>()));
      }
    EXPECT_LE(worst, kTol) << GetParam() << " MTP draft logprobs";
  }
}

// Decode over the latent cache (absorbed form, one token per step) must equal a full recompute of the
// whole sequence in MHA form, and decoding in MHA form must agree too.
TEST_P(FixtureTest, DecodeWithCacheEqualsFullRecompute) {
  Loaded l = load(GetParam());
  SequenceRunner runner(*l.model, *l.ops);
  std::vector<int32_t> prompt = ids_of(l.ref["generate"][0]["input_ids"]);
  GenerateOptions opts;
  opts.max_new_tokens = 12;
  opts.sampling.ignore_eos = true;
  opts.sampling.temperature = 0.0f;
  GenerateResult absorbed = runner.generate(prompt, opts, AttnMode::kAbsorbed);
  GenerateResult mha = runner.generate(prompt, opts, AttnMode::kMha);
  EXPECT_EQ(absorbed.output_ids, mha.output_ids);
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), absorbed.output_ids.begin(), absorbed.output_ids.end() - 1);
  ScoreResult r = runner.score(full, 0, AttnMode::kMha);
  for (size_t i = 0; i + 1 < absorbed.output_ids.size(); ++i) {
    const size_t pos = prompt.size() + i;  // position of generated token i in `full`
    EXPECT_NEAR(r.token_logprobs[pos], absorbed.output_logprobs[i], 1e-4) << GetParam() << " step " << i;
    EXPECT_NEAR(mha.output_logprobs[i], absorbed.output_logprobs[i], 1e-4) << GetParam() << " step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         ::testing::Values("v2_lite", "v2", "v3", "v3_fp8", "v32", "v3_fp8_h256", "v3_fp8_mla128"));

}  // namespace
}  // namespace ds
