// The FP8 GEMM dispatch table's JSON: lookups, defaults, and errors that name the field.
#include "ops/fp8_tuning.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(Fp8GemmTuning, ParsesShapesAndFallsBackToTheDefault) {
  auto t = parse_fp8_gemm_tuning(R"({"device": "NVIDIA H100 80GB HBM3", "default_small_m_max": 8,
      "shapes": [{"N": 2176, "K": 7168, "small_m_max": 16, "us": {"1": [13.8, 19.8]}},
                 {"N": 24576, "K": 1536, "small_m_max": 4}]})");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t->lookup(2176, 7168), 16);
  EXPECT_EQ(t->lookup(24576, 1536), 4);
  EXPECT_EQ(t->lookup(7168, 16384), 8);  // not in the table
  auto empty = parse_fp8_gemm_tuning("{}");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->lookup(128, 128), 16);
}

TEST(Fp8GemmTuning, ErrorsNameTheProblem) {
  auto msg = [](const char* text) {
    auto t = parse_fp8_gemm_tuning(text);
    return t.is_ok() ? std::string("ok") : t.status().message();
  };
  EXPECT_NE(msg("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(msg("[]").find("JSON object"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": 3})").find("\"shapes\" must be an array"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"N": 2176, "K": 7168}]})").find("shapes[0]: missing \"small_m_max\""), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"N": 2112, "K": 7168, "small_m_max": 8}]})").find("multiples of 128"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"N": 256, "K": 256, "small_m_max": 65}]})").find("[0, 64]"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"N": 256, "K": 256, "small_m_max": 1.5}]})").find("must be an integer"), std::string::npos);
  EXPECT_NE(msg(R"({"default_small_m_max": -1})").find("default_small_m_max"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"N": 256, "K": 256, "small_m_max": 1}, {"N": 256, "K": 256, "small_m_max": 2}]})")
                .find("repeated"),
            std::string::npos);
}

}  // namespace
}  // namespace ds
