#include "core/stream_arena.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace ds {
namespace {

constexpr uint64_t kMain = 1, kSide = 2;
constexpr size_t kA = StreamArena::kAlign;

TEST(StreamArena, RoundsAndBumps) {
  StreamArena a(10 * kA);
  EXPECT_EQ(a.alloc(1, kMain), 0u);
  EXPECT_EQ(a.alloc(kA, kMain), kA);
  EXPECT_EQ(a.alloc(0, kMain), 2 * kA);  // an empty tensor still takes a unit
  EXPECT_EQ(a.alloc(kA + 1, kMain), 3 * kA);
  EXPECT_EQ(a.high_water(), 5 * kA);
  EXPECT_EQ(a.live_bytes(), 5 * kA);
  EXPECT_EQ(a.live_blocks(), 4);
  EXPECT_FALSE(a.alloc(6 * kA, kMain).has_value()) << "past the capacity";
  EXPECT_EQ(a.alloc(5 * kA, kMain), 5 * kA) << "exactly the rest";
  EXPECT_FALSE(a.alloc(1, kMain).has_value());
  EXPECT_FALSE(a.alloc(SIZE_MAX, kMain).has_value()) << "no overflow in the fit check";
}

TEST(StreamArena, ReusesOnlyOnTheFreeingStream) {
  StreamArena a(100 * kA);
  const size_t x = *a.alloc(4 * kA, kMain);
  ASSERT_TRUE(a.free(x, kMain));
  EXPECT_NE(a.alloc(4 * kA, kSide), x) << "a block freed on main must not go to the side stream";
  EXPECT_EQ(a.alloc(4 * kA, kMain), x);
  const size_t y = *a.alloc(2 * kA, kSide);
  ASSERT_TRUE(a.free(y, kSide));
  EXPECT_EQ(a.alloc(2 * kA, kSide), y);
}

TEST(StreamArena, ReleasedTagsGoToAnyStream) {
  StreamArena a(100 * kA);
  const size_t x = *a.alloc(4 * kA, kMain);
  ASSERT_TRUE(a.free(x, kMain));
  a.release_tags();
  EXPECT_EQ(a.alloc(4 * kA, kSide), x);
  EXPECT_EQ(a.high_water(), 4 * kA);
}

TEST(StreamArena, BestFitSplitsAndMerges) {
  StreamArena a(100 * kA);
  const size_t b0 = *a.alloc(8 * kA, kMain), b1 = *a.alloc(2 * kA, kMain), b2 = *a.alloc(3 * kA, kMain);
  const size_t keep = *a.alloc(kA, kMain);
  ASSERT_TRUE(a.free(b0, kMain));
  ASSERT_TRUE(a.free(b2, kMain));
  EXPECT_EQ(a.alloc(3 * kA, kMain), b2) << "the 3-unit hole fits best, not the 8-unit one";
  ASSERT_TRUE(a.free(b2, kMain));
  ASSERT_TRUE(a.free(b1, kMain));  // b0 + b1 + b2 merge into one 13-unit block
  EXPECT_EQ(a.alloc(13 * kA, kMain), b0);
  EXPECT_EQ(a.high_water(), 14 * kA);
  const size_t s = *a.alloc(kA, kMain);
  EXPECT_EQ(s, 14 * kA);
  ASSERT_TRUE(a.free(b0, kMain));
  EXPECT_EQ(a.alloc(5 * kA, kMain), b0) << "a split leaves the rest free";
  EXPECT_EQ(a.alloc(8 * kA, kMain), b0 + 5 * kA);
  (void)keep;
}

TEST(StreamArena, BlocksOfDifferentStreamsDoNotMerge) {
  StreamArena a(100 * kA);
  const size_t m = *a.alloc(2 * kA, kMain), s = *a.alloc(2 * kA, kSide);
  ASSERT_TRUE(a.free(m, kMain));
  ASSERT_TRUE(a.free(s, kSide));
  EXPECT_NE(a.alloc(4 * kA, kMain), m) << "main may not take the side stream's half";
  a.release_tags();
  StreamArena b(100 * kA);
  const size_t m2 = *b.alloc(2 * kA, kMain), s2 = *b.alloc(2 * kA, kSide);
  ASSERT_TRUE(b.free(m2, kMain));
  ASSERT_TRUE(b.free(s2, kSide));
  b.release_tags();
  EXPECT_EQ(b.alloc(4 * kA, kSide), m2) << "released, the two halves are one block";
}

TEST(StreamArena, RejectsUnknownAndDoubleFrees) {
  StreamArena a(100 * kA);
  const size_t x = *a.alloc(kA, kMain);
  EXPECT_FALSE(a.free(x + kA, kMain));
  EXPECT_TRUE(a.free(x, kMain));
  EXPECT_FALSE(a.free(x, kMain));
  EXPECT_EQ(a.live_blocks(), 0);
  EXPECT_EQ(a.live_bytes(), 0u);
}

// Random alloc / free sequences on two streams: live blocks never overlap, stay inside the high water mark and
// the capacity, and a block is never handed to a stream other than the one that freed it (unless released).
TEST(StreamArena, RandomSequencesKeepBlocksDisjoint) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    StreamArena a(400 * kA);
    struct Live {
      size_t off, size;
    };
    std::vector<Live> live;
    std::vector<uint64_t> tag(400, StreamArena::kAnyStream);
    for (int step = 0; step < 400; ++step) {
      if (live.empty() || rng() % 3 != 0) {
        const size_t bytes = rng() % (8 * kA);
        const uint64_t st = rng() % 2 ? kMain : kSide;
        const auto off = a.alloc(bytes, st);
        if (!off) continue;
        const size_t size = StreamArena::round_up(bytes);
        ASSERT_EQ(*off % kA, 0u);
        ASSERT_LE(*off + size, a.high_water());
        ASSERT_LE(a.high_water(), a.capacity());
        for (const Live& l : live) ASSERT_TRUE(*off + size <= l.off || l.off + l.size <= *off) << "overlap";
        for (size_t u = *off / kA; u < (*off + size) / kA; ++u)
          ASSERT_TRUE(tag[u] == StreamArena::kAnyStream || tag[u] == st) << "reused across streams";
        live.push_back({*off, size});
      } else {
        const size_t i = rng() % live.size();
        const uint64_t st = rng() % 2 ? kMain : kSide;
        ASSERT_TRUE(a.free(live[i].off, st));
        for (size_t u = live[i].off / kA; u < (live[i].off + live[i].size) / kA; ++u) tag[u] = st;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (step % 97 == 96) {
        a.release_tags();
        std::fill(tag.begin(), tag.end(), StreamArena::kAnyStream);
      }
      size_t bytes = 0;
      for (const Live& l : live) bytes += l.size;
      ASSERT_EQ(a.live_bytes(), bytes);
    }
  }
}

}  // namespace
}  // namespace ds
