// The FP8 GEMM and FP8 MoE dispatch tables' JSON: lookups, defaults, merging, errors that name the field, and
// the committed per-GPU tables.
#include "ops/fp8_tuning.h"

#include <filesystem>
#include <fstream>
#include <sstream>

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

TEST(MoeFp8Tuning, ParsesShapesAndFallsBackToTheDefault) {
  auto t = parse_moe_fp8_tuning(R"({"device": "GPU X", "default_grouped_max_tokens": 512, "shapes": [
      {"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 256, "walk_stages": 8, "us": {"16": [1, 2]}},
      {"experts": 8, "hidden": 256, "inter": 128, "grouped_max_tokens": 16}]})");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->device, "GPU X");
  EXPECT_EQ(t->lookup(64, 2048, 1408), 256);
  EXPECT_EQ(t->lookup(256, 7168, 2048), 512);
  EXPECT_EQ(t->walk_stages_for(64, 2048, 1408), 8);
  EXPECT_EQ(t->walk_stages_for(8, 256, 128), 0);  // no depth given: the kernels' choice
  EXPECT_EQ(t->walk_stages_for(256, 7168, 2048), 0);
  auto empty = parse_moe_fp8_tuning("{}");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->lookup(64, 2048, 1408), 1024);
}

TEST(MoeFp8Tuning, ErrorsNameTheProblem) {
  auto msg = [](const char* text) {
    auto t = parse_moe_fp8_tuning(text);
    return t.is_ok() ? std::string("ok") : t.status().message();
  };
  EXPECT_NE(msg("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": {}})").find("\"shapes\" must be an array"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"experts": 64, "hidden": 2048, "inter": 1408}]})").find("missing \"grouped_max_tokens\""),
            std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"experts": 64, "hidden": 2048, "inter": 1400, "grouped_max_tokens": 64}]})")
                .find("multiples of 128"),
            std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 8}]})").find("[16, "),
            std::string::npos);
  EXPECT_NE(msg(R"({"default_grouped_max_tokens": "x"})").find("must be an integer"), std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"experts": 8, "hidden": 256, "inter": 128, "grouped_max_tokens": 16, "walk_stages": 5}]})")
                .find("walk_stages must be 4, 6 or 8"),
            std::string::npos);
  EXPECT_NE(msg(R"({"shapes": [{"experts": 8, "hidden": 256, "inter": 128, "grouped_max_tokens": 16},
                               {"experts": 8, "hidden": 256, "inter": 128, "grouped_max_tokens": 32}]})")
                .find("repeated"),
            std::string::npos);
}

TEST(MoeFp8Tuning, MergeReplacesTheSameShapeAndKeepsOthers) {
  const char* v2 = R"({"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 256})";
  const char* v3 = R"({"experts": 256, "hidden": 7168, "inter": 2048, "grouped_max_tokens": 2048})";
  auto first = merge_moe_fp8_tuning("", "GPU X", v2);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  auto both = merge_moe_fp8_tuning(*first, "GPU X", v3);
  ASSERT_TRUE(both.is_ok()) << both.status().message();
  auto again = merge_moe_fp8_tuning(*both, "GPU X",
                                    R"({"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 512})");
  ASSERT_TRUE(again.is_ok());
  auto t = parse_moe_fp8_tuning(*again);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->device, "GPU X");
  EXPECT_EQ(t->grouped_max.size(), 2u);
  EXPECT_EQ(t->lookup(64, 2048, 1408), 512);
  EXPECT_EQ(t->lookup(256, 7168, 2048), 2048);
  // A depth measured in the model stays through tune-moe's merge of the same shape, unless the entry has its own.
  auto staged = merge_moe_fp8_tuning(*again, "GPU X",
                                     R"({"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 512, "walk_stages": 8})");
  ASSERT_TRUE(staged.is_ok());
  auto retuned = merge_moe_fp8_tuning(*staged, "GPU X", v2);
  ASSERT_TRUE(retuned.is_ok());
  EXPECT_EQ(parse_moe_fp8_tuning(*retuned)->walk_stages_for(64, 2048, 1408), 8);
  EXPECT_EQ(parse_moe_fp8_tuning(*retuned)->lookup(64, 2048, 1408), 256);
  auto changed = merge_moe_fp8_tuning(*staged, "GPU X",
                                      R"({"experts": 64, "hidden": 2048, "inter": 1408, "grouped_max_tokens": 512, "walk_stages": 4})");
  ASSERT_TRUE(changed.is_ok());
  EXPECT_EQ(parse_moe_fp8_tuning(*changed)->walk_stages_for(64, 2048, 1408), 4);
  EXPECT_FALSE(merge_moe_fp8_tuning("not json", "GPU X", v2).is_ok());
  EXPECT_FALSE(merge_moe_fp8_tuning("", "GPU X", R"({"experts": 64})").is_ok());  // the result must be valid
}

// The committed per-GPU tables load (an invalid one would stop every native FP8 run on that GPU).
TEST(Fp8Tuning, CommittedTablesParse) {
  int checked = 0;
  for (const char* dir : {"fp8_gemm", "moe_fp8"}) {
    const std::filesystem::path root = std::filesystem::path(DSERVE_SOURCE_DIR) / "configs" / dir;
    for (const auto& f : std::filesystem::directory_iterator(root)) {
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      const bool ok = std::string(dir) == "fp8_gemm" ? parse_fp8_gemm_tuning(text.str()).is_ok()
                                                     : parse_moe_fp8_tuning(text.str()).is_ok();
      EXPECT_TRUE(ok) << f.path();
      ++checked;
    }
  }
  EXPECT_GE(checked, 2);
}

}  // namespace
}  // namespace ds
