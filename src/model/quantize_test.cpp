// runs_fp8_linears: the one place that says whether a model's linears will run in FP8 before the weights load.
#include "model/quantize.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(Quantize, RunsFp8LinearsFromTheCheckpointOrTheFlag) {
  ModelConfig bf16;
  EXPECT_FALSE(runs_fp8_linears(bf16, ""));
  EXPECT_FALSE(runs_fp8_linears(bf16, "none"));
  EXPECT_TRUE(runs_fp8_linears(bf16, "fp8"));
  ModelConfig fp8;
  fp8.fp8.enabled = true;
  EXPECT_TRUE(runs_fp8_linears(fp8, ""));
  EXPECT_TRUE(runs_fp8_linears(fp8, "fp8"));
}

}  // namespace
}  // namespace ds
