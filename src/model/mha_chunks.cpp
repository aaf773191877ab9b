// Context chunks of the MHA-form prefill (see mha_chunks.h).
#include "model/mha_chunks.h"

#include <algorithm>

#include "core/status.h"

namespace ds {

std::vector<MhaChunk> plan_mha_chunks(std::span<const int32_t> seq_lens, std::span<const int32_t> q_starts,
                                      std::span<const int32_t> positions, int64_t max_rows) {
  const size_t n = seq_lens.size();
  DS_CHECK(q_starts.size() == n + 1 && max_rows > 0, "plan_mha_chunks: ", n, " sequences, ", q_starts.size(),
           " q_starts, max_rows ", max_rows);
  int64_t total = 0;
  for (int32_t len : seq_lens) total += len;
  if (total <= max_rows) return {};

  // Where each sequence's rows start in the gathered context, and its first query's position (the split point).
  std::vector<int64_t> base(n);
  std::vector<int32_t> split(n);
  int64_t b = 0;
  for (size_t s = 0; s < n; ++s) {
    base[s] = b;
    b += seq_lens[s];
    int32_t first = seq_lens[s];
    for (int32_t t = q_starts[s]; t < q_starts[s + 1]; ++t) first = std::min(first, positions[t]);
    DS_CHECK(first >= 0 && q_starts[s + 1] > q_starts[s], "plan_mha_chunks: sequence ", s, " has no query");
    split[s] = first;
  }
  const auto empty_chunk = [&] {
    MhaChunk c;
    c.seq_lens.assign(n, 0);
    c.shift.assign(n, 0);
    return c;
  };

  std::vector<MhaChunk> chunks;
  MhaChunk own = empty_chunk();
  for (size_t s = 0; s < n; ++s) {
    own.shift[s] = split[s];
    own.seq_lens[s] = seq_lens[s] - split[s];
    for (int32_t p = split[s]; p < seq_lens[s]; ++p) own.rows.push_back(static_cast<int32_t>(base[s] + p));
  }
  chunks.push_back(std::move(own));

  // The earlier positions, sequence after sequence, max_rows at a time.
  MhaChunk cur = empty_chunk();
  for (size_t s = 0; s < n; ++s) {
    int32_t p = 0;
    while (p < split[s]) {
      if (cur.num_rows() == max_rows) {
        chunks.push_back(std::move(cur));
        cur = empty_chunk();
      }
      const int32_t take = static_cast<int32_t>(std::min<int64_t>(split[s] - p, max_rows - cur.num_rows()));
      cur.shift[s] = p;
      cur.seq_lens[s] = take;
      for (int32_t i = 0; i < take; ++i) cur.rows.push_back(static_cast<int32_t>(base[s] + p + i));
      p += take;
    }
  }
  if (cur.num_rows() > 0) chunks.push_back(std::move(cur));
  return chunks;
}

}  // namespace ds
