// End to end on the GPU: every fixture (tests/fixtures/*) through CudaOps against the transformers
// reference (bf16 tolerance: max |logprob diff| <= 5e-2, top-1 agreement wherever the reference margin
// exceeds 0.1), the absorbed and chunked paths, MTP drafts, and greedy generation against the CPU backend.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/deepseek_model.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/gpu_test_util.h"
#include "runner/attn_metadata.h"
#include "runner/sequence_runner.h"

namespace ds {
namespace {

constexpr double kTol = 5e-2;     // max |logprob difference| (bf16 activations)
constexpr double kMargin = 0.1;   // top-1 must agree where the reference top1 - top2 exceeds this
constexpr double kSlack = 1.25;   // bounds below are a measured bf16 floor times this

// $DSERVE_SOURCE_DIR overrides the build-time source path (binaries carried to the GPU machine).
std::string fixture_dir(const std::string& name) {
  const char* env = std::getenv("DSERVE_SOURCE_DIR");
  return std::string(env && *env ? env : DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

struct Loaded {
  ModelConfig cfg;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<DeepseekModel> model;
  nlohmann::json ref;
};

Loaded load(const std::string& name, bool cuda, const ModelOptions& options = {}) {
  Loaded l;
  auto cfg = load_model_config(fixture_dir(name));
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().message();
  l.cfg = cfg.value();
  auto w = load_weights(fixture_dir(name), l.cfg);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  // The references use dequantized FP8 weights (transformers without quantization_config): CUDA's native W8A8
  // default is held to them in fp8_fixture_gpu_test instead.
  {
    const test::ScopedEnv native("DSERVE_FP8_NATIVE", "0");  // read when the backend is made
    l.ops = cuda ? make_cuda_ops(0) : make_cpu_ops();
  }
  l.model = std::make_unique<DeepseekModel>(l.cfg, w.value(), *l.ops, options);
  std::ifstream f(fixture_dir(name) + "/reference.json");
  EXPECT_TRUE(f.good()) << "missing reference.json for " << name;
  l.ref = nlohmann::json::parse(f);
  return l;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

struct ScoreCheck {
  std::vector<double> diffs;  // |ours - reference| per scored position
  int top1_checked = 0, top1_wrong = 0;

  void add(const ScoreCheck& o) {
    diffs.insert(diffs.end(), o.diffs.begin(), o.diffs.end());
    top1_checked += o.top1_checked;
    top1_wrong += o.top1_wrong;
  }
  double max() const { return diffs.empty() ? 0 : *std::max_element(diffs.begin(), diffs.end()); }
  double quantile(double q) const {
    if (diffs.empty()) return 0;
    std::vector<double> d = diffs;
    std::sort(d.begin(), d.end());
    return d[static_cast<size_t>(q * (d.size() - 1))];
  }
  int64_t over(double tol) const { return std::count_if(diffs.begin(), diffs.end(), [&](double x) { return x > tol; }); }
  std::string summary() const {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "max %.4f p99 %.4f median %.5f, %lld of %zu positions > %.2g; top-1 wrong %d of %d",
                  max(), quantile(0.99), quantile(0.5), static_cast<long long>(over(kTol)), diffs.size(), kTol,
                  top1_wrong, top1_checked);
    return buf;
  }
};

// Compares a score result with a reference entry: log-prob differences and top-1 where well separated.
ScoreCheck check_score(const ScoreResult& r, const nlohmann::json& e) {
  ScoreCheck c;
  const auto& ref = e["token_logprobs"];
  const auto& tops = e["top_logprobs"];
  for (size_t i = 1; i < ref.size(); ++i) {
    c.diffs.push_back(std::fabs(r.token_logprobs[i] - ref[i].get<double>()));
    if (r.top_logprobs[i].empty()) continue;
    const double margin = tops[i][0][0].get<double>() - tops[i][1][0].get<double>();
    if (margin > kMargin) {
      ++c.top1_checked;
      if (r.top_logprobs[i][0].second != tops[i][0][1].get<int>()) ++c.top1_wrong;
    }
  }
  return c;
}

// Why not "every position within 5e-2": routing in these tiny checkpoints is chaotic (16 experts, scaling
// factors up to 4, a correction bias that flips 23-41 % of expert sets, V3.2's top-64 of 530 positions), so
// one bf16 rounding anywhere flips an expert or key choice somewhere in a 530-token prompt and moves that
// position's log-prob by up to ~3. transformers itself in bf16 does the same (v2: max 1.66, v3: 2.41, v32:
// 2.66), and rounding CpuOps' outputs to bf16 on the CPU reproduces our numbers. So the bounds are relative
// to a bf16 floor: the share of positions past 5e-2, the share of top-1 misses where the reference margin
// exceeds 0.1, and the median |diff| may each be at most kSlack times the floor's.
struct Floor {
  double over_frac, wrong_frac, median;
};

// transformers 5.17 in bf16 (eager, H100) against the fp32 reference.json, all score prompts of a fixture
// (src/ops/cuda/tf_bf16_floor.py, 2026-11-22). v3_fp8 does not load in transformers' FP8 path: v3's floor (same
// master weights).
Floor transformers_bf16_floor(const std::string& name) {
  if (name == "v2_lite") return {51.0 / 694, 1.0 / 621, 0.01813};
  if (name == "v2") return {84.0 / 694, 10.0 / 636, 0.02156};
  if (name == "v32") return {373.0 / 694, 57.0 / 626, 0.06246};
  return {96.0 / 694, 8.0 / 622, 0.02132};  // v3, v3_fp8
}

Floor floor_of(const ScoreCheck& c) {
  return {static_cast<double>(c.over(kTol)) / std::max<size_t>(c.diffs.size(), 1),
          static_cast<double>(c.top1_wrong) / std::max(c.top1_checked, 1), c.quantile(0.5)};
}

void expect_within_floor(const ScoreCheck& c, const Floor& f, const std::string& what) {
  std::printf("FIXTURE %-36s %s\n", what.c_str(), c.summary().c_str());
  EXPECT_LE(static_cast<double>(c.over(kTol)), kSlack * f.over_frac * c.diffs.size() + 1) << what << ": " << c.summary();
  EXPECT_LE(static_cast<double>(c.top1_wrong), kSlack * f.wrong_frac * c.top1_checked + 1) << what << ": " << c.summary();
  EXPECT_LE(c.quantile(0.5), kSlack * f.median) << what << ": " << c.summary();
}

class FixtureGpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { init_cuda_device(0); }
};

TEST_P(FixtureGpuTest, ScoreMatchesTransformers) {
  Loaded l = load(GetParam(), true);
  ASSERT_TRUE(l.model);
  SequenceRunner runner(*l.model, *l.ops);
  ScoreCheck all;
  for (size_t p = 0; p < l.ref["score"].size(); ++p) {
    const auto& e = l.ref["score"][p];
    std::vector<int32_t> ids = ids_of(e["input_ids"]);
    ScoreResult r = runner.score(ids, 2);
    ScoreCheck c = check_score(r, e);
    // The distribution after the whole prompt counts as one more position.
    const auto& nt = l.ref["next_top"][p];
    c.diffs.push_back(std::fabs(r.next_top[0].first - nt[0][0].get<double>()));
    if (nt[0][0].get<double>() - nt[1][0].get<double>() > kMargin) {
      ++c.top1_checked;
      if (r.next_top[0].second != nt[0][1].get<int>()) ++c.top1_wrong;
    }
    std::printf("FIXTURE %-8s prompt %4zu: %s\n", GetParam().c_str(), ids.size(), c.summary().c_str());
    all.add(c);
  }
  expect_within_floor(all, transformers_bf16_floor(GetParam()), GetParam() + " score, all prompts");
}

// With the shared-experts fusion (opt-in: the shared MLP's parts run as routed experts in the grouped kernels and
// the fused routing appends them): every prompt held to the same bf16 floor.
TEST_P(FixtureGpuTest, SharedExpertsFusedScoreMatchesTransformers) {
  ModelOptions fused;
  fused.shared_experts_fusion = true;
  Loaded l = load(GetParam(), true, fused);
  ASSERT_TRUE(l.model);
  ASSERT_TRUE(l.model->shared_experts_fused());
  SequenceRunner runner(*l.model, *l.ops);
  ScoreCheck all;
  for (size_t p = 0; p < l.ref["score"].size(); ++p) {
    const auto& e = l.ref["score"][p];
    all.add(check_score(runner.score(ids_of(e["input_ids"]), 2), e));
  }
  expect_within_floor(all, transformers_bf16_floor(GetParam()), GetParam() + " fused shared experts");
}

// The shared MLP forked to the side stream after the routing (ModelOptions::shared_fork): a schedule change only,
// so every prompt's scores match the fork before it (same kernels on the same inputs) and transformers' bf16
// floor; a missing join would read the shared output before it is written.
TEST_P(FixtureGpuTest, SharedAfterRouteMatchesTheDefaultSchedule) {
  ModelOptions late, early;
  late.shared_fork = ModelOptions::SharedFork::kAfterRoute;
  early.shared_fork = ModelOptions::SharedFork::kBeforeRoute;
  Loaded l = load(GetParam(), true, late), base = load(GetParam(), true, early);
  ASSERT_TRUE(l.model && base.model);
  SequenceRunner runner(*l.model, *l.ops), base_runner(*base.model, *base.ops);
  ScoreCheck all;
  double max_diff = 0.0;
  for (size_t p = 0; p < l.ref["score"].size(); ++p) {
    const auto& e = l.ref["score"][p];
    const std::vector<int32_t> ids = ids_of(e["input_ids"]);
    ScoreResult r = runner.score(ids, 2), b = base_runner.score(ids, 2);
    ASSERT_EQ(r.token_logprobs.size(), b.token_logprobs.size());
    for (size_t i = 0; i < r.token_logprobs.size(); ++i)
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(r.token_logprobs[i]) - b.token_logprobs[i]));
    all.add(check_score(r, e));
  }
  std::printf("FIXTURE %-8s shared after route: max |logprob - default| %.3g\n", GetParam().c_str(), max_diff);
  EXPECT_LE(max_diff, 1e-3) << GetParam();
  expect_within_floor(all, transformers_bf16_floor(GetParam()), GetParam() + " shared after route");
}

TEST_P(FixtureGpuTest, AbsorbedAndChunkedPathsMatchTransformers) {
  Loaded l = load(GetParam(), true);
  SequenceRunner runner(*l.model, *l.ops);
  const nlohmann::json* longest = nullptr;
  for (const auto& e : l.ref["score"])
    if (!longest || e["input_ids"].size() > (*longest)["input_ids"].size()) longest = &e;
  std::vector<int32_t> ids = ids_of((*longest)["input_ids"]);
  struct Mode {
    const char* name;
    AttnMode mode;
    int chunk;
  };
  // The floor here: the worse (per metric) of transformers' and of our one-shot MHA prefill of the same
  // prompt, which the score test holds to transformers' floor; one prompt alone is noisier than all five.
  ScoreCheck one_shot = check_score(runner.score(ids, 2, AttnMode::kMha), *longest);
  std::printf("FIXTURE %-36s %s\n", (GetParam() + " one-shot mha").c_str(), one_shot.summary().c_str());
  const Floor tf = transformers_bf16_floor(GetParam()), own = floor_of(one_shot);
  const Floor floor{std::max(tf.over_frac, own.over_frac), std::max(tf.wrong_frac, own.wrong_frac),
                    std::max(tf.median, own.median)};
  for (const Mode& m : {Mode{"absorbed", AttnMode::kAbsorbed, 0}, Mode{"chunked mha", AttnMode::kMha, 100},
                        Mode{"chunked absorbed", AttnMode::kAbsorbed, 77}}) {
    expect_within_floor(check_score(runner.score(ids, 2, m.mode, m.chunk), *longest), floor,
                        GetParam() + " " + m.name);
  }
}

// The MHA prefill's context chunks on CUDA (a limit of a few positions a chunk), then decode through CUDA graphs
// captured with the last prefill's chunk plan still held (decode steps keep it: freeing its device tensors during a
// capture would break the capture): scores within the bf16 floor of one pass, the same first greedy token.
TEST(FixtureGpuChunks, ChunkedPrefillThenGraphDecode) {
  Loaded whole = load("v3", true);
  ModelOptions opts;
  opts.mha_chunk_bytes = 5 * DeepseekModel::mha_row_bytes(whole.cfg, DType::kBF16);  // 5 rows a chunk
  Loaded chunked = load("v3", true, opts);
  const nlohmann::json* longest = nullptr;
  for (const auto& e : whole.ref["score"])
    if (!longest || e["input_ids"].size() > (*longest)["input_ids"].size()) longest = &e;
  const std::vector<int32_t> ids = ids_of((*longest)["input_ids"]);
  SequenceRunner rw(*whole.model, *whole.ops), rc(*chunked.model, *chunked.ops);
  const ScoreResult a = rw.score(ids, 2, AttnMode::kAuto, 7), b = rc.score(ids, 2, AttnMode::kAuto, 7);
  ScoreCheck between;  // chunked against one pass, printed: a bf16 rounding moved by the merges may flip an expert
  for (size_t i = 1; i < ids.size(); ++i)
    between.diffs.push_back(std::fabs(static_cast<double>(a.token_logprobs[i]) - b.token_logprobs[i]));
  std::printf("FIXTURE v3 chunked vs one-pass MHA prefill (7-token steps): %s\n", between.summary().c_str());
  // Asserted as the fixture checks are (the comment at Floor): both against transformers, within the worse of its bf16
  // floor and the one-pass run's own on this prompt. A wrong merge moves most positions, not a routing flip's few.
  const ScoreCheck one_pass = check_score(a, *longest);
  const Floor tf = transformers_bf16_floor("v3"), own = floor_of(one_pass);
  const Floor floor{std::max(tf.over_frac, own.over_frac), std::max(tf.wrong_frac, own.wrong_frac),
                    std::max(tf.median, own.median)};
  expect_within_floor(one_pass, tf, "v3 one-pass mha, 7-token steps");
  expect_within_floor(check_score(b, *longest), floor, "v3 chunked mha (5 rows), 7-token steps");
  GenerateOptions g;
  g.max_new_tokens = 8;
  g.sampling.ignore_eos = true;
  g.sampling.temperature = 0.0f;
  rw.set_use_cuda_graphs(true);
  rc.set_use_cuda_graphs(true);
  const GenerateResult ga = rw.generate(ids, g), gb = rc.generate(ids, g);  // graphs captured after b's plan
  ASSERT_EQ(gb.output_ids.size(), 8u);
  ASSERT_GE(a.next_top.size(), 2u);
  if (a.next_top[0].first - a.next_top[1].first > kMargin) {  // (not a near-tie)
    EXPECT_EQ(ga.output_ids[0], gb.output_ids[0]);
  }
}

TEST_P(FixtureGpuTest, GreedyGenerationMatchesCpuBackend) {
  Loaded g = load(GetParam(), true);
  Loaded c = load(GetParam(), false);
  SequenceRunner gr(*g.model, *g.ops), cr(*c.model, *c.ops);
  for (const auto& e : g.ref["generate"]) {
    GenerateOptions opts;
    opts.max_new_tokens = e["max_new_tokens"].get<int>();
    opts.sampling.ignore_eos = true;
    opts.sampling.temperature = 0.0f;
    for (AttnMode mode : {AttnMode::kAuto, AttnMode::kMha}) {
      GenerateResult a = gr.generate(ids_of(e["input_ids"]), opts, mode);
      GenerateResult b = cr.generate(ids_of(e["input_ids"]), opts, mode);
      const auto margins = e["top2_margin"].get<std::vector<double>>();
      ASSERT_EQ(a.output_ids.size(), b.output_ids.size());
      size_t same = 0;
      double worst_lp = 0;  // printed, not asserted: the score tests bound log-prob differences
      for (size_t i = 0; i < b.output_ids.size(); ++i) {
        if (margins[i] <= kMargin) break;  // near-tie: the continuations may part from here on
        EXPECT_EQ(a.output_ids[i], b.output_ids[i]) << GetParam() << " step " << i;
        worst_lp = std::max(worst_lp, static_cast<double>(std::fabs(a.output_logprobs[i] - b.output_logprobs[i])));
        if (a.output_ids[i] != b.output_ids[i]) break;
        ++same;
      }
      std::printf("FIXTURE %-8s greedy (%s decode, prompt %zu): %zu of %zu steps compared, identical; max "
                  "|logprob diff| vs cpu %.4f\n",
                  GetParam().c_str(), mode == AttnMode::kAuto ? "absorbed" : "mha", e["input_ids"].size(), same,
                  b.output_ids.size(), worst_lp);
      EXPECT_GT(same, 0u);
    }
  }
}

// The early PDL triggers (kernels/pdl.cuh pdl_early) move no arithmetic: with every launch that offers one taking
// it (DSERVE_PDL_EARLY=1, read per launch, so also at graph capture) and with none (=0), a scored prompt (eager
// prefill) and a greedy generation decoded through CUDA graphs give the same bits. A next launch that read a
// forward's output before its wait would see it unwritten (or stale) under the triggers and differ here.
TEST_P(FixtureGpuTest, EarlyTriggersMatchTheDefaultSchedule) {
  Loaded l = load(GetParam(), true);
  SequenceRunner runner(*l.model, *l.ops);
  runner.set_use_cuda_graphs(true);
  const auto& e = l.ref["generate"][0];
  const std::vector<int32_t> prompt = ids_of(e["input_ids"]);
  GenerateOptions opts;
  opts.max_new_tokens = e["max_new_tokens"].get<int>();
  opts.sampling.ignore_eos = true;
  opts.sampling.temperature = 0.0f;
  auto run = [&](const char* early) {
    setenv("DSERVE_PDL_EARLY", early, 1);
    std::pair<ScoreResult, GenerateResult> r{runner.score(prompt, 2), runner.generate(prompt, opts)};
    unsetenv("DSERVE_PDL_EARLY");
    return r;
  };
  const auto on = run("1"), off = run("0");
  EXPECT_EQ(on.first.token_logprobs, off.first.token_logprobs) << GetParam();
  EXPECT_EQ(on.second.output_ids, off.second.output_ids) << GetParam();
  EXPECT_EQ(on.second.output_logprobs, off.second.output_logprobs) << GetParam();
  EXPECT_EQ(on.second.output_ids.size(), static_cast<size_t>(opts.max_new_tokens));
  std::printf("FIXTURE %-8s early triggers: %zu scored, %zu generated (graphs), identical to none\n",
              GetParam().c_str(), on.first.token_logprobs.size(), on.second.output_ids.size());
}

TEST_P(FixtureGpuTest, MtpDraftMatchesReference) {
  Loaded l = load(GetParam(), true);
  if (!l.ref.contains("mtp")) {
    EXPECT_EQ(l.model->num_mtp_layers(), 0) << "checkpoint has an MTP layer but the reference has no mtp entry";
    return;
  }
  ASSERT_GE(l.model->num_mtp_layers(), 1);
  for (const auto& e : l.ref["mtp"]) {
    std::vector<int32_t> ids = ids_of(e["input_ids"]);
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<int32_t> pages(static_cast<size_t>((n + 63) / 64 + 1));
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(pages.size() - 1 - i);
    KvCache cache = make_kv_cache(*l.ops, l.cfg, 64, static_cast<int>(pages.size()), l.model->num_mtp_layers());
    AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &pages}}, 64, *l.ops);
    Tensor tok = Tensor::empty({n}, DType::kI32);
    std::copy(ids.begin(), ids.end(), tok.data_as<int32_t>());
    Tensor hidden = l.model->forward(l.ops->upload(tok), meta, cache);
    std::vector<int64_t> rows;
    for (int64_t i = 0; i + 1 < n; ++i) rows.push_back(i);
    Tensor h = l.ops->select_rows(hidden, rows);
    Tensor next = Tensor::empty({n - 1}, DType::kI32);
    std::copy(ids.begin() + 1, ids.end(), next.data_as<int32_t>());
    AttnMetadata mmeta = build_attn_metadata({SeqSlice{0, n - 1, &pages}}, 64, *l.ops);
    Tensor z = l.model->mtp_forward(0, l.ops->upload(next), h, mmeta, cache);
    Tensor lp = l.ops->to_host(l.ops->log_softmax(l.model->mtp_logits(0, z)));
    const auto& tops = e["draft_top"];
    ASSERT_EQ(static_cast<int64_t>(tops.size()), n - 1);
    ScoreCheck c;
    for (int64_t i = 0; i + 1 < n; ++i) {
      for (const auto& pair : tops[i])
        c.diffs.push_back(std::fabs(lp.f32()[i * lp.dim(1) + pair[1].get<int>()] - pair[0].get<double>()));
      if (tops[i][0][0].get<double>() - tops[i][1][0].get<double>() > kMargin) {
        const float* row = lp.f32() + i * lp.dim(1);
        ++c.top1_checked;
        if (std::max_element(row, row + lp.dim(1)) - row != tops[i][0][1].get<int>()) ++c.top1_wrong;
      }
    }
    // No transformers floor for the MTP head (transformers has none). Measured on the H100 and reproduced by
    // the CPU bf16 emulation: v3 4 % and v3_fp8 24 % of the top-5 draft entries past 5e-2 (the draft input is
    // the main model's final hidden state, so its routing flips add up), medians 0.014 / 0.025.
    expect_within_floor(c, Floor{0.25, 0.02, 0.025}, GetParam() + " MTP draft, " + std::to_string(n) + " ids");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureGpuTest, ::testing::Values("v2_lite", "v2", "v3", "v3_fp8", "v32"));

}  // namespace
}  // namespace ds
