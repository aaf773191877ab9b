// Block-FP8 reference semantics: quantization error bounds, ragged scale grids, ue8m0 scales, the W8A8
// GEMM against the dequantized product, and the FP8 KV round trip.
#include "ops/fp8.h"

#include "kernels/kv_fp8.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace ds {
namespace {

Tensor random_f32(Shape s, uint32_t seed, float stddev = 1.0f) {
  Tensor t = Tensor::empty(s, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
  return t;
}

Tensor dequant(const LinearWeight& w) {
  Tensor out = Tensor::empty(w.weight.shape(), DType::kF32);
  const int64_t cols = w.in_features(), gc = w.scale_inv.dim(1);
  for (int64_t i = 0; i < w.out_features(); ++i)
    for (int64_t j = 0; j < cols; ++j)
      out.f32()[i * cols + j] = fp8e4m3_to_f32(w.weight.data_as<uint8_t>()[i * cols + j]) *
                                w.scale_inv.f32()[(i / w.block_n) * gc + j / w.block_k];
  return out;
}

TEST(Fp8, WeightQuantizationRaggedGridAndErrorBound) {
  for (bool ue8m0 : {false, true}) {
    Tensor w = random_f32({576, 200}, 1, 0.05f);  // kv_a_proj-like: 576 rows is not a multiple of 128
    LinearWeight q = quantize_weight_fp8(w, 128, 128, ue8m0);
    ASSERT_EQ(q.scale_inv.shape(), (Shape{5, 2}));
    Tensor d = dequant(q);
    for (int64_t i = 0; i < w.numel(); ++i) {
      const float x = w.f32()[i], y = d.f32()[i];
      const int64_t bi = (i / 200) / 128, bj = (i % 200) / 128;
      const float s = q.scale_inv.f32()[bi * 2 + bj];
      // e4m3 has 3 mantissa bits: half an ulp is 2^-4 relative, plus the subnormal quantum s * 2^-10.
      ASSERT_LE(std::fabs(x - y), std::fabs(x) * 0.0625f + s * std::ldexp(1.0f, -10)) << i;
    }
    if (ue8m0)
      for (int64_t i = 0; i < q.scale_inv.numel(); ++i) {
        int e;
        EXPECT_EQ(std::frexp(q.scale_inv.f32()[i], &e), 0.5f) << "ue8m0 scale is a power of two";
      }
  }
}

TEST(Fp8, ScaleFloor) {
  EXPECT_FLOAT_EQ(fp8_block_scale(0.0f, false), 1e-4f / 448.0f);
  EXPECT_FLOAT_EQ(fp8_block_scale(448.0f, false), 1.0f);
  EXPECT_FLOAT_EQ(fp8_block_scale(449.0f, true), 2.0f);
}

TEST(Fp8, W8A8EqualsDequantizedProductWhenActivationsAreExact) {
  // Activations already on the e4m3 grid with amax 448 per group quantize exactly (scale 1), so the W8A8
  // result must equal x @ dequant(W)^T up to fp32 summation order.
  const int64_t T = 5, K = 300, N = 130;
  Tensor x = Tensor::empty({T, K}, DType::kF32);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = fp8e4m3_to_f32(static_cast<uint8_t>(rng() % 0x7e));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < K; g += 128) x.f32()[t * K + g] = 448.0f;
  LinearWeight w = quantize_weight_fp8(random_f32({N, K}, 4, 0.02f));
  Tensor y = linear_w8a8_reference(x, w, false);
  Tensor d = dequant(w);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x.f32()[t * K + k]) * d.f32()[n * K + k];
      ASSERT_NEAR(y.f32()[t * N + n], ref, 1e-4 * (1 + std::fabs(ref))) << t << "," << n;
    }
}

TEST(Fp8, W8A8CloseToFloatLinear) {
  Tensor x = random_f32({7, 256}, 5);
  Tensor wf = random_f32({64, 256}, 6, 0.05f);
  LinearWeight w = quantize_weight_fp8(wf);
  Tensor y = linear_w8a8_reference(x, w, true);
  double err = 0, norm = 0;
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t n = 0; n < 64; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < 256; ++k) ref += x.f32()[t * 256 + k] * wf.f32()[n * 256 + k];
      err += (y.f32()[t * 64 + n] - ref) * (y.f32()[t * 64 + n] - ref);
      norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / norm), 0.06) << "W8A8 relative L2 error";
  EXPECT_GT(std::sqrt(err / norm), 1e-4) << "quantization must actually happen";
}

TEST(Fp8, KvRoundTrip) {
  Tensor rows = random_f32({3, 576}, 7);
  Tensor orig = to_f32(rows);
  fp8_kv_round_trip(rows, 512, false);
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t k = 512; k < 576; ++k) EXPECT_EQ(rows.f32()[t * 576 + k], round_bf16(orig.f32()[t * 576 + k]));
    for (int64_t k = 0; k < 512; ++k) {
      const float a = orig.f32()[t * 576 + k], b = rows.f32()[t * 576 + k];
      EXPECT_LE(std::fabs(a - b), std::fabs(a) * 0.0625f + 1e-3f);
    }
  }
}

// The packed FP8 KV row layouts (kernels/kv_fp8.h, host side): FlashMLA's 656-byte row at V3's dims, a partial
// scale block and 16-byte part alignment at small dims, and kv_rope_of inverting the row size.
TEST(Fp8, KvRowLayouts) {
  using namespace kernels;
  const KvRowLayout v3 = kv_row_layout(kKvE4M3, 512, 64);
  EXPECT_EQ(v3.scale_off, 512);
  EXPECT_EQ(v3.rope_off, 528);
  EXPECT_EQ(v3.row_bytes, 656);
  const KvRowLayout small = kv_row_layout(kKvE4M3, 200, 16);  // two scale blocks, the second partial
  EXPECT_EQ(small.scale_off, 208);
  EXPECT_EQ(small.rope_off, 224);
  EXPECT_EQ(small.row_bytes, 256);
  EXPECT_EQ(kv_row_layout(kKvE5M2, 512, 64).row_bytes, 576);
  EXPECT_EQ(kv_row_layout(kKvBf16, 512, 64).row_bytes, 1152);
  for (int format : {kKvE4M3, kKvE5M2})
    for (int64_t nope : {64, 200, 512})
      for (int64_t rope : {0, 16, 64}) {
        EXPECT_EQ(kv_rope_of(format, nope, kv_row_layout(format, nope, rope).row_bytes), rope) << format << " " << nope;
        if (format == kKvE4M3) {
          EXPECT_EQ(kv_row_layout(format, nope, rope).row_bytes % 4, 0) << "the next row's fp32 scales stay aligned";
        }
      }
  EXPECT_EQ(kv_rope_of(kKvE4M3, 512, 500), -1);  // smaller than the latent part
  EXPECT_EQ(kv_rope_of(kKvE4M3, 512, 657), -1);  // half a bf16
}

// [gate; up] stacked is the same linear as the two halves: its W8A8 output is their outputs side by side, exactly.
TEST(Fp8, StackedRowsAreTheTwoLinears) {
  LinearWeight g = quantize_weight_fp8(random_f32({256, 384}, 11, 0.05f));
  LinearWeight u = quantize_weight_fp8(random_f32({256, 384}, 12, 0.05f));
  LinearWeight gu = stack_rows_fp8(g, u);
  ASSERT_EQ(gu.out_features(), 512);
  ASSERT_EQ(gu.scale_inv.dim(0), 4);
  Tensor x = random_f32({3, 384}, 13);
  Tensor yg = linear_w8a8_reference(x, g, false), yu = linear_w8a8_reference(x, u, false);
  Tensor y = linear_w8a8_reference(x, gu, false);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t n = 0; n < 256; ++n) {
      EXPECT_EQ(y.f32()[t * 512 + n], yg.f32()[t * 256 + n]);
      EXPECT_EQ(y.f32()[t * 512 + 256 + n], yu.f32()[t * 256 + n]);
    }
}

TEST(Fp8, MlpIsNativeOnWholeHiddenBlocks) {
  auto q = [](int64_t n, int64_t k) { return quantize_weight_fp8(random_f32({n, k}, 5, 0.05f)); };
  EXPECT_TRUE(fp8_mlp_is_native(q(256, 128), q(256, 128), q(128, 256)));
  EXPECT_TRUE(fp8_mlp_is_native(q(192, 128), q(192, 128), q(128, 192)));   // ragged inter: padded
  EXPECT_FALSE(fp8_mlp_is_native(q(256, 200), q(256, 200), q(200, 256)));  // hidden size not a multiple
  LinearWeight bf;
  bf.weight = random_f32({256, 128}, 6);
  EXPECT_FALSE(fp8_mlp_is_native(bf, q(256, 128), q(128, 256)));  // not FP8
  EXPECT_FALSE(fp8_mlp_is_native(q(256, 128), q(128, 128), q(128, 256)));  // gate and up disagree
}

// The padded MLP (inter 72 -> 128) is exactly the unpadded one: W8A8 gate and up, SiLU, W8A8 down.
TEST(Fp8, PaddedMlpIsExact) {
  const int64_t d = 256, inter = 72;
  LinearWeight g = quantize_weight_fp8(random_f32({inter, d}, 21, 0.05f));
  LinearWeight u = quantize_weight_fp8(random_f32({inter, d}, 22, 0.05f));
  LinearWeight dn = quantize_weight_fp8(random_f32({d, inter}, 23, 0.05f));
  Fp8Mlp m = stack_mlp_fp8(g, u, dn);
  ASSERT_EQ(m.gate_up.out_features(), 256);
  ASSERT_EQ(m.down.in_features(), 128);
  Tensor x = random_f32({4, d}, 24);
  auto mlp = [&](const Tensor& gu, int64_t n) {
    Tensor act = Tensor::empty({gu.dim(0), n}, DType::kF32);
    for (int64_t t = 0; t < gu.dim(0); ++t)
      for (int64_t i = 0; i < n; ++i) {
        const float a = gu.f32()[t * 2 * n + i], b = gu.f32()[t * 2 * n + n + i];
        act.f32()[t * n + i] = a / (1.0f + std::exp(-a)) * b;
      }
    return act;
  };
  // Unpadded: gate and up separately.
  Tensor yg = linear_w8a8_reference(x, g, false), yu = linear_w8a8_reference(x, u, false);
  Tensor gu = Tensor::empty({4, 2 * inter}, DType::kF32);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t i = 0; i < inter; ++i) {
      gu.f32()[t * 2 * inter + i] = yg.f32()[t * inter + i];
      gu.f32()[t * 2 * inter + inter + i] = yu.f32()[t * inter + i];
    }
  Tensor want = linear_w8a8_reference(mlp(gu, inter), dn, false);
  Tensor got = linear_w8a8_reference(mlp(linear_w8a8_reference(x, m.gate_up, false), 128), m.down, false);
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_EQ(got.f32()[i], want.f32()[i]) << i;
  }
}

TEST(Fp8, RandomE4m3WeightHasNoNan) {
  LinearWeight w = random_e4m3_weight(200, 300, 7, 0.5f);
  ASSERT_EQ(w.weight.dim(0), 200);
  ASSERT_EQ(w.scale_inv.dim(0), 2);
  ASSERT_EQ(w.scale_inv.dim(1), 3);
  int distinct[256] = {};
  for (int64_t i = 0; i < w.weight.numel(); ++i) {
    const uint8_t b = w.weight.data_as<uint8_t>()[i];
    EXPECT_TRUE(std::isfinite(fp8e4m3_to_f32(b))) << int(b);
    distinct[b] = 1;
  }
  int n = 0;
  for (int v : distinct) n += v;
  EXPECT_EQ(n, 128);  // every byte with bit 3 clear occurs
  for (int64_t i = 0; i < w.scale_inv.numel(); ++i) EXPECT_EQ(w.scale_inv.f32()[i], 0.5f);
  EXPECT_EQ(std::memcmp(w.weight.data(), random_e4m3_weight(200, 300, 7, 0.5f).weight.data(), 60000), 0);
  EXPECT_NE(std::memcmp(w.weight.data(), random_e4m3_weight(200, 300, 8, 0.5f).weight.data(), 60000), 0);
}

// kv_b_proj split for the absorbed FP8 products: each head's w_kc is its W_UK rows transposed and w_vc its W_UV
// rows, value for value after dequantization (bytes and block scales moved, never re-quantized); the W8A8
// reference of the per-head product equals the per-head linear and stays near the float product; dims that are
// not 128 multiples decline.
TEST(Fp8, AbsorbedSplitMovesTheCheckpointBlocks) {
  const int64_t H = 3, nope = 128, v = 128, lora = 256;
  for (bool ue8m0 : {false, true}) {
    Tensor w = random_f32({H * (nope + v), lora}, 41, 0.05f);
    for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] *= 1.0f + static_cast<float>((i / 97) % 7);  // varied blocks
    const LinearWeight kv_b = quantize_weight_fp8(w, 128, 128, ue8m0);
    const Tensor deq = dequant(kv_b);
    HeadsFp8 kc, vc;
    ASSERT_TRUE(split_absorbed_fp8(kv_b, H, nope, v, &kc, &vc));
    EXPECT_EQ(kc.ue8m0, ue8m0);
    ASSERT_EQ(kc.w.shape(), (Shape{H, lora, nope}));
    ASSERT_EQ(vc.w.shape(), (Shape{H, v, lora}));
    for (int64_t h = 0; h < H; ++h) {
      const Tensor k = dequant(kc.head(h)), u = dequant(vc.head(h));  // [lora, nope], [v, lora]
      for (int64_t r = 0; r < nope; ++r)
        for (int64_t c = 0; c < lora; ++c)
          ASSERT_EQ(k.f32()[c * nope + r], deq.f32()[(h * (nope + v) + r) * lora + c]) << h << " " << r << " " << c;
      for (int64_t r = 0; r < v; ++r)
        for (int64_t c = 0; c < lora; ++c)
          ASSERT_EQ(u.f32()[r * lora + c], deq.f32()[(h * (nope + v) + nope + r) * lora + c]) << h << " " << r;
    }
    // The per-head product: x [T, H, lora] through w_vc.
    const int64_t T = 5;
    Tensor x = random_f32({T, H, lora}, 42);
    Tensor y = bmm_heads_w8a8_reference(x, vc);  // [T, H, v]
    for (int64_t h = 0; h < H; ++h) {
      Tensor xh = Tensor::empty({T, lora}, DType::kF32);
      for (int64_t t = 0; t < T; ++t) std::memcpy(xh.f32() + t * lora, x.f32() + (t * H + h) * lora, 4 * lora);
      const Tensor yh = linear_w8a8_reference(xh, vc.head(h), ue8m0), uh = dequant(vc.head(h));
      double err = 0, ref = 0;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < v; ++n) {
          ASSERT_EQ(y.f32()[(t * H + h) * v + n], yh.f32()[t * v + n]);
          double exact = 0;
          for (int64_t c = 0; c < lora; ++c) exact += static_cast<double>(xh.f32()[t * lora + c]) * uh.f32()[n * lora + c];
          err = std::max(err, std::fabs(yh.f32()[t * v + n] - exact));
          ref = std::max(ref, std::fabs(exact));
        }
      EXPECT_LT(err, (ue8m0 ? 0.12 : 0.06) * ref) << "head " << h;  // e4m3 activations: ~2^-4 relative each
    }
  }
  HeadsFp8 kc, vc;
  EXPECT_FALSE(split_absorbed_fp8(quantize_weight_fp8(random_f32({H * 96, 256}, 43), 128, 128, false), H, 64, 32,
                                  &kc, &vc));
  EXPECT_FALSE(kc.defined());
  LinearWeight plain;
  plain.weight = random_f32({H * (nope + v), lora}, 44);
  EXPECT_FALSE(split_absorbed_fp8(plain, H, nope, v, &kc, &vc));
}

}  // namespace
}  // namespace ds
