// Exactness of the scalar dtype conversions against hand-computed encodings.
#include "core/dtype.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace ds {

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even gives 1.0.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.015625f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, Fp8E4M3AllCodesRoundTrip) {
  for (int c = 0; c < 256; ++c) {
    float v = fp8e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    uint8_t back = f32_to_fp8e4m3(v);
    if (v == 0.0f) {
      EXPECT_EQ(fp8e4m3_to_f32(back), 0.0f);
    } else {
      EXPECT_EQ(back, c) << "code " << c << " value " << v;
    }
  }
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f32_to_fp8e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(fp8e4m3_to_f32(f32_to_fp8e4m3(1.0625f)), 1.0f);  // halfway 1 and 1.125 -> even (1.0)
  EXPECT_EQ(fp8e4m3_to_f32(f32_to_fp8e4m3(1.1875f)), 1.25f);  // halfway 1.125 and 1.25 -> even (1.25)
}

// The bit-level encoder against a nearest-code search (ties to the even code, saturation at 448, NaN kept) over
// ~1M floats spread over every bit pattern, and every midpoint between neighbouring codes and one ulp either side.
TEST(DType, Fp8E4M3MatchesNearestCodeSearch) {
  std::vector<float> codes;  // positive finite values, code = index
  for (int c = 0; c <= 0x7e; ++c) codes.push_back(fp8e4m3_to_f32(static_cast<uint8_t>(c)));
  auto nearest = [&](float f) -> int {
    const int sign = std::signbit(f) ? 0x80 : 0;
    if (std::isnan(f)) return sign | 0x7f;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= 448.0) return sign | 0x7e;
    int best = 0;
    for (int c = 1; c <= 0x7e; ++c) {
      const double d = std::fabs(codes[c] - a), db = std::fabs(codes[best] - a);
      if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    return sign | best;
  };
  std::vector<float> probes;
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += 4099) {
    const uint32_t b = static_cast<uint32_t>(i);
    float f;
    std::memcpy(&f, &b, sizeof f);
    probes.push_back(f);
  }
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = 0.5f * (codes[c] + codes[c + 1]);  // exact: neighbours differ by one quantum
    for (float v : {std::nextafter(mid, 0.0f), mid, std::nextafter(mid, 1000.0f)}) {
      probes.push_back(v);
      probes.push_back(-v);
    }
  }
  probes.insert(probes.end(), {0.0f, -0.0f, 448.0f, 464.0f, 1e30f, INFINITY, -INFINITY, NAN, -NAN,
                               std::ldexp(1.0f, -6), std::ldexp(1.0f, -10), std::ldexp(1.0f, -149)});
  int bad = 0;
  for (float f : probes) {
    const int want = nearest(f), got = f32_to_fp8e4m3(f);
    if (want != got && ++bad <= 10) ADD_FAILURE() << "f = " << f << ": got " << got << ", want " << want;
  }
  EXPECT_EQ(bad, 0) << "of " << probes.size() << " probes";
}

TEST(DType, F16AndE5M2) {
  for (int c = 0; c < 65536; c += 7) {
    float v = f16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(v)) continue;
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v);
  }
  EXPECT_EQ(fp8e5m2_to_f32(f32_to_fp8e5m2(57344.0f)), 57344.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1e6f)), INFINITY);
}

TEST(DType, Names) {
  DType t;
  ASSERT_TRUE(dtype_from_name("F8_E4M3", &t));
  EXPECT_EQ(t, DType::kF8E4M3);
  EXPECT_FALSE(dtype_from_name("F4", &t));
  EXPECT_STREQ(dtype_name(DType::kBF16), "BF16");
}

}  // namespace ds
