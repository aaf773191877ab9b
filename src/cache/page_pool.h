// PagePool: the free list and per-page reference counts of the paged latent KV cache. It deals only in
// page ids; the tensors behind them (all layers' latent rows + indexer keys) belong to the model runner.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ds {

using TokenId = int32_t;  // int32 so token arrays go to the device without conversion
using PageId = int32_t;

// Pages are ids in [0, num_pages). A page is free when its reference count is 0. Holders are requests
// (one reference per page-table entry) and the radix tree (one per cached page), so a prefix page shared
// by the tree and three requests has count 4 and returns to the free list only when all have let go.
// The runner should allocate one extra physical page at id num_pages() (padding_page()) as a scratch
// target for padded batch entries (CUDA graphs), so padding never writes into a live page.
class PagePool {
 public:
  PagePool(int32_t num_pages, int32_t page_size);

  // n fresh pages with count 1 each, appended to `out`; all-or-nothing: false (and `out` untouched)
  // when fewer than n are free.
  bool alloc(int32_t n, std::vector<PageId>& out);
  void ref(PageId page);           // one more holder of an allocated page
  bool unref(PageId page);         // one holder fewer; true when this freed the page
  void unref(std::span<const PageId> pages);

  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_pages() const { return static_cast<int32_t>(refs_.size()); }
  int32_t num_used() const { return num_pages() - num_free(); }
  int32_t page_size() const { return page_size_; }
  int32_t ref_count(PageId page) const;
  PageId padding_page() const { return num_pages(); }

 private:
  int32_t page_size_;
  std::vector<int32_t> refs_;
  std::vector<PageId> free_;  // a stack: the most recently freed page is reused first (warm in L2)
};

// Pages needed to hold `tokens` tokens (rounded up).
inline int32_t pages_for(int64_t tokens, int32_t page_size) {
  return static_cast<int32_t>((tokens + page_size - 1) / page_size);
}

}  // namespace ds
