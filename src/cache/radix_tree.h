// RadixTree: the page-aligned prefix cache. Maps token-id prefixes (whole pages only) to KV page ids so a
// new request can reuse the KV of any earlier request that shared its prefix. LRU eviction over unlocked
// leaves hands pages back to the PagePool.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/page_pool.h"

namespace ds {

struct RadixNode;  // opaque outside radix_tree.cpp; handles stay valid while the node is locked

// Every node holds a non-empty run of whole pages: key = tokens (a multiple of page_size), pages = the
// KV pages of those tokens. Children are keyed by their first page's tokens, so two children never share
// a first page and a lookup compares at most one page per level before walking down a node.
//
// Ownership: the tree holds one PagePool reference per cached page. A request that uses a cached prefix
// takes its own references on those pages (its page table) AND locks the node at the end of the prefix;
// the lock keeps the path out of eviction, so that evicting always frees memory and never drops an entry
// somebody is still reading. evictable_pages() counts pages on unlocked nodes: all of them can be freed
// by repeated leaf eviction (locking a node locks all its ancestors).
//
// Not thread-safe: one tree per scheduler (per attention-DP rank), used from the scheduler's thread.
class RadixTree {
 public:
  explicit RadixTree(PagePool* pool);
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  struct Match {
    std::vector<PageId> pages;  // KV pages of tokens[0, num_tokens)
    int32_t num_tokens = 0;     // a multiple of page_size
    RadixNode* node = nullptr;  // the node ending exactly at num_tokens (root when nothing matched)
  };
  // Longest cached whole-page prefix of `tokens`. Splits a node when the match ends inside it, so the
  // returned node ends exactly at the match and can be locked; marks the path as recently used.
  Match match_prefix(std::span<const TokenId> tokens);
  // Same length as match_prefix would return, without splitting or touching LRU (used for sorting).
  int32_t match_length(std::span<const TokenId> tokens) const;

  struct Insertion {
    int32_t num_existing_tokens = 0;  // prefix that was already cached (its pages were NOT taken)
    std::vector<PageId> pages;        // the tree's pages for the whole inserted key: the caller should
                                      // switch to these where they differ from its own (dedup)
    RadixNode* node = nullptr;        // the node ending at the end of the inserted key
  };
  // Caches tokens[0, pages.size() * page_size) -> pages; tokens beyond the last whole page are ignored.
  // Pages of the newly cached part gain one reference (the tree's); an already-cached part keeps the
  // tree's existing pages.
  Insertion insert(std::span<const TokenId> tokens, std::span<const PageId> pages);

  // Reference counts on node and all its ancestors; a locked node is never evicted. nullptr/root: no-op.
  void lock(RadixNode* node);
  void unlock(RadixNode* node);

  // Evicts least-recently-used unlocked leaves (a parent becomes a candidate once its children are gone)
  // until at least num_pages pages were dropped or nothing is evictable. Returns pages dropped; each
  // drops the tree's reference, which frees it in the pool when no request holds it.
  int32_t evict(int32_t num_pages);
  // Drops everything; every node must be unlocked (flush_cache with no request running).
  void clear();

  RadixNode* root() { return root_.get(); }
  int32_t page_size() const { return page_size_; }
  int32_t cached_pages() const { return cached_pages_; }
  int32_t evictable_pages() const { return evictable_pages_; }
  int32_t num_nodes() const { return num_nodes_; }  // excluding the root

 private:
  RadixNode* split(RadixNode* node, int32_t keep_pages);
  RadixNode* add_leaf(RadixNode* parent, std::span<const TokenId> key, std::span<const PageId> pages);
  void touch(RadixNode* node);

  PagePool* pool_;
  int32_t page_size_;
  std::unique_ptr<RadixNode> root_;
  uint64_t clock_ = 0;  // logical LRU clock: deterministic, unlike wall time
  int32_t cached_pages_ = 0;
  int32_t evictable_pages_ = 0;
  int32_t num_nodes_ = 0;
};

}  // namespace ds
