#include "model/mha_chunks.h"

#include <random>

#include <gtest/gtest.h>

namespace ds {
namespace {

struct Step {
  std::vector<int32_t> seq_lens, q_starts, positions;
};

// Sequences of random prefix and new-token counts (prefill steps: new positions follow the prefix).
Step random_step(std::mt19937& rng) {
  Step s;
  const int n = std::uniform_int_distribution<int>(1, 5)(rng);
  s.q_starts.push_back(0);
  for (int i = 0; i < n; ++i) {
    const int prefix = std::uniform_int_distribution<int>(0, 40)(rng);
    const int fresh = std::uniform_int_distribution<int>(1, 9)(rng);
    s.seq_lens.push_back(prefix + fresh);
    for (int p = prefix; p < prefix + fresh; ++p) s.positions.push_back(p);
    s.q_starts.push_back(static_cast<int32_t>(s.positions.size()));
  }
  return s;
}

TEST(MhaChunks, OnePassWhenTheContextFits) {
  const Step s{{5, 7}, {0, 2, 3}, {3, 4, 6}};
  EXPECT_TRUE(plan_mha_chunks(s.seq_lens, s.q_starts, s.positions, 12).empty());
  EXPECT_FALSE(plan_mha_chunks(s.seq_lens, s.q_starts, s.positions, 11).empty());
}

// Every position of every sequence in exactly one chunk, as the row gather_context put it at; each chunk's runs
// consecutive and within max_rows past the first; no query shifted below 0 (the kernels' "no row" mark) and, past
// the first chunk, every key before every query of its sequence (the whole chunk attended).
TEST(MhaChunks, CoverEveryPositionOnceWithinBudget) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 400; ++iter) {
    const Step s = random_step(rng);
    const int64_t max_rows = std::uniform_int_distribution<int>(1, 30)(rng);
    const std::vector<MhaChunk> plan = plan_mha_chunks(s.seq_lens, s.q_starts, s.positions, max_rows);
    int64_t total = 0;
    for (int32_t l : s.seq_lens) total += l;
    if (total <= max_rows) {
      EXPECT_TRUE(plan.empty());
      continue;
    }
    ASSERT_FALSE(plan.empty());
    const size_t n = s.seq_lens.size();
    std::vector<int64_t> base(n, 0);
    for (size_t i = 1; i < n; ++i) base[i] = base[i - 1] + s.seq_lens[i - 1];
    std::vector<int> seen(static_cast<size_t>(total), 0);
    for (size_t c = 0; c < plan.size(); ++c) {
      const MhaChunk& ch = plan[c];
      ASSERT_EQ(ch.seq_lens.size(), n);
      ASSERT_EQ(ch.shift.size(), n);
      if (c > 0) {
        EXPECT_LE(ch.num_rows(), max_rows);
      }
      EXPECT_GT(ch.num_rows(), 0);
      int64_t r = 0;
      for (size_t i = 0; i < n; ++i) {
        for (int32_t j = 0; j < ch.seq_lens[i]; ++j, ++r) {
          ASSERT_LT(r, ch.num_rows());
          EXPECT_EQ(ch.rows[r], base[i] + ch.shift[i] + j);  // consecutive, in gather order
          ++seen[ch.rows[r]];
        }
        for (int32_t t = s.q_starts[i]; t < s.q_starts[i + 1]; ++t) {
          EXPECT_GE(s.positions[t] - ch.shift[i], 0);
          if (c > 0) {
            EXPECT_LT(ch.shift[i] + ch.seq_lens[i] - 1, s.positions[t]);
          }
        }
        if (c == 0) {  // from the first query on (so each query attends the key at shift), to the end
          EXPECT_GT(ch.seq_lens[i], 0);
          EXPECT_EQ(ch.shift[i] + ch.seq_lens[i], s.seq_lens[i]);
        }
      }
      EXPECT_EQ(r, ch.num_rows());
    }
    for (int64_t i = 0; i < total; ++i) EXPECT_EQ(seen[i], 1) << "row " << i;
    // As few chunks as the budget allows: the first, then the earlier positions max_rows at a time.
    int64_t earlier = total - plan[0].num_rows();
    EXPECT_EQ(static_cast<int64_t>(plan.size()), 1 + (earlier + max_rows - 1) / max_rows);
  }
}

TEST(MhaChunks, FirstChunkStartsAtEachSequencesFirstQuery) {
  // Positions out of order (a tree of drafts would be): the first chunk starts at the smallest.
  const Step s{{10, 6}, {0, 3, 4}, {8, 7, 9, 5}};
  const std::vector<MhaChunk> plan = plan_mha_chunks(s.seq_lens, s.q_starts, s.positions, 4);
  ASSERT_EQ(plan.size(), 4u);  // [7, 10) + [5, 6); then 7 + 5 earlier rows: 4, 4, 4
  EXPECT_EQ(plan[0].shift, (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(plan[0].seq_lens, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(plan[0].rows, (std::vector<int32_t>{7, 8, 9, 15}));
  EXPECT_EQ(plan[1].seq_lens, (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(plan[2].seq_lens, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(plan[2].shift, (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(plan[3].seq_lens, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(plan[3].shift, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(plan[3].rows, (std::vector<int32_t>{11, 12, 13, 14}));
}

}  // namespace
}  // namespace ds
