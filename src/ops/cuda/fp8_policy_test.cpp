// The wgmma FP8 GEMM's cluster policy (Fp8Gemm::choose_wgmma_cluster), checked without a GPU: the clusters BENCHMARKS
// session 54 lists for V2-Lite's and V3's decode weights at 64 tokens on an H200 (2 CTAs an SM x 132 SMs, every
// cluster size filling them), what fewer resident clusters change, and the rules behind them written out
// independently.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "kernels/fp8_gemm_wgmma.h"
#include "ops/cuda/fp8_linear.h"

namespace ds {
namespace {

constexpr int64_t kWave = 2 * 132;
constexpr Fp8Gemm::ClusterWaves kFull{kWave, kWave, kWave};

int pick(int64_t n, int64_t k, Fp8Gemm::ClusterWaves wave = kFull, int max_size = 8, int64_t min_blocks = 2) {
  const int64_t np = (n + 127) / 128 * 128, kp = (k + 127) / 128 * 128;
  return Fp8Gemm::choose_wgmma_cluster(np / 64, kp / 128, wave, max_size, min_blocks);
}

TEST(Fp8Policy, ClustersForTheDecodeWeights) {
  EXPECT_EQ(pick(3072, 2048), 4);    // V2-Lite q: 48 tiles; 8 would be 384 CTAs
  EXPECT_EQ(pick(576, 2048), 8);     // kv_a: 10 tiles, ranges of 2 blocks
  EXPECT_EQ(pick(2048, 2048), 8);    // o_proj: 256 CTAs
  EXPECT_EQ(pick(5632, 2048), 2);    // shared gate|up: 88 tiles
  EXPECT_EQ(pick(2048, 2816), 8);    // shared down: 22 blocks, 8 ranges of 3 (the last of 1)
  EXPECT_EQ(pick(2112, 7168), 4);    // V3 q_a_kv_a: 34 tiles x 56 blocks
  EXPECT_EQ(pick(7168, 16384), 4);   // o_proj: 128 blocks, no cluster inside a wave: the smallest that covers K
  EXPECT_EQ(pick(24576, 1536), 1);   // q_b: 384 tiles, one range
  EXPECT_EQ(pick(24576, 1536, {3 * kWave, 3 * kWave, 3 * kWave}), 2);
  EXPECT_EQ(pick(4096, 7168), 4);    // expert gate|up
  EXPECT_EQ(pick(7168, 2048), 2);    // expert down
  EXPECT_EQ(pick(36864, 7168), 2);   // dense gate|up: covers K
  EXPECT_EQ(pick(7168, 18432), 4);   // dense down: 144 blocks
}

// Clusters share a GPC, so fewer CTAs of the larger sizes may fit at once than CTAs an SM x SMs (the counts here are
// made up: cudaOccupancyMaxActiveClusters on the device says).
TEST(Fp8Policy, FewerResidentClustersPickSmallerOnes) {
  const Fp8Gemm::ClusterWaves gpcs{kWave, 256, 224};
  EXPECT_EQ(pick(2048, 2048, gpcs), 4);  // V2-Lite o_proj: 32 tiles x 8 = 256 CTAs no longer fit
  EXPECT_EQ(pick(576, 2048, gpcs), 8);   // kv_a: 80 CTAs still do
  EXPECT_EQ(pick(3072, 2048, gpcs), 4);  // q: 192 CTAs of 4
  // A size that cannot run at all is never taken, not even to cover K.
  EXPECT_EQ(pick(576, 2048, {kWave, kWave, 0}), 4);
  EXPECT_EQ(pick(7168, 16384, {kWave, 0, 0}), 1);  // V3 o_proj: 128 blocks need 4 ranges; none can run
  EXPECT_EQ(pick(7168, 16384, {kWave, 0, kWave}), 8);
  EXPECT_EQ(pick(576, 2048, {0, 0, 0}), 1);
}

// Every choice against the rules: a power of two up to the cap; every range non-empty and at most
// kFp8WgmmaMaxBlocks; inside the wave with ranges of at least min_blocks, and no larger such cluster, unless none is
// and K needs one (then the smallest valid); 1 where one range covers K and no cluster fits.
TEST(Fp8Policy, ChoicesFollowTheRules) {
  const int64_t max_blocks = kernels::kFp8WgmmaMaxBlocks;
  auto valid = [&](int c, int64_t kb) {
    const int64_t bps = (kb + c - 1) / c;
    return (c - 1) * bps < kb && bps <= max_blocks;
  };
  const Fp8Gemm::ClusterWaves waves[] = {kFull, {kWave, 256, 224}, {kWave, 0, kWave}, {0, kWave, 0}, {0, 0, 0}};
  for (const Fp8Gemm::ClusterWaves& wave : waves)
    for (int64_t tiles : {1, 4, 33, 132, 264, 1000})
      for (int64_t kb = 1; kb <= 8 * max_blocks + 3; ++kb)
        for (int cap : {1, 2, 4, 8})
          for (int64_t min_blocks : {1, 2, 4}) {
            const int c = Fp8Gemm::choose_wgmma_cluster(tiles, kb, wave, cap, min_blocks);
            const std::string what = "tiles " + std::to_string(tiles) + " kb " + std::to_string(kb) + " cap " +
                                     std::to_string(cap) + " min " + std::to_string(min_blocks) + " waves " +
                                     std::to_string(wave[0]) + "/" + std::to_string(wave[1]) + "/" +
                                     std::to_string(wave[2]);
            ASSERT_TRUE(c == 1 || c == 2 || c == 4 || c == 8) << what;
            ASSERT_LE(c, std::max(cap, 1)) << what;
            auto runs = [&](int x) { return wave[x == 2 ? 0 : x == 4 ? 1 : 2] > 0 && valid(x, kb); };
            auto fits = [&](int x) {
              return runs(x) && (kb + x - 1) / x >= min_blocks && tiles * x <= wave[x == 2 ? 0 : x == 4 ? 1 : 2];
            };
            int best = 1;
            for (int x = 2; x <= cap; x *= 2)
              if (fits(x)) best = x;
            if (best > 1) {
              ASSERT_EQ(c, best) << what;
            } else if (kb > max_blocks) {
              int cover = 1;
              for (int x = 2; x <= cap && cover == 1; x *= 2)
                if (runs(x)) cover = x;
              ASSERT_EQ(c, cover) << what;
            } else {
              ASSERT_EQ(c, 1) << what;
            }
          }
}

}  // namespace
}  // namespace ds
