// PagePool: allocation is all-or-nothing, ids are distinct, and reference counts decide when pages free.
#include "cache/page_pool.h"

#include <set>

#include <gtest/gtest.h>

namespace ds {

TEST(PagePool, AllocFreeCounts) {
  PagePool pool(8, 64);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(pool.page_size(), 64);
  std::vector<PageId> a;
  ASSERT_TRUE(pool.alloc(5, a));
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_used(), 5);
  std::vector<PageId> b;
  EXPECT_FALSE(pool.alloc(4, b));  // only 3 left: nothing is taken
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free(), 3);
  ASSERT_TRUE(pool.alloc(3, b));
  EXPECT_EQ(pool.num_free(), 0);
  std::set<PageId> ids(a.begin(), a.end());
  ids.insert(b.begin(), b.end());
  EXPECT_EQ(ids.size(), 8u);  // all distinct
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 7);
  pool.unref(a);
  EXPECT_EQ(pool.num_free(), 5);
  pool.unref(b);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(pool.padding_page(), 8);  // outside the allocatable range
}

TEST(PagePool, ReferenceCountsShareAPage) {
  PagePool pool(4, 16);
  std::vector<PageId> a;
  ASSERT_TRUE(pool.alloc(1, a));
  PageId p = a[0];
  pool.ref(p);  // e.g. the radix tree caches it
  pool.ref(p);  // and a second request reuses it
  EXPECT_EQ(pool.ref_count(p), 3);
  EXPECT_FALSE(pool.unref(p));
  EXPECT_FALSE(pool.unref(p));
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_TRUE(pool.unref(p));
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.ref_count(p), 0);
}

TEST(PagePool, FreedPagesAreReused) {
  PagePool pool(2, 1);
  std::vector<PageId> a;
  ASSERT_TRUE(pool.alloc(2, a));
  pool.unref(a[1]);
  std::vector<PageId> b;
  ASSERT_TRUE(pool.alloc(1, b));
  EXPECT_EQ(b[0], a[1]);
}

TEST(PagePoolDeathTest, UnrefOfFreePageIsAnInternalError) {
  PagePool pool(2, 1);
  EXPECT_DEATH(pool.unref(PageId{0}), "unref of free page");
  EXPECT_DEATH(pool.ref(PageId{1}), "ref of free page");
}

}  // namespace ds
