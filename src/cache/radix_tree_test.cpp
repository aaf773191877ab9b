// RadixTree: page-aligned matching, splitting, dedup on insert, path locks and LRU eviction, checked
// against the PagePool's reference counts.
#include "cache/radix_tree.h"

#include <numeric>

#include <gtest/gtest.h>

namespace ds {
namespace {

constexpr int32_t kPs = 4;

std::vector<TokenId> seq(TokenId first, int32_t n) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}
std::vector<TokenId> cat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A request-like holder: allocates pages for `tokens`, inserts the whole pages, then lets go of its own
// references, so the tree is the only holder afterwards.
std::vector<PageId> cache_tokens(PagePool& pool, RadixTree& tree, const std::vector<TokenId>& tokens) {
  std::vector<PageId> pages;
  EXPECT_TRUE(pool.alloc(pages_for(static_cast<int32_t>(tokens.size()), kPs), pages));
  auto ins = tree.insert(tokens, std::span<const PageId>(pages).first(tokens.size() / kPs));
  pool.unref(pages);
  return ins.pages;
}

TEST(RadixTree, MatchesOnlyWholePages) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  auto a = seq(100, 10);  // 2 whole pages + 2 tokens: only 8 tokens are cacheable
  auto pages = cache_tokens(pool, tree, a);
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(tree.cached_pages(), 2);
  EXPECT_EQ(pool.num_free(), 14);  // the third (partial) page went back to the pool

  auto m = tree.match_prefix(a);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.pages, pages);
  // 7 tokens: the second page is incomplete, so only the first is matched.
  auto m7 = tree.match_prefix(seq(100, 7));
  EXPECT_EQ(m7.num_tokens, 4);
  EXPECT_EQ(m7.pages, std::vector<PageId>{pages[0]});
  // A mismatch inside the first page matches nothing.
  auto other = seq(100, 8);
  other[2] = 999;
  EXPECT_EQ(tree.match_prefix(other).num_tokens, 0);
  EXPECT_EQ(tree.match_prefix(other).node, tree.root());
}

TEST(RadixTree, PartialMatchSplitsTheNode) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  auto a = seq(0, 12);  // one node of 3 pages
  auto pages = cache_tokens(pool, tree, a);
  EXPECT_EQ(tree.num_nodes(), 1);
  EXPECT_EQ(tree.match_length(seq(0, 9)), 8);
  EXPECT_EQ(tree.num_nodes(), 1);  // match_length never splits

  auto m = tree.match_prefix(cat(seq(0, 8), seq(500, 4)));
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.pages, std::vector<PageId>(pages.begin(), pages.begin() + 2));
  EXPECT_EQ(tree.num_nodes(), 2);  // [p0 p1] -> [p2]
  EXPECT_EQ(tree.cached_pages(), 3);
  // The full sequence still matches through both halves.
  EXPECT_EQ(tree.match_prefix(a).pages, pages);

  // Insert a branch that diverges after one page: splits [p0 p1] into [p0] -> {[p1]->[p2], [new]}.
  auto b = cat(seq(0, 4), seq(700, 8));
  auto bpages = cache_tokens(pool, tree, b);
  EXPECT_EQ(tree.num_nodes(), 4);
  EXPECT_EQ(bpages[0], pages[0]);  // shared first page
  EXPECT_NE(bpages[1], pages[1]);
  EXPECT_EQ(tree.cached_pages(), 5);
  EXPECT_EQ(tree.match_prefix(b).pages, bpages);
  EXPECT_EQ(tree.match_prefix(a).pages, pages);
}

TEST(RadixTree, InsertOfCachedPrefixKeepsTreePages) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  auto a = seq(0, 8);
  auto tree_pages = cache_tokens(pool, tree, a);

  // A second request computed the same 8 tokens into its own pages plus 4 more.
  std::vector<PageId> own;
  ASSERT_TRUE(pool.alloc(3, own));
  auto ins = tree.insert(cat(a, seq(50, 4)), own);
  EXPECT_EQ(ins.num_existing_tokens, 8);
  ASSERT_EQ(ins.pages.size(), 3u);
  EXPECT_EQ(ins.pages[0], tree_pages[0]);
  EXPECT_EQ(ins.pages[1], tree_pages[1]);
  EXPECT_EQ(ins.pages[2], own[2]);
  EXPECT_EQ(pool.ref_count(own[0]), 1);  // duplicates were not taken by the tree
  EXPECT_EQ(pool.ref_count(own[2]), 2);  // the new page was
  EXPECT_EQ(tree.cached_pages(), 3);
  pool.unref(own);
  EXPECT_EQ(pool.num_free(), 16 - 3);
}

TEST(RadixTree, EvictionIsLruOverUnlockedLeaves) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  auto a = seq(0, 8);
  auto b = seq(1000, 8);
  auto c = seq(2000, 4);
  cache_tokens(pool, tree, a);
  cache_tokens(pool, tree, b);
  cache_tokens(pool, tree, c);
  EXPECT_EQ(tree.cached_pages(), 5);
  EXPECT_EQ(tree.evictable_pages(), 5);
  EXPECT_EQ(pool.num_free(), 11);
  tree.match_prefix(a);  // a is now the most recently used; b the least

  EXPECT_EQ(tree.evict(1), 2);  // whole leaves: b's node has 2 pages
  EXPECT_EQ(pool.num_free(), 13);
  EXPECT_EQ(tree.match_length(b), 0);
  EXPECT_EQ(tree.match_length(a), 8);
  EXPECT_EQ(tree.match_length(c), 4);
  EXPECT_EQ(tree.evict(1), 1);  // then c
  EXPECT_EQ(tree.match_length(c), 0);
  EXPECT_EQ(tree.match_length(a), 8);
  EXPECT_EQ(tree.cached_pages(), 2);
}

TEST(RadixTree, LockedPathIsNotEvicted) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  auto a = seq(0, 12);
  cache_tokens(pool, tree, a);
  auto b = cat(seq(0, 4), seq(300, 4));  // shares the first page with a
  cache_tokens(pool, tree, b);
  EXPECT_EQ(tree.cached_pages(), 4);

  // A request uses the first 8 tokens of a: that splits a's tail off and locks [p0] and [p1].
  auto m = tree.match_prefix(seq(0, 8));
  ASSERT_EQ(m.num_tokens, 8);
  for (PageId p : m.pages) pool.ref(p);  // the request's own references
  tree.lock(m.node);
  EXPECT_EQ(tree.evictable_pages(), 2);  // a's tail page and b's leaf page

  EXPECT_EQ(tree.evict(100), 2);
  EXPECT_EQ(tree.cached_pages(), 2);
  EXPECT_EQ(tree.evictable_pages(), 0);
  EXPECT_EQ(tree.match_length(a), 8);  // the locked prefix survived
  EXPECT_EQ(tree.evict(100), 0);

  tree.unlock(m.node);
  EXPECT_EQ(tree.evictable_pages(), 2);
  // Evicting drops the tree's references, but the request still holds its own: not freed yet.
  int32_t free_before = pool.num_free();
  EXPECT_EQ(tree.evict(100), 2);
  EXPECT_EQ(pool.num_free(), free_before);
  pool.unref(m.pages);
  EXPECT_EQ(pool.num_free(), 16);
  EXPECT_EQ(tree.num_nodes(), 0);
}

TEST(RadixTree, ChildIsEvictedBeforeItsParentAndLocksCount) {
  PagePool pool(16, kPs);
  RadixTree tree(&pool);
  cache_tokens(pool, tree, seq(0, 4));
  cache_tokens(pool, tree, seq(0, 8));  // child [p1] under [p0]
  EXPECT_EQ(tree.num_nodes(), 2);
  auto m = tree.match_prefix(seq(0, 8));
  tree.lock(m.node);
  tree.lock(m.node);  // two users
  tree.unlock(m.node);
  EXPECT_EQ(tree.evictable_pages(), 0);
  tree.unlock(m.node);
  EXPECT_EQ(tree.evictable_pages(), 2);
  // The parent was used more recently than the child, yet the child goes first: only leaves are evicted.
  tree.match_prefix(seq(0, 4));
  EXPECT_EQ(tree.evict(1), 1);
  EXPECT_EQ(tree.match_length(seq(0, 8)), 4);
  tree.clear();
  EXPECT_EQ(tree.cached_pages(), 0);
  EXPECT_EQ(pool.num_free(), 16);
}

TEST(RadixTree, PageSizeOneIsATokenRadixTree) {
  PagePool pool(32, 1);
  RadixTree tree(&pool);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.alloc(5, pages));
  tree.insert(std::vector<TokenId>{1, 2, 3, 4, 5}, pages);
  pool.unref(pages);
  auto m = tree.match_prefix(std::vector<TokenId>{1, 2, 3, 9});
  EXPECT_EQ(m.num_tokens, 3);
  EXPECT_EQ(m.pages, std::vector<PageId>(pages.begin(), pages.begin() + 3));
}

}  // namespace
}  // namespace ds
