// dserve_kernel_bench's CPU-side logic: model dims against the real configs, FLOP/byte counts against
// hand-derived formulas at small sizes and brute-force enumeration, the roofline, options and rows.
#include "ops/kernel_cost.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ds::kbench {
namespace {

nlohmann::json load_config(const char* name) {
  std::ifstream f(std::string(DSERVE_SOURCE_DIR) + "/tests/data/configs/" + name);
  EXPECT_TRUE(f.good()) << name;
  return nlohmann::json::parse(f);
}

void expect_dims(const ModelDims& m, const nlohmann::json& c) {
  EXPECT_EQ(m.hidden, c["hidden_size"].get<int64_t>());
  EXPECT_EQ(m.heads, c["num_attention_heads"].get<int64_t>());
  EXPECT_EQ(m.q_lora_rank, c["q_lora_rank"].is_null() ? 0 : c["q_lora_rank"].get<int64_t>());
  EXPECT_EQ(m.kv_lora_rank, c["kv_lora_rank"].get<int64_t>());
  EXPECT_EQ(m.qk_nope, c["qk_nope_head_dim"].get<int64_t>());
  EXPECT_EQ(m.qk_rope, c["qk_rope_head_dim"].get<int64_t>());
  EXPECT_EQ(m.v_head, c["v_head_dim"].get<int64_t>());
  EXPECT_EQ(m.intermediate, c["intermediate_size"].get<int64_t>());
  EXPECT_EQ(m.moe_intermediate, c["moe_intermediate_size"].get<int64_t>());
  EXPECT_EQ(m.n_routed, c["n_routed_experts"].get<int>());
  EXPECT_EQ(m.n_shared, c["n_shared_experts"].get<int>());
  EXPECT_EQ(m.top_k, c["num_experts_per_tok"].get<int>());
  EXPECT_EQ(m.n_group, c["n_group"].get<int>());
  EXPECT_EQ(m.topk_group, c["topk_group"].get<int>());
  EXPECT_EQ(m.vocab, c["vocab_size"].get<int64_t>());
  EXPECT_EQ(m.sigmoid, c["scoring_func"].get<std::string>() == "sigmoid");
  EXPECT_FLOAT_EQ(m.routed_scaling, c["routed_scaling_factor"].get<float>());
  EXPECT_EQ(m.norm_topk, c["norm_topk_prob"].get<bool>());
}

TEST(KernelCost, ModelDimsMatchConfigs) {
  expect_dims(deepseek_v2_lite(), load_config("deepseek-v2-lite.json"));
  expect_dims(deepseek_v3(), load_config("deepseek-v3.json"));
}

TEST(KernelCost, LinearLayersOfV3AndLite) {
  // V3: q_a [1536, 7168], q_b [128 * 192, 1536], kv_a [576, 7168], kv_b [128 * 256, 512], o [7168, 16384],
  // dense MLP 18432, one shared expert of 2048, lm_head [129280, 7168].
  std::vector<LinearLayer> v3 = linear_layers(deepseek_v3());
  ASSERT_EQ(v3.size(), 10u);
  auto find = [](const std::vector<LinearLayer>& v, const std::string& n) {
    for (const auto& l : v)
      if (l.name == n) return l;
    ADD_FAILURE() << "no layer " << n;
    return LinearLayer{};
  };
  EXPECT_EQ(find(v3, "q_b").out, 24576);
  EXPECT_EQ(find(v3, "q_b").in, 1536);
  EXPECT_EQ(find(v3, "kv_a").out, 576);
  EXPECT_EQ(find(v3, "kv_b").out, 32768);
  EXPECT_EQ(find(v3, "o").in, 16384);
  EXPECT_EQ(find(v3, "dense_gate_up").out, 36864);
  EXPECT_EQ(find(v3, "shared_down").in, 2048);
  EXPECT_EQ(find(v3, "lm_head").out, 129280);
  // V2-Lite has no q LoRA: one q projection [16 * 192, 2048]; two shared experts of 1408.
  std::vector<LinearLayer> lite = linear_layers(deepseek_v2_lite());
  ASSERT_EQ(lite.size(), 9u);
  EXPECT_EQ(find(lite, "q").out, 3072);
  EXPECT_EQ(find(lite, "shared_gate_up").out, 2 * 2816);
  EXPECT_EQ(find(lite, "o").in, 2048);
  std::set<std::string> names;
  for (const auto& l : lite) EXPECT_TRUE(names.insert(l.name).second) << l.name;
}

TEST(KernelCost, LinearCountsByEnumeration) {
  // Count multiply-adds and touched elements of a tiny GEMM by brute force.
  const int64_t M = 3, K = 5, N = 7;
  double macs = 0;
  std::set<std::pair<int, int64_t>> touched;  // (tensor, index)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        macs += 1;
        touched.insert({0, m * K + k});
        touched.insert({1, n * K + k});
      }
      touched.insert({2, m * N + n});
    }
  const Cost c = linear_cost(M, K, N);
  EXPECT_DOUBLE_EQ(c.flops, 2 * macs);
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * touched.size());
}

TEST(KernelCost, AttentionCounts) {
  // Decode: V3 batch 64 x 4K, 128 heads: the cache is 64 * 4096 * 576 bf16 values, read once.
  const Cost d = mla_decode_cost(64, 4096, 128);
  EXPECT_DOUBLE_EQ(d.flops, 2.0 * 64 * 128 * 4096 * (576 + 512));
  EXPECT_DOUBLE_EQ(d.bytes, 2.0 * (64.0 * 4096 * 576 + 64.0 * 128 * 576 + 64.0 * 128 * 512));
  // Prefill: causal pairs enumerated for a small sequence.
  const int64_t T = 9, H = 3;
  double pairs = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j <= t; ++j) pairs += 1;
  const Cost p = mla_prefill_cost(T, H, 128, 64, 128);
  EXPECT_DOUBLE_EQ(p.flops, 2.0 * H * pairs * (128 + 64 + 128));
  EXPECT_DOUBLE_EQ(p.bytes, 2.0 * (T * H * 192 + T * H * 256 + T * 64 + T * H * 128));
  // V3.2's indexer at decode, batch 8 x 32K: bf16 keys read once, q, f32 head weights, i32 picks (top-2048, or the
  // whole context when shorter: 100 positions keep 100).
  const Cost ix = indexer_cost(8, 32768, 64, 128, 2048);
  EXPECT_DOUBLE_EQ(ix.flops, 2.0 * 8 * 32768 * 64 * 128);
  EXPECT_DOUBLE_EQ(ix.bytes, 2.0 * (8.0 * 32768 * 128 + 8.0 * 64 * 128) + 4.0 * 8 * 64 + 4.0 * 8 * 2048);
  EXPECT_DOUBLE_EQ(indexer_cost(1, 100, 64, 128, 2048).bytes, 2.0 * (100.0 * 128 + 64.0 * 128) + 4.0 * 64 + 4.0 * 100);
  // At prefill, 3 rows over a context of 5: rows score 3, 4 and 5 positions (keep 2, 2, 2 with top-2); the keys once.
  const Cost pf = indexer_cost(2, 5, 4, 8, 2, 3);
  EXPECT_DOUBLE_EQ(pf.flops, 2.0 * 2 * (3 + 4 + 5) * 4 * 8);
  EXPECT_DOUBLE_EQ(pf.bytes, 2.0 * (2.0 * 5 * 8 + 6.0 * 4 * 8) + 4.0 * 6 * 4 + 4.0 * 2 * 6);
}

TEST(KernelCost, MoeCountsAndActiveExperts) {
  // One token, V2-Lite: 6 experts of 3 * 1408 * 2048 bf16 weights; FLOPs of 6 MLPs.
  const Cost c = moe_cost(1, 6, 6, 2048, 1408);
  EXPECT_DOUBLE_EQ(c.flops, 6 * 3 * 2.0 * 1408 * 2048);
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (6.0 * 3 * 1408 * 2048 + 2 * 2048) + 6 * 8);
  // The expected count of distinct experts agrees with a simulation of uniform top-k routing.
  EXPECT_DOUBLE_EQ(expected_active_experts(1, 64, 6), 6.0);
  EXPECT_NEAR(expected_active_experts(100000, 64, 6), 64.0, 1e-9);
  std::mt19937 rng(5);
  for (auto [T, E, K] : std::vector<std::tuple<int, int, int>>{{8, 64, 6}, {64, 256, 8}, {3, 16, 4}}) {
    double sum = 0;
    const int trials = 4000;
    for (int trial = 0; trial < trials; ++trial) {
      std::set<int> hit;
      for (int t = 0; t < T; ++t) {
        std::vector<int> all(E);
        for (int e = 0; e < E; ++e) all[e] = e;
        std::shuffle(all.begin(), all.end(), rng);
        hit.insert(all.begin(), all.begin() + K);
      }
      sum += hit.size();
    }
    EXPECT_NEAR(sum / trials, expected_active_experts(T, E, K), 0.02 * E) << T << " " << E << " " << K;
  }
}

TEST(KernelCost, MemoryBoundOps) {
  EXPECT_DOUBLE_EQ(add_rms_norm_cost(4, 2048).bytes, 2.0 * (4 * 4 * 2048 + 2048));
  EXPECT_DOUBLE_EQ(silu_mul_cost(3, 1408).bytes, 2.0 * (3 * 2 * 1408 + 3 * 1408));
  EXPECT_DOUBLE_EQ(log_softmax_cost(2, 102400).bytes, 2 * 4.0 * 2 * 102400);
  EXPECT_DOUBLE_EQ(moe_route_cost(5, 256, 8).bytes, 4.0 * (5 * 256 + 256) + 8.0 * 5 * 8);
  EXPECT_DOUBLE_EQ(moe_permute_cost(5, 8, 256).bytes, 4.0 * (3 * 40 + 3 * 256));
  EXPECT_DOUBLE_EQ(moe_combine_cost(5, 8, 7168).bytes, 2.0 * (40.0 * 7168 + 5 * 7168) + 8.0 * 40);
  // rope + cache write: 17 rotated 64-wide vectors (16 heads + the key) read and written, the 576-wide row
  // read and stored, positions and slots.
  EXPECT_DOUBLE_EQ(rope_cache_cost(1, 16).bytes, 2.0 * (2 * 17 * 64 + 2 * 576) + 8);
}

TEST(KernelCost, Roofline) {
  const Ceilings c{3.0e12, 788e12};
  // Memory-bound: 3 GB at 3 TB/s = 1 ms; measured 2 ms -> half of the roofline.
  Roofline r = roofline({1e9, 3e9}, c, 2e-3);
  EXPECT_FALSE(r.compute_bound);
  EXPECT_DOUBLE_EQ(r.time_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.fraction, 0.5);
  // Compute-bound: 8192^3 GEMM.
  const Cost g = linear_cost(8192, 8192, 8192);
  r = roofline(g, c, 2.0 * g.flops / c.gemm_flops_per_s);
  EXPECT_TRUE(r.compute_bound);
  EXPECT_NEAR(r.fraction, 0.5, 1e-12);
  // Unknown time or ceilings give 0, never inf/NaN.
  EXPECT_EQ(roofline(g, c, 0).fraction, 0);
  EXPECT_EQ(roofline(g, Ceilings{}, 1e-3).time_s, 0);
}

TEST(KernelCost, ParseArgs) {
  const char* ok[] = {"b", "--csv", "/tmp/x.csv", "--filter", "linear v3", "--quick", "--reps", "7"};
  Result<Options> o = parse_args(8, ok);
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(o->csv, "/tmp/x.csv");
  EXPECT_EQ(o->filter, "linear v3");
  EXPECT_TRUE(o->quick);
  EXPECT_EQ(o->reps, 7);
  const char* missing[] = {"b", "--csv"};
  Result<Options> m = parse_args(2, missing);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("--csv"), std::string::npos);
  const char* bad[] = {"b", "--reps", "0"};
  EXPECT_FALSE(parse_args(3, bad).is_ok());
  const char* unknown[] = {"b", "--fast"};
  Result<Options> u = parse_args(2, unknown);
  ASSERT_FALSE(u.is_ok());
  EXPECT_NE(u.status().message().find("--fast"), std::string::npos);
}

TEST(KernelCost, RowsAndFilter) {
  Row r;
  r.op = "linear";
  r.model = "v3";
  r.shape = "q_b M=64 K=1536 N=24576";
  r.cost = linear_cost(64, 1536, 24576);
  r.us = 50;
  r.baseline = "cublaslt-default";
  r.baseline_us = 100;
  r.max_rel = 0.001;
  const Ceilings c{3.0e12, 788e12};
  EXPECT_TRUE(matches_filter(r.name(), "linear v3 q_b"));
  EXPECT_TRUE(matches_filter(r.name(), ""));
  EXPECT_FALSE(matches_filter(r.name(), "v2-lite"));
  EXPECT_TRUE(matches_filter(r.name(), "silu_mul|linear v3|moe"));
  EXPECT_FALSE(matches_filter(r.name(), "silu_mul|moe_route"));
  EXPECT_FALSE(matches_filter(r.name(), "|"));
  const std::string line = csv_line(r, c);
  // As many fields as the header, and the speedup column is baseline / ours.
  auto fields = [](const std::string& s) {
    std::vector<std::string> f(1);
    for (char ch : s) {
      if (ch == ',')
        f.emplace_back();
      else
        f.back().push_back(ch);
    }
    return f;
  };
  const auto h = fields(csv_header()), f = fields(line);
  ASSERT_EQ(h.size(), f.size()) << line;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i] == "speedup_vs_baseline") {
      EXPECT_EQ(f[i], "2.0000");
    } else if (h[i] == "bound") {
      EXPECT_EQ(f[i], "memory");
    } else if (h[i] == "gbps") {
      EXPECT_NEAR(std::stod(f[i]), r.cost.bytes / 50e-6 / 1e9, 0.1);
    }
  }
  // A failed case keeps its columns (empty figures) and its reason without commas.
  Row bad = r;
  bad.us = 0;
  bad.status = "out of memory, 5 GB";
  const auto fb = fields(csv_line(bad, c));
  ASSERT_EQ(fb.size(), h.size());
  EXPECT_EQ(fb.back(), "out of memory; 5 GB");
  EXPECT_NE(text_line(bad, c).find("FAILED"), std::string::npos);
  EXPECT_NEAR(median({5, 1, 3}), 3, 0);
}

}  // namespace
}  // namespace ds::kbench
