// PagePool: free list + reference counts over page ids (see page_pool.h).
#include "cache/page_pool.h"

#include "core/check.h"

namespace ds {

PagePool::PagePool(int32_t num_pages, int32_t page_size) : page_size_(page_size), refs_(num_pages, 0) {
  DS_CHECK(num_pages > 0 && page_size > 0, "num_pages ", num_pages, " page_size ", page_size);
  free_.reserve(num_pages);
  // Pushed in reverse so that a fresh pool hands out 0, 1, 2, ... (deterministic, easy to read in logs).
  for (PageId p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

bool PagePool::alloc(int32_t n, std::vector<PageId>& out) {
  DS_CHECK(n >= 0);
  if (n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    PageId p = free_.back();
    free_.pop_back();
    DS_CHECK(refs_[p] == 0, "page ", p, " on the free list with count ", refs_[p]);
    refs_[p] = 1;
    out.push_back(p);
  }
  return true;
}

void PagePool::ref(PageId page) {
  DS_CHECK(page >= 0 && page < num_pages(), "page id ", page);
  DS_CHECK(refs_[page] > 0, "ref of free page ", page);
  ++refs_[page];
}

bool PagePool::unref(PageId page) {
  DS_CHECK(page >= 0 && page < num_pages(), "page id ", page);
  DS_CHECK(refs_[page] > 0, "unref of free page ", page);
  if (--refs_[page] > 0) return false;
  free_.push_back(page);
  return true;
}

void PagePool::unref(std::span<const PageId> pages) {
  for (PageId p : pages) unref(p);
}

int32_t PagePool::ref_count(PageId page) const {
  DS_CHECK(page >= 0 && page < num_pages(), "page id ", page);
  return refs_[page];
}

}  // namespace ds
