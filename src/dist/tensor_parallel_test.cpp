// Tensor parallelism on the CPU backend: n ranks as threads (LocalGroup), each with its shard of a fixture
// (model/tp_shard.h) and its own latent cache, give the single-rank model's logits (prefill in MHA form, decode
// steps in the absorbed form, the MTP layer) to float rounding, and the same bits on every rank.
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dist/local_group.h"
#include "model/deepseek_model.h"
#include "model/tp_shard.h"
#include "runner/attn_metadata.h"

namespace ds {
namespace {

std::string fixture(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

Tensor ids_tensor(const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), t.data_as<int32_t>());
  return t;
}

// Host copies of the logits of: the prompt's last position, each decode step, and the MTP layer's drafts over the
// prompt (where the model has one).
// idle_steps: then that many zero-token forwards (a data-parallel rank with nothing to run).
std::vector<std::vector<float>> run_steps(const ModelConfig& cfg, DeepseekModel& model, Ops& ops,
                                          const std::vector<int32_t>& prompt, const std::vector<int32_t>& decode,
                                          bool with_mtp = true, int idle_steps = 0) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> pages = {0, 1, 2};
  KvCache cache = make_kv_cache(ops, cfg, 64, 3, model.num_mtp_layers());
  std::vector<std::vector<float>> out;
  auto keep = [&](const Tensor& logits) {
    Tensor h = ops.to_host(logits);
    out.emplace_back(h.f32(), h.f32() + h.numel());
  };
  AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &pages}}, 64, ops);
  Tensor hidden = model.forward(ops.upload(ids_tensor(prompt)), meta, cache);  // [n, d]
  keep(model.logits(ops.select_rows(hidden, {n - 1})));
  if (with_mtp && model.num_mtp_layers() > 0) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i + 1 < n; ++i) rows.push_back(i);
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    AttnMetadata mm = build_attn_metadata({SeqSlice{0, n - 1, &pages}}, 64, ops);
    keep(model.mtp_logits(0, model.mtp_forward(0, ops.upload(ids_tensor(next)), ops.select_rows(hidden, rows), mm,
                                               cache)));
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    AttnMetadata m = build_attn_metadata({SeqSlice{n + static_cast<int64_t>(i), 1, &pages}}, 64, ops);
    keep(model.logits(model.forward(ops.upload(ids_tensor({decode[i]})), m, cache, AttnMode::kAbsorbed)));
  }
  for (int i = 0; i < idle_steps; ++i) {
    AttnMetadata none;
    none.num_tokens = 0;
    EXPECT_FALSE(model.forward(ops.upload(ids_tensor({})), none, cache).defined());
  }
  return out;
}

class TensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallel, RanksGiveTheSingleRankLogits) {
  const ModelConfig cfg = load_model_config(fixture(GetParam())).value();
  const ModelWeights w = load_weights(fixture(GetParam()), cfg).value();
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(45), decode(4);
  for (auto& t : prompt) t = static_cast<int32_t>(2 + rng() % 1000);
  for (auto& t : decode) t = static_cast<int32_t>(2 + rng() % 1000);
  auto ops1 = make_cpu_ops();
  DeepseekModel single(cfg, w, *ops1);
  const auto want = run_steps(cfg, single, *ops1, prompt, decode);

  // (size, expert_parallel): experts cut along their intermediate, or dealt out whole (--ep-size = --tp-size).
  for (const auto& c : std::vector<std::pair<int, bool>>{{2, false}, {4, false}, {2, true}, {4, true}}) {
    const int size = c.first;  // (named copies: the rank lambdas capture them)
    const bool ep = c.second;
    SCOPED_TRACE("tp " + std::to_string(size) + (ep ? ", ep" : ""));
    LocalGroup group(size);
    std::vector<std::vector<std::vector<float>>> got(size);
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r)
      ranks.emplace_back([&, r] {
        auto ops = make_cpu_ops();
        ops->set_collective(group.member(r));
        auto shard = shard_for_tensor_parallel(cfg, w, r, size, ep);
        ASSERT_TRUE(shard.is_ok()) << shard.status().message();
        EXPECT_EQ(shard->config.num_attention_heads, cfg.num_attention_heads / size);
        if (ep) {  // this rank's experts whole, the others' absent
          const auto& experts = shard->weights.layers.back().moe.experts;
          int held = 0;
          for (const auto& e : experts) held += e.gate.defined() ? 1 : 0;
          EXPECT_EQ(held, cfg.n_routed_experts / size);
          EXPECT_TRUE(experts[cfg.n_routed_experts / size * r].gate.defined());
          EXPECT_EQ(experts[cfg.n_routed_experts / size * r].gate.out_features(), cfg.moe_intermediate_size);
        }
        DeepseekModel model(shard->config, shard->weights, *ops);
        got[r] = run_steps(shard->config, model, *ops, prompt, decode);
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(got[r].size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(got[r][k].size(), want[k].size());
        EXPECT_EQ(got[r][k], got[0][k]) << "rank " << r << " differs from rank 0 at step " << k;
        double worst = 0;
        for (size_t i = 0; i < want[k].size(); ++i)
          worst = std::max(worst, std::fabs(static_cast<double>(got[r][k][i]) - want[k][i]) /
                                      (1.0 + std::fabs(static_cast<double>(want[k][i]))));
        EXPECT_LE(worst, 2e-5) << "rank " << r << " step " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallel, ::testing::Values("v2_lite", "v2", "v3", "v32"));

// Data-parallel attention: rank r attends over its own sequence (whole attention weights, its own cache) while the
// MLPs run over both ranks' tokens, sharded; each rank's logits are the single-rank model's for its sequence, also
// in steps where the other rank is idle (zero tokens) or its batch is a different size.
TEST_P(TensorParallel, DataParallelAttentionGivesEachRankItsSequencesLogits) {
  const ModelConfig cfg = load_model_config(fixture(GetParam())).value();
  const ModelWeights w = load_weights(fixture(GetParam()), cfg).value();
  std::mt19937 rng(8);
  std::vector<std::vector<int32_t>> prompt(2), decode(2);
  prompt[0].resize(33);
  prompt[1].resize(20);
  decode[0].resize(4);  // rank 1 has 2 decode steps: idle for the last 2 of rank 0's
  decode[1].resize(2);
  for (int r = 0; r < 2; ++r) {
    for (auto& t : prompt[r]) t = static_cast<int32_t>(2 + rng() % 1000);
    for (auto& t : decode[r]) t = static_cast<int32_t>(2 + rng() % 1000);
  }
  auto ops1 = make_cpu_ops();
  ModelOptions plain;
  DeepseekModel single(cfg, w, *ops1, plain);
  std::vector<std::vector<std::vector<float>>> want(2), got(2);
  for (int r = 0; r < 2; ++r) want[r] = run_steps(cfg, single, *ops1, prompt[r], decode[r], false);
  LocalGroup group(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      auto ops = make_cpu_ops();
      ops->set_collective(group.member(r));
      auto shard = shard_for_tensor_parallel(cfg, w, r, 2, false, /*attention_whole=*/true);
      ASSERT_TRUE(shard.is_ok()) << shard.status().message();
      EXPECT_EQ(shard->config.num_attention_heads, cfg.num_attention_heads);
      ModelOptions dp;
      dp.dp_attention = true;
      DeepseekModel model(shard->config, shard->weights, *ops, dp);
      got[r] = run_steps(shard->config, model, *ops, prompt[r], decode[r], false,
                         static_cast<int>(decode[0].size() - decode[r].size()));
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].size(), want[r].size()) << r;
    for (size_t k = 0; k < want[r].size(); ++k) {
      double worst = 0;
      for (size_t i = 0; i < want[r][k].size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(got[r][k][i]) - want[r][k][i]) /
                                    (1.0 + std::fabs(static_cast<double>(want[r][k][i]))));
      EXPECT_LE(worst, 2e-5) << "rank " << r << " step " << k;
    }
  }
}

// Block-FP8 shards: DeepSeek-V3's config cut down so that every rank's slice is whole 128-blocks (2 heads of 192 /
// 256 / 128 rows and columns, MLP intermediates of 128 a rank), dummy e4m3 weights with their scales: TP 2 gives
// the single rank's logits.
// DeepSeek-V3's block-FP8 config at 256 wide (whole 128-blocks for two ranks' slices), 2 layers, `mtp` MTP layers.
ModelConfig small_fp8_v3(int mtp) {
  std::ifstream f(std::string(DSERVE_SOURCE_DIR) + "/tests/data/configs/deepseek-v3.json");
  nlohmann::json c = nlohmann::json::parse(f);
  c.update({{"hidden_size", 256}, {"intermediate_size", 256}, {"moe_intermediate_size", 256},
            {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"n_routed_experts", 8},
            {"num_experts_per_tok", 2}, {"n_group", 2}, {"topk_group", 1}, {"q_lora_rank", 256},
            {"kv_lora_rank", 128}, {"num_hidden_layers", 2}, {"first_k_dense_replace", 1},
            {"num_nextn_predict_layers", mtp}, {"vocab_size", 1024}});
  return parse_model_config(c.dump()).value();
}

TEST(TensorParallelFp8, BlockScaledShardsGiveTheSingleRankLogits) {
  const ModelConfig cfg = small_fp8_v3(0);
  const ModelWeights w = make_dummy_weights(cfg, 7, false);
  ASSERT_TRUE(w.layers[0].attn.o_proj.is_block_fp8());
  std::mt19937 rng(4);
  std::vector<int32_t> prompt(30), decode(3);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 1024);
  for (auto& t : decode) t = static_cast<int32_t>(rng() % 1024);
  auto ops1 = make_cpu_ops();
  DeepseekModel single(cfg, w, *ops1);
  const auto want = run_steps(cfg, single, *ops1, prompt, decode);
  LocalGroup group(2);
  std::vector<std::vector<std::vector<float>>> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      auto ops = make_cpu_ops();
      ops->set_collective(group.member(r));
      auto shard = shard_for_tensor_parallel(cfg, w, r, 2);
      ASSERT_TRUE(shard.is_ok()) << shard.status().message();
      EXPECT_TRUE(shard->weights.layers[1].moe.experts[0].down.is_block_fp8());
      EXPECT_EQ(shard->weights.layers[1].moe.experts[0].down.scale_inv.dim(1), 1);  // 128 of 256 columns
      DeepseekModel model(shard->config, shard->weights, *ops);
      got[r] = run_steps(shard->config, model, *ops, prompt, decode);
    });
  for (auto& t : ranks) t.join();
  ASSERT_EQ(got[0].size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[1][k], got[0][k]) << k;
    double worst = 0;
    for (size_t i = 0; i < want[k].size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(got[0][k][i]) - want[k][i]) /
                                  (1.0 + std::fabs(static_cast<double>(want[k][i]))));
    EXPECT_LE(worst, 1e-4) << "step " << k;
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Tensor-parallel dummy weights are made rank by rank from tensor_parallel_config (the engine's --load-format dummy
// with --tp-size: a full-size model never exists whole in host memory): the tensors every rank keeps whole come
// out the same bits as the whole model's, so the ranks compute one replicated state; the cut ones have the rank's
// shape. A config whose rank slice is not whole FP8 blocks is refused by name.
TEST(TensorParallelShard, DummyShardsShareTheReplicatedTensors) {
  const ModelConfig cfg = small_fp8_v3(1);
  auto rank_cfg = tensor_parallel_config(cfg, 2, false, false, /*fp8_blocks=*/true);
  ASSERT_TRUE(rank_cfg.is_ok()) << rank_cfg.status().message();
  EXPECT_EQ(rank_cfg->num_attention_heads, 2);
  EXPECT_EQ(rank_cfg->moe_intermediate_size, 128);
  EXPECT_EQ(rank_cfg->intermediate_size, 128);
  const ModelWeights whole = make_dummy_weights(cfg, 9);
  const ModelWeights part = make_dummy_weights(*rank_cfg, 9);
  EXPECT_TRUE(same_bits(whole.embed, part.embed));
  EXPECT_TRUE(same_bits(whole.final_norm, part.final_norm));
  EXPECT_TRUE(same_bits(whole.lm_head.weight, part.lm_head.weight));
  ASSERT_EQ(part.layers.size(), whole.layers.size());
  ASSERT_EQ(part.mtp.size(), 1u);
  for (size_t l = 0; l < whole.layers.size(); ++l) {
    SCOPED_TRACE(l);
    const LayerWeights &a = whole.layers[l], &b = part.layers[l];
    EXPECT_TRUE(same_bits(a.input_norm, b.input_norm));
    EXPECT_TRUE(same_bits(a.attn.q_a_proj.weight, b.attn.q_a_proj.weight));
    EXPECT_TRUE(same_bits(a.attn.q_a_proj.scale_inv, b.attn.q_a_proj.scale_inv));
    EXPECT_TRUE(same_bits(a.attn.kv_a_proj.weight, b.attn.kv_a_proj.weight));
    EXPECT_TRUE(same_bits(a.attn.kv_a_norm, b.attn.kv_a_norm));
    EXPECT_EQ(b.attn.q_b_proj.out_features(), a.attn.q_b_proj.out_features() / 2);
    EXPECT_EQ(b.attn.o_proj.in_features(), a.attn.o_proj.in_features() / 2);
    if (a.is_moe) {
      EXPECT_TRUE(same_bits(a.moe.router, b.moe.router));
      EXPECT_TRUE(same_bits(a.moe.correction_bias, b.moe.correction_bias));
      EXPECT_EQ(b.moe.experts[3].gate.out_features(), 128);
    }
  }
  EXPECT_TRUE(same_bits(whole.mtp[0].eh_proj.weight, part.mtp[0].eh_proj.weight));
  auto four = tensor_parallel_config(cfg, 4, false, false, /*fp8_blocks=*/true);  // 64-wide expert slices
  ASSERT_FALSE(four.is_ok());
  EXPECT_NE(four.status().message().find("FP8 blocks"), std::string::npos) << four.status().message();
  EXPECT_TRUE(tensor_parallel_config(cfg, 4, false, false).is_ok());  // a checkpoint's slices are checked by shard
}

// What does not divide is refused with its name: 3 heads of 4, FP8 blocks cut below 128 rows.
TEST(TensorParallelShard, UndividableShapesAreRefused) {
  const ModelConfig cfg = load_model_config(fixture("v3")).value();
  const ModelWeights w = load_weights(fixture("v3"), cfg).value();
  auto three = shard_for_tensor_parallel(cfg, w, 0, 3);
  ASSERT_FALSE(three.is_ok());
  EXPECT_NE(three.status().message().find("4 attention heads"), std::string::npos) << three.status().message();
  const ModelConfig cfg8 = load_model_config(fixture("v3_fp8")).value();
  const ModelWeights w8 = load_weights(fixture("v3_fp8"), cfg8).value();
  auto fp8 = shard_for_tensor_parallel(cfg8, w8, 1, 2);
  ASSERT_FALSE(fp8.is_ok());
  EXPECT_NE(fp8.status().message().find("FP8 blocks"), std::string::npos) << fp8.status().message();
  EXPECT_FALSE(shard_for_tensor_parallel(cfg, w, 2, 2).is_ok());
}

// The in-process all-reduce: the rank-order sum on every rank; a rank that fails breaks the group, and ranks
// waiting for it throw with the reason instead of hanging (the engine then fails the step).
TEST(LocalGroupTest, SumsAndAbortWakesWaitingRanks) {
  LocalGroup group(3);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      Tensor t = Tensor::empty({4}, DType::kF32);
      for (int i = 0; i < 4; ++i) t.f32()[i] = static_cast<float>(10 * r + i);
      group.member(r)->all_reduce_sum(t);
      got[r].assign(t.f32(), t.f32() + 4);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], (std::vector<float>{30, 33, 36, 39})) << r;

  std::vector<std::string> errors(2);
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      Tensor t = Tensor::zeros({4}, DType::kF32);
      try {
        group.member(r)->all_reduce_sum(t);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ranks 0 and 1 wait for rank 2
  group.abort("rank 2: injected");
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_NE(errors[r].find("rank 2: injected"), std::string::npos) << errors[r];
  Tensor t = Tensor::zeros({4}, DType::kF32);
  EXPECT_THROW(group.member(2)->all_reduce_sum(t), std::runtime_error);
}

// The doorbell: a ring wakes every waiter at once (long before its timeout), a count read before a ring makes the
// wait return immediately, and with no ring the wait ends at its timeout.
TEST(LocalGroupTest, DoorbellWakesEveryWaiter) {
  using Clock = std::chrono::steady_clock;
  LocalGroup group(2);
  const uint64_t seen = group.rings();
  std::vector<double> waited(3, -1);
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] {
      const auto t0 = Clock::now();
      group.wait_ring(seen, std::chrono::milliseconds(20000));
      waited[i] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  group.ring();
  for (auto& t : ts) t.join();
  for (int i = 0; i < 3; ++i) EXPECT_LT(waited[i], 10.0) << i;  // woken by the ring, not the 20 s timeout
  EXPECT_EQ(group.rings(), seen + 1);
  auto t0 = Clock::now();
  group.wait_ring(seen, std::chrono::milliseconds(20000));  // a ring since `seen`: no wait
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
  t0 = Clock::now();
  group.wait_ring(group.rings(), std::chrono::milliseconds(30));  // none: the timeout
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.025);
}

}  // namespace
}  // namespace ds
