// The MHA-form prefill over a long context, one context chunk at a time: which gathered context rows each chunk
// takes and how its attention is told apart (lengths, position shifts), merged afterwards by log-sum-exp
// (Ops::merge_attention_parts_). Host-side planning only; DeepseekModel uploads and runs the chunks.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ds {

// One chunk: per sequence a run of consecutive context positions [shift[s], shift[s] + seq_lens[s]) (possibly
// empty). Its attention is mla_attention_mha over those rows with seq_lens as the context lengths and every query's
// position minus its sequence's shift: a query at position p then attends chunk key j (position shift + j) exactly
// when shift + j <= p, the causal rule of the whole context.
struct MhaChunk {
  std::vector<int32_t> rows;      // [sum(seq_lens)] rows of the gathered context (Ops::gather_context's order)
  std::vector<int32_t> seq_lens;  // [num_seqs]
  std::vector<int32_t> shift;     // [num_seqs]
  int64_t num_rows() const { return static_cast<int64_t>(rows.size()); }
};

// The chunks of one step, from host copies of its metadata (seq_lens [num_seqs], q_starts [num_seqs + 1], positions
// [T]): first every sequence's positions from its first query's onwards (each of its queries attends at least that
// one key, so no query of a chunk is left with an empty but unwritten row), then the earlier positions of all
// sequences in order, cut into chunks of at most max_rows rows (every query attends all of them). Empty when the
// whole context fits max_rows (one pass, no chunks). The first chunk holds sum over sequences of
// (seq_len - first query position) rows whatever max_rows is: the step's new tokens, which the caller's budget
// covers anyway.
std::vector<MhaChunk> plan_mha_chunks(std::span<const int32_t> seq_lens, std::span<const int32_t> q_starts,
                                      std::span<const int32_t> positions, int64_t max_rows);

}  // namespace ds
