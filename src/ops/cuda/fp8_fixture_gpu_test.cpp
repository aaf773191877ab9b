// The FP8 fixtures scored on CUDA with native block-FP8 linears (DSERVE_FP8_NATIVE=1: W8A8, ops/cuda/fp8_linear.h)
// against the CPU backend with the same W8A8 semantics, next to the dequantized bf16 path against the dequantized
// CPU path; both also reported against the transformers reference. v3_fp8 (hidden 192) keeps its MLPs
// dequantized; v3_fp8_h256 (hidden 256, experts 128 wide) runs experts, shared expert and dense MLP in e4m3 too.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/deepseek_model.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/gpu_test_util.h"
#include "ops/ops.h"
#include "runner/sequence_runner.h"

namespace ds {
namespace {

std::string fixture_dir(const std::string& name) {
  const char* env = std::getenv("DSERVE_SOURCE_DIR");
  return std::string(env && *env ? env : DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

struct Stats {
  double max = 0, sum = 0;
  int64_t n = 0, top1_checked = 0, top1_agree = 0;
  double mean() const { return n ? sum / n : 0; }
  double agree() const { return top1_checked ? static_cast<double>(top1_agree) / top1_checked : 1; }
};

// Per scored prompt: every position's token logprob and (top-1 id, margin to the second).
struct Scores {
  std::vector<std::vector<double>> lp;
  std::vector<std::vector<std::pair<int, double>>> top;
};

nlohmann::json reference(const std::string& name) {
  std::ifstream f(fixture_dir(name) + "/reference.json");
  EXPECT_TRUE(f.good());
  return nlohmann::json::parse(f);
}

// Scores every reference prompt on `device` with the native W8A8 switch on or off (read when the ops are made),
// and DSERVE_FP8_FUSED_SMALL_M=`fused` where given (else the default fused paths); chunk > 0 prefills that many
// tokens a step (1: every step a one-token decode-sized step).
Scores score_fixture(const std::string& name, bool cuda, bool native, const char* fused = nullptr, int chunk = 0) {
  test::ScopedEnv native_env("DSERVE_FP8_NATIVE", native ? "1" : "0");
  test::ScopedEnv fused_env("DSERVE_FP8_FUSED_SMALL_M", fused);  // unset when not given
  Scores out;
  auto cfg = load_model_config(fixture_dir(name));
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().message();
  auto w = cfg.is_ok() ? load_weights(fixture_dir(name), cfg.value()) : Result<ModelWeights>(error("no config"));
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  if (!cfg.is_ok() || !w.is_ok()) return out;
  std::unique_ptr<Ops> ops = cuda ? make_cuda_ops(0) : make_cpu_ops();
  native_env.set(nullptr);  // both read when the backend is made
  fused_env.set(nullptr);
  DeepseekModel model(cfg.value(), w.value(), *ops);
  SequenceRunner runner(model, *ops);
  const nlohmann::json ref = reference(name);  // named: a temporary's ["score"] would dangle in the loop
  for (const auto& e : ref["score"]) {
    ScoreResult r = runner.score(e["input_ids"].get<std::vector<int32_t>>(), 2, AttnMode::kAuto, chunk);
    out.lp.emplace_back(r.token_logprobs.begin(), r.token_logprobs.end());
    std::vector<std::pair<int, double>> tops;
    for (const auto& t : r.top_logprobs)
      tops.emplace_back(t.size() >= 2 ? t[0].second : -1, t.size() >= 2 ? t[0].first - t[1].first : 0.0);
    out.top.push_back(std::move(tops));
  }
  return out;
}

// |logprob diff| over positions 1.. and top-1 agreement where the oracle's margin exceeds 0.1.
Stats compare(const Scores& got, const Scores& oracle) {
  Stats s;
  for (size_t p = 0; p < oracle.lp.size() && p < got.lp.size(); ++p)
    for (size_t i = 1; i < oracle.lp[p].size() && i < got.lp[p].size(); ++i) {
      const double d = std::fabs(got.lp[p][i] - oracle.lp[p][i]);
      s.max = std::max(s.max, d);
      s.sum += d;
      ++s.n;
      if (oracle.top[p][i].first >= 0 && oracle.top[p][i].second > 0.1) {
        ++s.top1_checked;
        s.top1_agree += got.top[p][i].first == oracle.top[p][i].first;
      }
    }
  return s;
}

Scores transformers_scores(const std::string& name) {
  Scores out;
  const nlohmann::json ref = reference(name);
  for (const auto& e : ref["score"]) {
    const auto& lp = e["token_logprobs"];
    const auto& tops = e["top_logprobs"];
    std::vector<double> l;
    std::vector<std::pair<int, double>> t;
    for (size_t i = 0; i < lp.size(); ++i) {
      l.push_back(lp[i].is_number() ? lp[i].get<double>() : 0.0);
      if (tops[i].size() >= 2)
        t.emplace_back(tops[i][0][1].get<int>(), tops[i][0][0].get<double>() - tops[i][1][0].get<double>());
      else
        t.emplace_back(-1, 0.0);
    }
    out.lp.push_back(std::move(l));
    out.top.push_back(std::move(t));
  }
  return out;
}

void print(const char* what, const Stats& s) {
  std::printf("FP8FIXTURE %-40s max %.4f mean %.5f top1 %.2f%% (%lld)\n", what, s.max, s.mean(), 100 * s.agree(),
              static_cast<long long>(s.top1_checked));
}

// W8A8 quantizes activations to e4m3 per 128 channels: a discontinuous function, so the GPU (bf16 activations)
// and the exact CPU emulation (fp32 activations) land on different e4m3 values for some elements and drift
// apart on this chaotic fixture as far as either drifts from the unquantized reference. The oracle is
// therefore the CPU emulation's own distance to transformers: the native GPU path must be no further from
// transformers than 1.5x that (+0.01) in mean |logprob diff|, and keep top-1 agreement (margin > 0.1) within
// 3 points of it, and an absolute guard (agreement_floor; the exact emulation itself reaches 93% on v3_fp8, whose
// MLPs stay dequantized, and 83% on v3_fp8_h256, where every MLP is W8A8 too). The dequantized GPU path is
// bounded against the dequantized CPU path as before.
class Fp8FixtureGpu : public ::testing::TestWithParam<std::string> {};

// The absolute top-1 guard per fixture, under the CPU emulation's own agreement with transformers (measured on
// the H100, 2026-11-26): v3_fp8 93%, v3_fp8_h256 83%, v3_fp8_mla128 73% (its 128-wide MLA heads make it the most
// sensitive to W8A8 rounding: context sensitivity 0.92 against h256's 0.20).
double agreement_floor(const std::string& fixture) { return fixture == "v3_fp8_mla128" ? 0.65 : 0.80; }

TEST_P(Fp8FixtureGpu, NativeMatchesCpuW8a8) {
  init_cuda_device(0);
  const std::string& f = GetParam();
  std::printf("FP8FIXTURE %s\n", f.c_str());
  const Scores gpu_deq = score_fixture(f, true, false), gpu_nat = score_fixture(f, true, true);
  const Scores cpu_deq = score_fixture(f, false, false), cpu_nat = score_fixture(f, false, true);
  const Scores tf = transformers_scores(f);
  const Stats deq = compare(gpu_deq, cpu_deq), nat = compare(gpu_nat, cpu_nat);
  const Stats gpu_nat_tf = compare(gpu_nat, tf), cpu_nat_tf = compare(cpu_nat, tf);
  print("gpu dequantized vs cpu dequantized:", deq);
  print("gpu native w8a8 vs cpu w8a8:", nat);
  print("gpu dequantized vs transformers:", compare(gpu_deq, tf));
  print("gpu native w8a8 vs transformers:", gpu_nat_tf);
  print("cpu w8a8 vs transformers:", cpu_nat_tf);
  ASSERT_GT(nat.n, 0);
  EXPECT_GT(compare(cpu_nat, cpu_deq).sum, 0) << "DSERVE_FP8_NATIVE=1 did not change the CPU path";
  EXPECT_GT(compare(gpu_nat, gpu_deq).sum, 0) << "DSERVE_FP8_NATIVE=1 did not change the CUDA path";
  EXPECT_LE(deq.mean(), 0.1);
  EXPECT_GE(deq.agree(), 0.95);
  EXPECT_LE(gpu_nat_tf.mean(), 1.5 * cpu_nat_tf.mean() + 0.01);
  EXPECT_GE(gpu_nat_tf.agree(), cpu_nat_tf.agree() - 0.03);
  EXPECT_GE(gpu_nat_tf.agree(), agreement_floor(f));
}

// DSERVE_FP8_FUSED_SMALL_M=1 (small-M GEMMs quantizing their own activations, one launch for the q / kv_a pair,
// the SiLU in the gate|up GEMM's epilogue) against =0 (none), every token scored in its own one-token step so the
// fused paths run: held to the same bounds against transformers as the native path. (The quantization and the
// pair are bit-exact; the SiLU's input is no longer rounded to bf16 first, which changes results where a W8A8
// MLP runs: v3_fp8_h256's.)
TEST_P(Fp8FixtureGpu, FusedSmallMKeepsTheBounds) {
  init_cuda_device(0);
  const std::string& f = GetParam();
  const Scores fused = score_fixture(f, true, true, "1", 1), plain = score_fixture(f, true, true, "0", 1);
  const Scores cpu_nat = score_fixture(f, false, true);
  const Scores tf = transformers_scores(f);
  const Stats fused_tf = compare(fused, tf), cpu_nat_tf = compare(cpu_nat, tf);
  print("gpu native fused small-M vs transformers:", fused_tf);
  print("gpu native fused vs plain:", compare(fused, plain));
  ASSERT_GT(fused_tf.n, 0);
  EXPECT_LE(fused_tf.mean(), 1.5 * cpu_nat_tf.mean() + 0.01);
  EXPECT_GE(fused_tf.agree(), cpu_nat_tf.agree() - 0.03);
  EXPECT_GE(fused_tf.agree(), agreement_floor(f));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8FixtureGpu, ::testing::Values("v3_fp8", "v3_fp8_h256", "v3_fp8_mla128"));

// The absorbed (decode) form with kv_b_proj's W_UK / W_UV as W8A8 products (Ops::prepare_absorbed_fp8; needs
// v3_fp8_mla128's 128-multiple MLA dims), every token scored in a one-token step: on CUDA against the CPU's exact
// emulation of the same products and against transformers, held to the native path's bounds; the default (bf16
// products of the dequantized kv_b) printed beside it.
TEST(Fp8FixtureAbsorbed, Fp8ProductsKeepTheBounds) {
  init_cuda_device(0);
  const std::string f = "v3_fp8_mla128";
  test::ScopedEnv bmm("DSERVE_FP8_BMM", "1");
  const Scores gpu = score_fixture(f, true, true, nullptr, 1), cpu = score_fixture(f, false, true, nullptr, 1);
  bmm.set(nullptr);
  const Scores gpu_bf16 = score_fixture(f, true, true, nullptr, 1), cpu_bf16 = score_fixture(f, false, true, nullptr, 1);
  const Scores tf = transformers_scores(f);
  const Stats gpu_tf = compare(gpu, tf), cpu_tf = compare(cpu, tf);
  print("absorbed fp8 bmm gpu vs cpu:", compare(gpu, cpu));
  print("absorbed fp8 bmm gpu vs transformers:", gpu_tf);
  print("absorbed fp8 bmm cpu vs transformers:", cpu_tf);
  print("absorbed bf16 bmm gpu vs transformers:", compare(gpu_bf16, tf));
  print("absorbed fp8 vs bf16 bmm, cpu:", compare(cpu, cpu_bf16));
  ASSERT_GT(gpu_tf.n, 0);
  EXPECT_GT(compare(cpu, cpu_bf16).sum, 0) << "DSERVE_FP8_BMM=1 did not change the CPU path";
  EXPECT_GT(compare(gpu, gpu_bf16).sum, 0) << "DSERVE_FP8_BMM=1 did not change the CUDA path";
  EXPECT_LE(gpu_tf.mean(), 1.5 * cpu_tf.mean() + 0.01);
  EXPECT_GE(gpu_tf.agree(), cpu_tf.agree() - 0.03);
  EXPECT_GE(gpu_tf.agree(), agreement_floor(f));
}

}  // namespace
}  // namespace ds
