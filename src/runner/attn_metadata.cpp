// Host-side construction of attention metadata (positions, slot mapping, page tables).
#include "runner/attn_metadata.h"

#include <algorithm>

namespace ds {

AttnMetadata build_attn_metadata(const std::vector<SeqSlice>& seqs, int page_size, Ops& ops) {
  AttnMetadata m;
  m.num_seqs = static_cast<int>(seqs.size());
  m.page_size = page_size;
  int64_t total = 0;
  size_t max_pages = 1;
  for (const SeqSlice& s : seqs) {
    total += s.num_new;
    const int64_t len = s.start_pos + s.num_new;
    DS_CHECK(static_cast<int64_t>(s.pages->size()) * page_size >= len, "page table too short for ", len, " tokens");
    max_pages = std::max(max_pages, s.pages->size());
    m.max_seq_len = std::max<int>(m.max_seq_len, static_cast<int>(len));
    m.max_q_len = std::max<int>(m.max_q_len, static_cast<int>(s.num_new));
    m.total_context = (m.total_context < 0 ? 0 : m.total_context) + len;
  }
  m.num_tokens = static_cast<int>(total);
  Tensor positions = Tensor::empty({total}, DType::kI32);
  Tensor slots = Tensor::empty({total}, DType::kI32);
  Tensor q_starts = Tensor::empty({m.num_seqs + 1}, DType::kI32);
  Tensor seq_lens = Tensor::empty({m.num_seqs}, DType::kI32);
  Tensor table = Tensor::zeros({m.num_seqs, static_cast<int64_t>(max_pages)}, DType::kI32);
  int32_t* pos = positions.data_as<int32_t>();
  int32_t* slot = slots.data_as<int32_t>();
  int64_t t = 0;
  for (int s = 0; s < m.num_seqs; ++s) {
    const SeqSlice& sq = seqs[s];
    q_starts.data_as<int32_t>()[s] = static_cast<int32_t>(t);
    seq_lens.data_as<int32_t>()[s] = static_cast<int32_t>(sq.start_pos + sq.num_new);
    std::copy(sq.pages->begin(), sq.pages->end(), table.data_as<int32_t>() + s * max_pages);
    for (int64_t i = 0; i < sq.num_new; ++i, ++t) {
      const int64_t p = sq.start_pos + i;
      pos[t] = static_cast<int32_t>(p);
      slot[t] = (*sq.pages)[p / page_size] * page_size + static_cast<int32_t>(p % page_size);
    }
  }
  q_starts.data_as<int32_t>()[m.num_seqs] = static_cast<int32_t>(t);
  upload_attn_metadata(m, positions, slots, q_starts, seq_lens, table, ops);
  return m;
}

void upload_attn_metadata(AttnMetadata& m, const Tensor& positions, const Tensor& slots, const Tensor& q_starts,
                          const Tensor& seq_lens, const Tensor& block_table, Ops& ops) {
  // One host buffer, one copy (each array starting 256-byte aligned), then views: a step's metadata costs one
  // transfer instead of five.
  const Tensor* parts[] = {&positions, &slots, &q_starts, &seq_lens, &block_table};
  int64_t offsets[5], total = 0;
  for (int i = 0; i < 5; ++i) {
    DS_CHECK(parts[i]->dtype() == DType::kI32 && parts[i]->device() == Device::kCpu, "attention metadata ",
             parts[i]->describe());
    offsets[i] = total;
    total += (parts[i]->numel() + 63) / 64 * 64;
  }
  Tensor host = Tensor::empty({std::max<int64_t>(total, 1)}, DType::kI32);
  for (int i = 0; i < 5; ++i)
    std::copy(parts[i]->data_as<int32_t>(), parts[i]->data_as<int32_t>() + parts[i]->numel(),
              host.data_as<int32_t>() + offsets[i]);
  Tensor dev = ops.upload(host);
  auto view = [&](int i) { return dev.rows(offsets[i], offsets[i] + parts[i]->numel()).reshape(parts[i]->shape()); };
  m.positions = view(0);
  m.slot_mapping = view(1);
  m.q_starts = view(2);
  m.seq_lens = view(3);
  m.block_table = view(4);
  m.host_positions = positions;
  m.host_q_starts = q_starts;
  m.host_seq_lens = seq_lens;
}

}  // namespace ds
