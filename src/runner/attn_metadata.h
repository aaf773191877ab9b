// Builds AttnMetadata (ops/ops.h) on the host from per-sequence page tables, then uploads it to the
// backend: the "plan" half of plan-then-run.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace ds {

struct SeqSlice {
  int64_t start_pos = 0;              // first new position (= tokens already in the cache)
  int64_t num_new = 0;                // new tokens this step
  const std::vector<int32_t>* pages;  // page table covering [0, start_pos + num_new)
};

AttnMetadata build_attn_metadata(const std::vector<SeqSlice>& seqs, int page_size, Ops& ops);

// Copies host-built I32 metadata tensors to the backend (shared by every metadata builder).
void upload_attn_metadata(AttnMetadata& m, const Tensor& positions, const Tensor& slots, const Tensor& q_starts,
                          const Tensor& seq_lens, const Tensor& block_table, Ops& ops);

}  // namespace ds
