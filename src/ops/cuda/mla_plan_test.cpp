// Host-side split-KV planning of the MLA decode kernels (kernels/mla_decode.h), checked without a GPU: the split
// count, the scratch layout, the count of splits that attend something, which the fused combine computes from a
// step's positions and must agree with how the decode kernels cut a context, and the transposed kernel's cluster size.
#include <algorithm>

#include <gtest/gtest.h>

#include "kernels/mla_decode.h"

namespace ds {
namespace {

// The decode kernels' partition written out independently of mla_decode_split_units: units of 64 positions, split
// s takes [s * per, min(units, (s + 1) * per)).
int attending_splits(int kv_end, int splits) {
  const int units = (std::max(kv_end, 0) + 63) / 64;
  const int per = (units + splits - 1) / splits;
  int n = 0;
  for (int s = 0; s < splits; ++s) n += std::min(units, s * per + per) - s * per > 0;
  return n;
}

TEST(MlaPlan, ActiveSplitsMatchTheDecodePartition) {
  for (int splits = 1; splits <= kernels::kMlaMaxSplits; ++splits)
    for (int kv_end = -3; kv_end <= 64 * 300; kv_end += (kv_end < 1100 ? 1 : 37)) {
      const int active = kernels::mla_decode_active_splits(kv_end, splits);
      ASSERT_EQ(active, attending_splits(kv_end, splits)) << "kv_end " << kv_end << " splits " << splits;
      ASSERT_LE(active, splits);
    }
}

TEST(MlaPlan, SplitUnitsPartitionTheContext) {
  for (int splits = 1; splits <= kernels::kMlaMaxSplits; ++splits)
    for (int units = 0; units <= 700; units += (units < 300 ? 1 : 23)) {
      int next = 0, nonempty = 0;
      for (int s = 0; s < splits; ++s) {
        const kernels::MlaSplitUnits r = kernels::mla_decode_split_units(units, splits, s);
        ASSERT_GE(r.count, 0);
        if (r.count == 0) continue;
        ASSERT_EQ(r.begin, next) << "units " << units << " splits " << splits << " split " << s;  // in order, no gap
        next = r.begin + r.count;
        ++nonempty;
      }
      ASSERT_EQ(next, units) << "units " << units << " splits " << splits;  // every unit covered once
      ASSERT_EQ(nonempty, kernels::mla_decode_active_splits(units * 64, splits));
    }
}

TEST(MlaPlan, SplitCountsFillTheMachineWithinBounds) {
  // Batch 1 x 32K at 16 heads (one 16-row block): every SM takes a piece, at most kMlaMaxSplits.
  const int s = kernels::mla_decode_num_splits(1, 1, 1, 16, 32768, false, 132, 16);
  EXPECT_EQ(s, 128);
  // A large batch fills the machine without splitting; tiny contexts never split past their units.
  EXPECT_EQ(kernels::mla_decode_num_splits(256, 256, 1, 16, 4096, false, 132, 16), 1);
  for (int ctx : {1, 63, 64, 65, 300, 4096, 163840})
    for (int heads : {16, 128}) {
      const int n = kernels::mla_decode_num_splits(1, 1, 1, heads, ctx, false, 132, heads <= 16 ? 16 : 64);
      EXPECT_GE(n, 1);
      EXPECT_LE(n, std::min(kernels::kMlaMaxSplits, (ctx + 63) / 64)) << ctx << " " << heads;
    }
  EXPECT_EQ(kernels::mla_decode_num_splits(0, 0, 1, 16, 4096, false, 132), 1);  // nothing to plan
}

TEST(MlaPlan, ScratchHoldsPartialsThenAlignedLogSumExps) {
  EXPECT_EQ(kernels::mla_decode_scratch_bytes(1, 8, 16), 0u);
  for (int splits : {2, 5, 128})
    for (int tokens : {1, 3, 64}) {
      const size_t off = kernels::mla_decode_lse_offset(splits, tokens, 16);
      EXPECT_EQ(off % 256, 0u);
      EXPECT_GE(off, static_cast<size_t>(splits) * tokens * 16 * kernels::kMlaValueDim * 4);
      EXPECT_EQ(kernels::mla_decode_scratch_bytes(splits, tokens, 16),
                off + static_cast<size_t>(splits) * tokens * 16 * 4);
    }
}

// The transposed kernel's in-cluster merge (MlaDecodeParams::t16_cluster): a forced size only where it divides the
// splits; none without splits or when the partials go to the fused combine; the launcher's own choice (no GPU here,
// or one whose clusters do not fit: 1) either merges every split or none.
TEST(MlaPlan, ClusterSizeDividesTheSplits) {
  kernels::MlaDecodeParams p;
  p.num_heads = 16;
  p.max_q_len = 1;
  p.num_seqs = 4;
  for (int splits : {1, 2, 3, 4, 6, 8, 16, 32, 128})
    for (int forced : {-1, 0, 1, 2, 3, 4, 8, 16}) {
      p.num_splits = splits;
      p.t16_cluster = forced;
      p.skip_combine = false;
      const int c = kernels::mla_decode_t16_cluster(p);
      ASSERT_GE(c, 1);
      ASSERT_EQ(splits % c, 0) << "splits " << splits << " forced " << forced;
      if (splits == 1 || forced == 0 || forced == 1) {
        EXPECT_EQ(c, 1);
      }
      if (forced > 1) {
        EXPECT_EQ(c, splits % forced == 0 && forced != 3 ? forced : 1) << splits << " " << forced;
      }
      if (forced < 0) {
        EXPECT_TRUE(c == 1 || c == splits) << splits;
      }
      p.skip_combine = true;
      EXPECT_EQ(kernels::mla_decode_t16_cluster(p), 1);
    }
}

}  // namespace
}  // namespace ds
