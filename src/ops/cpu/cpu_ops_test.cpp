// CpuOps pieces beyond the reference math other suites cover: the overlap scheduling plumbing (sample_async
// with a token store, resolve_tokens_), and the FP8 activations the norms hand to the W8A8 linears (rms_norm_q).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/fp8.h"
#include "ops/ops.h"

namespace ds {
namespace {

// moe_route's ties go to the lower index (the CUDA kernels' rule; an unstable sort once ordered them arbitrarily):
// equal logits, greedy and group-limited, ids in order.
TEST(CpuOps, MoeRouteTiesGoToTheLowerIndex) {
  auto ops = make_cpu_ops();
  Tensor logits = Tensor::empty({1, 16}, DType::kF32);
  for (int e = 0; e < 16; ++e) logits.f32()[e] = e == 13 ? 1.0f : e % 2 == 0 ? 0.0f : -1.0f;
  MoeRouting r;
  r.num_experts = 16;
  r.top_k = 4;
  Tensor ids, w;
  auto ids_of = [&] { return std::vector<int32_t>(ids.data_as<int32_t>(), ids.data_as<int32_t>() + 4); };
  ops->moe_route(logits, Tensor(), r, &ids, &w);
  EXPECT_EQ(ids_of(), (std::vector<int32_t>{13, 0, 2, 4}));
  EXPECT_EQ(w.f32()[1], w.f32()[3]);
  // Eight groups of two: group 6 (experts 12, 13) scores highest, the others tie at 0 and the lower ones win.
  r.method = MoeRouting::Method::kGroupLimitedGreedy;
  r.n_group = 8;
  r.topk_group = 3;
  ops->moe_route(logits, Tensor(), r, &ids, &w);
  EXPECT_EQ(ids_of(), (std::vector<int32_t>{13, 0, 2, 12}));
}

// Fused shared experts (MoeRouting::shared_experts): each token's picks and weights as without them, then the
// shared experts' ids (num_experts on) with weight 1.
TEST(CpuOps, MoeRouteAppendsFusedSharedExperts) {
  auto ops = make_cpu_ops();
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 2.0f);
  Tensor logits = Tensor::empty({3, 16}, DType::kF32);
  for (int64_t i = 0; i < logits.numel(); ++i) logits.f32()[i] = n(rng);
  MoeRouting r;
  r.num_experts = 16;
  r.top_k = 4;
  r.norm_topk_prob = true;
  r.routed_scaling_factor = 2.5f;
  Tensor pi, pw, ids, w;
  ops->moe_route(logits, Tensor(), r, &pi, &pw);
  r.shared_experts = 2;
  ops->moe_route(logits, Tensor(), r, &ids, &w);
  ASSERT_EQ(ids.shape(), (Shape{3, 6}));
  ASSERT_EQ(w.shape(), (Shape{3, 6}));
  for (int t = 0; t < 3; ++t) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(ids.data_as<int32_t>()[t * 6 + k], pi.data_as<int32_t>()[t * 4 + k]);
      EXPECT_EQ(w.f32()[t * 6 + k], pw.f32()[t * 4 + k]);
    }
    EXPECT_EQ(ids.data_as<int32_t>()[t * 6 + 4], 16);
    EXPECT_EQ(ids.data_as<int32_t>()[t * 6 + 5], 17);
    EXPECT_EQ(w.f32()[t * 6 + 4], 1.0f);
    EXPECT_EQ(w.f32()[t * 6 + 5], 1.0f);
  }
}

// Overlap scheduling on the CPU backend: sample_async writes each stored row's token into the token store,
// and resolve_tokens_ replaces placeholder ids (-(row + 1)) by those entries, leaving real ids alone.
TEST(CpuOps, TokenStoreFeedsPlaceholders) {
  auto ops = make_cpu_ops();
  Tensor logits = Tensor::empty({2, 4}, DType::kF32);
  const float v[8] = {0.0f, 3.0f, 1.0f, 2.0f, 5.0f, 0.0f, 1.0f, 7.0f};
  std::copy(v, v + 8, logits.f32());
  Tensor store = Tensor::zeros({5}, DType::kI32);
  store.data_as<int32_t>()[0] = 42;
  SampleBatch b;
  b.vocab = 4;
  SampleRow r0, r1;  // greedy (temperature 0)
  r0.logits_row = 0;
  r0.store_index = 3;
  r1.logits_row = 1;  // not stored
  b.rows = {r0, r1};
  auto pending = ops->sample_async(logits, b, store);
  const SampleResult res = pending->wait();
  EXPECT_EQ(res.tokens[0], 1);
  EXPECT_EQ(res.tokens[1], 3);
  EXPECT_EQ(store.data_as<int32_t>()[3], 1);
  EXPECT_EQ(store.data_as<int32_t>()[1], 0);
  Tensor ids = Tensor::empty({4}, DType::kI32);
  const int32_t in[4] = {7, -4, -1, 0};
  std::copy(in, in + 4, ids.data_as<int32_t>());
  ops->resolve_tokens_(ids, store);
  EXPECT_EQ(ids.data_as<int32_t>()[0], 7);
  EXPECT_EQ(ids.data_as<int32_t>()[1], 1);   // row 3
  EXPECT_EQ(ids.data_as<int32_t>()[2], 42);  // row 0
  EXPECT_EQ(ids.data_as<int32_t>()[3], 0);
}

// greedy_to_store_: row r's first maximum over the first `vocab` columns (larger columns past it ignored), ties to
// the lower id, 0 for a row with a non-finite value inside the vocabulary; the same tokens sample() picks greedily.
TEST(CpuOps, GreedyToStoreTakesTheFirstMaximum) {
  auto ops = make_cpu_ops();
  const float inf = std::numeric_limits<float>::infinity();
  const float v[4][6] = {{0.0f, 3.0f, 1.0f, 3.0f, 9.0f, 9.0f},   // tie 1 / 3: 1; columns 4-5 past the vocab
                         {5.0f, 0.0f, 1.0f, 7.0f, 0.0f, 0.0f},   // 3
                         {1.0f, NAN, 2.0f, 0.0f, 0.0f, 0.0f},    // non-finite: 0
                         {-inf, -1.0f, -2.0f, -1.5f, 0.0f, 0.0f}};  // non-finite: 0
  Tensor logits = Tensor::empty({4, 6}, DType::kF32);
  std::copy(&v[0][0], &v[0][0] + 24, logits.f32());
  Tensor store = Tensor::zeros({4}, DType::kI32);
  for (int r = 0; r < 4; ++r) store.data_as<int32_t>()[r] = -5;
  ops->greedy_to_store_(logits, 4, store);
  const int32_t want[4] = {1, 3, 0, 0};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(store.data_as<int32_t>()[r], want[r]) << "row " << r;
  SampleBatch b;
  b.vocab = 4;
  b.rows = {SampleRow{.logits_row = 0}, SampleRow{.logits_row = 1}};
  const SampleResult res = ops->sample(logits, b);
  EXPECT_EQ(res.tokens[0], store.data_as<int32_t>()[0]);
  EXPECT_EQ(res.tokens[1], store.data_as<int32_t>()[1]);
}

Tensor random_f32(Shape shape, std::mt19937& rng, float stddev) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::normal_distribution<float> nd(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
  return t;
}

Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// In W8A8 mode (DSERVE_FP8_NATIVE=1) rms_norm_q quantizes its output for its consumer's scales, and the _q ops
// reading it give exactly what the plain chain gives (the residual update included); a consumer that is not
// block-FP8 gets no quantization, and a weight whose scales differ in kind (ue8m0) quantizes for itself.
TEST(CpuOps, RmsNormQuantizationFeedsTheW8A8Ops) {
  setenv("DSERVE_FP8_NATIVE", "1", 1);
  auto ops = make_cpu_ops();
  unsetenv("DSERVE_FP8_NATIVE");
  std::mt19937 rng(31);
  const int64_t T = 3, d = 256, inter = 128;
  Tensor norm_w = random_f32({d}, rng, 0.5f);
  for (int64_t i = 0; i < d; ++i) norm_w.f32()[i] += 1.0f;
  auto fp8 = [&](int64_t n, int64_t k, bool ue8m0) {
    return ops->prepare_linear(quantize_weight_fp8(random_f32({n, k}, rng, 0.05f), 128, 128, ue8m0));
  };
  const LinearWeight w1 = fp8(192, d, false), w2 = fp8(576, d, false), w_pow2 = fp8(64, d, true);
  LinearWeight dense_host;
  dense_host.weight = random_f32({64, d}, rng, 0.05f);
  const LinearWeight dense = ops->prepare_linear(dense_host);
  std::vector<PreparedMlp> experts;
  for (int e = 0; e < 4; ++e)
    experts.push_back(ops->prepare_mlp(quantize_weight_fp8(random_f32({inter, d}, rng, 0.05f)),
                                       quantize_weight_fp8(random_f32({inter, d}, rng, 0.05f)),
                                       quantize_weight_fp8(random_f32({d, inter}, rng, 0.05f))));
  ASSERT_TRUE(experts[0].gate_up.is_block_fp8());  // native W8A8 experts
  const Tensor x = random_f32({T, d}, rng, 1.0f), pending = random_f32({T, d}, rng, 1.0f);

  for (bool with_residual : {false, true}) {
    Tensor res_a = copy_of(x), res_b = copy_of(x);
    Fp8Act xq;
    Tensor y = ops->rms_norm_q(with_residual ? &res_a : nullptr, with_residual ? pending : x, norm_w, 1e-6f, w1, &xq);
    Tensor want = with_residual ? ops->add_rms_norm(res_b, pending, norm_w, 1e-6f) : ops->rms_norm(x, norm_w, 1e-6f);
    EXPECT_TRUE(same_bits(y, want));
    EXPECT_TRUE(same_bits(res_a, res_b));
    ASSERT_TRUE(xq.defined());
    EXPECT_FALSE(xq.ue8m0);
    Tensor q_want, s_want;
    quantize_activations_fp8(want, 128, false, &q_want, &s_want);
    EXPECT_TRUE(same_bits(xq.q, q_want));
    EXPECT_TRUE(same_bits(xq.scales, s_want));

    Tensor a1, a2, b1, b2;
    ops->linear_pair_q(y, xq, w1, w2, &a1, &a2);
    ops->linear_pair(y, w1, w2, &b1, &b2);
    EXPECT_TRUE(same_bits(a1, b1));
    EXPECT_TRUE(same_bits(a2, b2));
    EXPECT_TRUE(same_bits(ops->linear_silu_q(y, xq, experts[1].gate_up), ops->linear_silu(y, experts[1].gate_up)));
    // A ue8m0 weight reads its own (power-of-two) quantization, not xq's.
    Tensor p1, p2, r1, r2;
    ops->linear_pair_q(y, xq, w_pow2, w1, &p1, &p2);
    ops->linear_pair(y, w_pow2, w1, &r1, &r2);
    EXPECT_TRUE(same_bits(p1, r1));
    EXPECT_TRUE(same_bits(p2, r2));
    Tensor ids = Tensor::empty({T, 2}, DType::kI32), weights = Tensor::empty({T, 2}, DType::kF32);
    for (int64_t i = 0; i < 2 * T; ++i) {
      ids.data_as<int32_t>()[i] = static_cast<int32_t>((i * 3) % 4);
      weights.f32()[i] = 0.25f + 0.1f * static_cast<float>(i);
    }
    EXPECT_TRUE(same_bits(ops->moe_experts_q(y, xq, ids, weights, experts), ops->moe_experts(y, ids, weights, experts)));
  }
  // Consumers that are not block-FP8 get nothing; power-of-two weight scales get ue8m0 activations.
  Fp8Act none, pow2;
  ops->rms_norm_q(nullptr, x, norm_w, 1e-6f, dense, &none);
  EXPECT_FALSE(none.defined());
  ops->rms_norm_q(nullptr, x, norm_w, 1e-6f, w_pow2, &pow2);
  ASSERT_TRUE(pow2.defined());
  EXPECT_TRUE(pow2.ue8m0);
  // Without W8A8 (the CPU default: FP8 weights dequantized) nothing is quantized.
  auto plain = make_cpu_ops();
  Fp8Act off;
  plain->rms_norm_q(nullptr, x, norm_w, 1e-6f, plain->prepare_linear(quantize_weight_fp8(random_f32({64, d}, rng, 0.05f))),
                    &off);
  EXPECT_FALSE(off.defined());
}


// The V3.2 indexer's selection (what the CUDA select kernel is checked against): a token's top-k positions by score,
// ties to the lower position, written in ascending position order and -1 padded; a context no longer than k is
// taken whole. One head of one dimension makes each score q * w * relu(k[s]) exact: keys chosen by hand.
TEST(CpuOps, IndexerTopkInPositionOrder) {
  auto ops = make_cpu_ops();
  const int page = 4, topk = 4;
  // Position s of the 10-token context lives on page table[s / 4]: pages shuffled, a spare page 1 never used.
  const std::vector<int32_t> table = {3, 0, 2};
  const float key[10] = {0.5f, 3.0f, -1.0f, 2.0f, 0.25f, 2.0f, 4.0f, 1.0f, 2.0f, 0.0f};  // 2.0 three times
  Tensor k_cache = Tensor::empty({4 * page, 1}, DType::kF32);
  std::fill(k_cache.f32(), k_cache.f32() + k_cache.numel(), NAN);  // slots outside the context
  for (int s = 0; s < 10; ++s) k_cache.f32()[table[s / page] * page + s % page] = key[s];
  auto i32 = [](std::vector<int32_t> v, Shape shape) {
    Tensor t = Tensor::empty(std::move(shape), DType::kI32);
    std::copy(v.begin(), v.end(), t.data_as<int32_t>());
    return t;
  };
  AttnMetadata m;
  m.num_seqs = 1;
  m.num_tokens = 2;
  m.page_size = page;
  m.max_seq_len = 10;
  m.max_q_len = 2;
  m.positions = i32({2, 9}, {2});  // a token seeing 3 positions, one seeing all 10
  m.slot_mapping = i32({table[0] * page + 2, table[2] * page + 1}, {2});
  m.q_starts = i32({0, 2}, {2});
  m.seq_lens = i32({10}, {1});
  m.block_table = i32(table, {1, 3});
  Tensor q = Tensor::empty({2, 1, 1}, DType::kF32), w = Tensor::empty({2, 1}, DType::kF32);
  q.f32()[0] = q.f32()[1] = 1.0f;
  w.f32()[0] = w.f32()[1] = 1.0f;
  const Tensor out = ops->indexer_topk(q, w, k_cache, m, topk, 1.0f, 1.0f);
  ASSERT_EQ(out.dim(0), 2);
  ASSERT_EQ(out.dim(1), topk);
  const int32_t* o = out.data_as<int32_t>();
  // Scores relu(key): 4.0 (6), 3.0 (1), then 2.0 at 3, 5, 8 of which the lower two.
  EXPECT_EQ(std::vector<int32_t>(o, o + topk), (std::vector<int32_t>{0, 1, 2, -1}));
  EXPECT_EQ(std::vector<int32_t>(o + topk, o + 2 * topk), (std::vector<int32_t>{1, 3, 5, 6}));
}
}  // namespace
}  // namespace ds
