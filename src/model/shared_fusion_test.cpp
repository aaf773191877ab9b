// Tests of the shared-MLP cut (shared_fusion.h): the parts' outputs sum to the whole MLP's, block-FP8 weights and
// scales are cut on block boundaries byte for byte, and layouts that do not cut are refused.
#include "model/shared_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "model/deepseek_model.h"

namespace ds {
namespace {

Tensor filled(Shape shape, DType dtype, std::mt19937& rng) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  if (dtype == DType::kF32) {
    std::normal_distribution<float> n(0.0f, 0.2f);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(rng);
  } else {
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.data())[i] = static_cast<uint8_t>(rng() & 0x7e);
  }
  return t;
}

LinearWeight linear(int64_t out, int64_t in, DType dtype, bool fp8, std::mt19937& rng) {
  LinearWeight w;
  w.weight = filled({out, in}, dtype, rng);
  if (fp8) w.scale_inv = filled({(out + 127) / 128, (in + 127) / 128}, DType::kF32, rng);
  return w;
}

MoeWeights moe_of(int parts, int64_t inter, int64_t d, DType dtype, bool fp8, std::mt19937& rng) {
  MoeWeights m;
  for (int e = 0; e < 3; ++e)
    m.experts.push_back({linear(inter, d, dtype, fp8, rng), linear(inter, d, dtype, fp8, rng),
                         linear(d, inter, dtype, fp8, rng)});
  m.shared = {linear(parts * inter, d, dtype, fp8, rng), linear(parts * inter, d, dtype, fp8, rng),
              linear(d, parts * inter, dtype, fp8, rng)};
  return m;
}

// down(silu(gate x) * up x) in fp32 (F32 weights).
std::vector<float> mlp(const MlpWeights& w, const std::vector<float>& x) {
  const int64_t I = w.gate.out_features(), d = w.gate.in_features();
  std::vector<float> h(I), y(d, 0.0f);
  for (int64_t i = 0; i < I; ++i) {
    float g = 0, u = 0;
    for (int64_t k = 0; k < d; ++k) {
      g += w.gate.weight.f32()[i * d + k] * x[k];
      u += w.up.weight.f32()[i * d + k] * x[k];
    }
    h[i] = g / (1.0f + std::exp(-g)) * u;
  }
  for (int64_t c = 0; c < d; ++c)
    for (int64_t i = 0; i < I; ++i) y[c] += w.down.weight.f32()[c * I + i] * h[i];
  return y;
}

TEST(SharedFusion, PartsSumToTheWholeMlp) {
  std::mt19937 rng(7);
  for (int parts : {1, 2, 3}) {
    const int64_t inter = 24, d = 40;
    MoeWeights m = moe_of(parts, inter, d, DType::kF32, false, rng);
    ASSERT_TRUE(can_split_shared(m, parts));
    const std::vector<MlpWeights> cut = split_shared(m, parts);
    ASSERT_EQ(static_cast<int>(cut.size()), parts);
    std::vector<float> x(d);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float& v : x) v = n(rng);
    const std::vector<float> whole = mlp(m.shared, x);
    std::vector<float> sum(d, 0.0f);
    for (const MlpWeights& p : cut) {
      EXPECT_EQ(p.gate.weight.shape(), (Shape{inter, d}));
      EXPECT_EQ(p.down.weight.shape(), (Shape{d, inter}));
      const std::vector<float> y = mlp(p, x);
      for (int64_t c = 0; c < d; ++c) sum[c] += y[c];
    }
    for (int64_t c = 0; c < d; ++c) EXPECT_NEAR(sum[c], whole[c], 1e-4f * (1.0f + std::fabs(whole[c]))) << parts;
  }
}

TEST(SharedFusion, Fp8BlocksCutOnTheirBoundaries) {
  std::mt19937 rng(8);
  const int64_t inter = 256, d = 384;  // two scale blocks an expert along the intermediate dimension
  MoeWeights m = moe_of(2, inter, d, DType::kF8E4M3, true, rng);
  ASSERT_TRUE(can_split_shared(m, 2));
  const std::vector<MlpWeights> cut = split_shared(m, 2);
  ASSERT_EQ(cut.size(), 2u);
  for (int j = 0; j < 2; ++j) {
    const MlpWeights& p = cut[j];
    ASSERT_EQ(p.gate.scale_inv.shape(), (Shape{2, 3}));
    ASSERT_EQ(p.down.scale_inv.shape(), (Shape{3, 2}));
    const auto* g = static_cast<const uint8_t*>(p.up.weight.data());
    const auto* gw = static_cast<const uint8_t*>(m.shared.up.weight.data()) + j * inter * d;
    EXPECT_EQ(std::memcmp(g, gw, inter * d), 0) << "up rows of part " << j;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(p.gate.scale_inv.f32()[r * 3 + c], m.shared.gate.scale_inv.f32()[(j * 2 + r) * 3 + c]);
    for (int64_t r = 0; r < d; ++r)
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(p.down.weight.data()) + r * inter,
                            static_cast<const uint8_t*>(m.shared.down.weight.data()) + r * 2 * inter + j * inter, inter),
                0)
          << "down row " << r << " of part " << j;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_EQ(p.down.scale_inv.f32()[r * 2 + c], m.shared.down.scale_inv.f32()[r * 4 + j * 2 + c]);
  }
}

TEST(SharedFusion, RefusesWhatDoesNotCut) {
  std::mt19937 rng(9);
  // FP8 experts narrower than a scale block: two parts would split a block (one part is the expert's layout).
  EXPECT_FALSE(can_split_shared(moe_of(2, 64, 256, DType::kF8E4M3, true, rng), 2));
  EXPECT_TRUE(can_split_shared(moe_of(1, 64, 256, DType::kF8E4M3, true, rng), 1));
  // The shared MLP is not parts x the expert's width.
  EXPECT_FALSE(can_split_shared(moe_of(2, 24, 40, DType::kF32, false, rng), 3));
  // The shared MLP stored otherwise than the experts (dtype; scales).
  MoeWeights m = moe_of(2, 24, 40, DType::kF32, false, rng);
  m.shared.down.weight = filled({40, 48}, DType::kBF16, rng);
  EXPECT_FALSE(can_split_shared(m, 2));
  MoeWeights q = moe_of(1, 128, 256, DType::kF8E4M3, true, rng);
  q.shared.up.scale_inv = Tensor();
  EXPECT_FALSE(can_split_shared(q, 1));
  // No shared MLP, no experts, no parts.
  MoeWeights none = moe_of(1, 24, 40, DType::kF32, false, rng);
  none.shared = MlpWeights{};
  EXPECT_FALSE(can_split_shared(none, 1));
  MoeWeights empty = moe_of(1, 24, 40, DType::kF32, false, rng);
  empty.experts.clear();
  EXPECT_FALSE(can_split_shared(empty, 1));
  EXPECT_FALSE(can_split_shared(moe_of(1, 24, 40, DType::kF32, false, rng), 0));
}

// Off by default; DSERVE_SHARED_EXPERTS_FUSION=1 turns it on unless --disable-shared-experts-fusion is given.
TEST(SharedFusion, OptionsFromTheEnvironmentAndTheFlag) {
  unsetenv("DSERVE_SHARED_EXPERTS_FUSION");
  EXPECT_FALSE(model_options(false).shared_experts_fusion);
  setenv("DSERVE_SHARED_EXPERTS_FUSION", "1", 1);
  EXPECT_TRUE(model_options(false).shared_experts_fusion);
  EXPECT_FALSE(model_options(true).shared_experts_fusion);
  setenv("DSERVE_SHARED_EXPERTS_FUSION", "0", 1);
  EXPECT_FALSE(model_options(false).shared_experts_fusion);
  unsetenv("DSERVE_SHARED_EXPERTS_FUSION");
  using Fork = ModelOptions::SharedFork;
  unsetenv("DSERVE_SHARED_AFTER_ROUTE");
  EXPECT_EQ(model_options(false).shared_fork, Fork::kAuto);
  setenv("DSERVE_SHARED_AFTER_ROUTE", "1", 1);
  EXPECT_EQ(model_options(false).shared_fork, Fork::kAfterRoute);
  EXPECT_FALSE(model_options(false).shared_experts_fusion);
  setenv("DSERVE_SHARED_AFTER_ROUTE", "0", 1);
  EXPECT_EQ(model_options(false).shared_fork, Fork::kBeforeRoute);
  unsetenv("DSERVE_SHARED_AFTER_ROUTE");
}

}  // namespace
}  // namespace ds
