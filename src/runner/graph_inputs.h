// The host side of CUDA-graph inputs (cuda_graph_runner.h): where each input lives in the graphs' one I32 buffer,
// and the padded batch written into a host copy of it. No CUDA here, so the layout is tested on the CPU.
#pragma once
#include <cstdint>
#include <vector>

#include "runner/cuda_graph_runner.h"

namespace ds {

// Offsets (in I32 elements) of the inputs: ids | positions | slots ([max_bs * q] each) | seq lens [max_bs] |
// q_starts [max_bs + 1] | real rows [1] (the batch's rows before its padding) | draft runners: last accepted rows [max_bs], chained positions / slots / seq lens
// ([steps - 1, max_bs] each), chained q_starts [max_bs + 1] | block table [max_bs, max_pages] (64-aligned).
struct GraphInputLayout {
  int max_bs = 0, q = 1, steps = 0;
  int64_t max_pages = 0;
  int64_t pos_off = 0, slot_off = 0, len_off = 0, q_off = 0, real_off = 0;
  int64_t last_off = 0, cpos_off = 0, cslot_off = 0, clen_off = 0, cq_off = 0;
  int64_t table_off = 0, size = 0;

  static GraphInputLayout make(int max_bs, int q, int steps, int64_t max_pages);
  // The constant parts (q_starts of both kinds) into a fresh buffer of `size` zeros.
  void init(int32_t* buf) const;
  // Sequences `seqs` padded to `bs` (each padding sequence on the dummy page only) into buf (ids past the first
  // `skip` elements are the graph's own: not written when keep_ids). Returns the table columns written per row: the
  // widest sequence's pages, and for draft runners the pages its chained positions reach (past a sequence's own
  // pages the row holds the dummy page, where those positions also write).
  int64_t fill(int32_t* buf, const std::vector<DecodeSeq>& seqs, int bs, int page_size, int32_t dummy_page) const;
};

}  // namespace ds
