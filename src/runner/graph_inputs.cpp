// CUDA-graph input layout and the padded batch (graph_inputs.h).
#include "runner/graph_inputs.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace ds {

GraphInputLayout GraphInputLayout::make(int max_bs, int q, int steps, int64_t max_pages) {
  GraphInputLayout l;
  l.max_bs = max_bs;
  l.q = q;
  l.steps = steps;
  l.max_pages = max_pages;
  const int64_t rows = static_cast<int64_t>(max_bs) * q;
  l.pos_off = rows;
  l.slot_off = 2 * rows;
  l.len_off = 3 * rows;
  l.q_off = l.len_off + max_bs;
  l.real_off = l.q_off + max_bs + 1;
  int64_t end = l.real_off + 1;
  if (steps > 0) {
    const int64_t chain = static_cast<int64_t>(steps - 1) * max_bs;
    l.last_off = end;
    l.cpos_off = l.last_off + max_bs;
    l.cslot_off = l.cpos_off + chain;
    l.clen_off = l.cslot_off + chain;
    l.cq_off = l.clen_off + chain;
    end = l.cq_off + max_bs + 1;
  }
  l.table_off = (end + 63) / 64 * 64;
  l.size = l.table_off + static_cast<int64_t>(max_bs) * max_pages;
  return l;
}

void GraphInputLayout::init(int32_t* buf) const {
  std::fill(buf, buf + size, 0);
  for (int i = 0; i <= max_bs; ++i) {
    buf[q_off + i] = i * q;                  // q rows a sequence
    if (steps > 0) buf[cq_off + i] = i;     // one row a sequence in the chained draft steps
  }
}

int64_t GraphInputLayout::fill(int32_t* buf, const std::vector<DecodeSeq>& seqs, int bs, int page_size,
                               int32_t dummy_page) const {
  const int n = static_cast<int>(seqs.size());
  DS_CHECK(n <= bs && bs <= max_bs, "decode batch ", n, " padded to ", bs, " (max ", max_bs, ")");
  // The last position a sequence's rows reach: its q rows, and for draft runners its chained steps.
  auto reach = [&](int32_t position, int32_t valid) {
    return steps > 0 ? position + valid - 1 + steps - 1 : position + q - 1;
  };
  int64_t width = 1;
  for (const DecodeSeq& s : seqs) {
    DS_CHECK(s.num_pages >= 1 && s.num_pages <= max_pages && s.pages, "decode sequence with ", s.num_pages,
             " pages (graph table holds ", max_pages, ")");
    DS_CHECK(s.position >= 0 && static_cast<int64_t>(s.position) + q - 1 < static_cast<int64_t>(s.num_pages) * page_size,
             "position ", s.position, " (+", q - 1, ") beyond its ", s.num_pages, " pages");
    DS_CHECK(q == 1 || (s.tokens && s.slots), "a ", q, "-row graph step without its tokens and slots");
    DS_CHECK(steps == 0 || (s.valid >= 1 && s.valid <= q), "draft graph sequence with ", s.valid, " of ", q,
             " rows accepted");
    const int64_t pages = std::max<int64_t>(s.num_pages, reach(s.position, std::max(s.valid, 1)) / page_size + 1);
    DS_CHECK(pages <= max_pages, "graph sequence reaching position ", reach(s.position, s.valid), ": past the ",
             max_pages, "-page table");
    width = std::max(width, pages);
  }
  // The padding sequences' rows and chained steps, from position 0.
  width = std::max<int64_t>(width, std::max(q - 1, steps > 0 ? steps - 1 : 0) / page_size + 1);
  DS_CHECK(width <= max_pages, "graph rows reach ", width, " pages of ", max_pages);
  const int64_t M = max_bs;
  int32_t* ids = buf;
  int32_t* pos = buf + pos_off;
  int32_t* slot = buf + slot_off;
  int32_t* len = buf + len_off;
  int32_t* table = buf + table_off;  // [bs, max_pages], columns [0, width) written
  // Draft runners: sequence i's last accepted row (its `row`-th, at position `last`) and its chained steps at the
  // positions after it; a position past the sequence's pages (drafts it did not ask for) is on the dummy page.
  auto write_chain = [&](int i, int32_t row, int32_t last, const int32_t* pages, int32_t num_pages) {
    buf[last_off + i] = i * q + row;
    for (int j = 1; j < steps; ++j) {
      const int32_t p = last + j;
      const int32_t page = p / page_size;
      const int64_t k = static_cast<int64_t>(j - 1) * M + i;
      buf[cpos_off + k] = p;
      buf[cslot_off + k] = (page < num_pages ? pages[page] : dummy_page) * page_size + p % page_size;
      buf[clen_off + k] = p + 1;
    }
  };
  buf[real_off] = n * q;
  for (int i = 0; i < bs; ++i) {
    int32_t* row = table + i * max_pages;
    if (i < n) {
      const DecodeSeq& s = seqs[i];
      for (int j = 0; j < q; ++j) {
        ids[i * q + j] = q == 1 ? s.token : s.tokens[j];
        pos[i * q + j] = s.position + j;
        slot[i * q + j] = q == 1 ? s.slot : s.slots[j];
      }
      len[i] = s.position + q;
      std::memcpy(row, s.pages, sizeof(int32_t) * s.num_pages);
      std::fill(row + s.num_pages, row + width, dummy_page);
      if (steps > 0) write_chain(i, s.valid - 1, s.position + s.valid - 1, s.pages, s.num_pages);
    } else {  // padding: token 0 at positions 0 .. q - 1, all on the dummy page (as its only page), attending it
      for (int j = 0; j < q; ++j) {
        ids[i * q + j] = 0;
        pos[i * q + j] = j;
        slot[i * q + j] = dummy_page * page_size + j % page_size;
      }
      len[i] = q;
      std::fill(row, row + width, dummy_page);
      if (steps > 0) write_chain(i, 0, 0, nullptr, 0);
    }
  }
  return width;
}

}  // namespace ds
