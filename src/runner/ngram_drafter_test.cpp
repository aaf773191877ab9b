// NGRAM drafts (ngram_drafter.h) against a brute-force search: the longest recurring suffix's latest earlier
// occurrence, its continuation extended periodically, incremental histories the same as fresh ones.
#include "runner/ngram_drafter.h"

#include <random>

#include <gtest/gtest.h>

namespace ds {
namespace {

// The definition, searched directly.
std::vector<int32_t> brute(const std::vector<int32_t>& t, int count, int min_w, int max_w) {
  const int n = static_cast<int>(t.size());
  for (int w = std::min(max_w, n - 1); w >= min_w; --w)
    for (int end = n - 1; end >= w; --end) {  // latest first; the newest suffix (end n) itself excluded
      if (!std::equal(t.begin() + end - w, t.begin() + end, t.end() - w)) continue;
      std::vector<int32_t> ext(t);
      std::vector<int32_t> out;
      for (int k = 0; k < count; ++k) {
        out.push_back(ext[end + k]);
        ext.push_back(out.back());
      }
      return out;
    }
  return std::vector<int32_t>(count, t.back());
}

TEST(NgramDrafter, ContinuesTheLatestLongestMatch) {
  NgramDrafter d({1, 12});
  EXPECT_EQ(d.draft("a", std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}, 6),
            (std::vector<int32_t>{3, 4, 1, 2, 3, 4}));  // periodic past the newest token
  EXPECT_EQ(d.draft("b", std::vector<int32_t>{9, 1, 5, 9, 1, 6, 9, 1}, 2), (std::vector<int32_t>{6, 9}));
  EXPECT_EQ(d.draft("c", std::vector<int32_t>{5, 6, 7}, 3), (std::vector<int32_t>{7, 7, 7}));  // nothing recurs
  EXPECT_EQ(d.draft("d", std::vector<int32_t>{4}, 2), (std::vector<int32_t>{4, 4}));
  // The minimum window: a one-token suffix does not count with min 2.
  NgramDrafter two({2, 4});
  EXPECT_EQ(two.draft("e", std::vector<int32_t>{3, 8, 1, 3}, 1), (std::vector<int32_t>{3}));
  EXPECT_EQ(NgramDrafter({1, 4}).draft("e", std::vector<int32_t>{3, 8, 1, 3}, 1), (std::vector<int32_t>{8}));
}

TEST(NgramDrafter, RandomHistoriesMatchBruteForceIncrementally) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int min_w = 1 + static_cast<int>(rng() % 3), max_w = min_w + static_cast<int>(rng() % 6);
    const int alphabet = 2 + static_cast<int>(rng() % 5);
    NgramDrafter d({min_w, max_w});
    std::vector<int32_t> t;
    const std::string rid = "r" + std::to_string(trial % 7);  // ids reused after release
    for (int step = 0; step < 30; ++step) {
      const int add = 1 + static_cast<int>(rng() % 4);  // a prompt chunk, or a token plus accepted drafts
      for (int k = 0; k < add; ++k) t.push_back(static_cast<int32_t>(rng() % alphabet));
      const int count = static_cast<int>(rng() % 6);
      ASSERT_EQ(d.draft(rid, t, count), brute(t, count, min_w, max_w)) << "trial " << trial << " step " << step;
    }
    d.release(rid);
    // Split into the engine's known tokens and step tail, then a history that does not extend the indexed one at
    // its ends (another last token), which starts over.
    const size_t cut = t.size() - 1 - rng() % 3;
    ASSERT_EQ(d.draft(rid, std::span(t).first(cut), std::span(t).subspan(cut), 3), brute(t, 3, min_w, max_w));
    std::vector<int32_t> other(t.rbegin(), t.rend());
    other[t.size() - 1] = t.back() + 1;
    ASSERT_EQ(d.draft(rid, other, 3), brute(other, 3, min_w, max_w)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace ds
