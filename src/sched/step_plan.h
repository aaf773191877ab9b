// StepPlan: everything a model runner needs to execute one forward step, decided by the scheduler.
// The runner executes it and reports sampled tokens back; it never makes policy decisions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cache/page_pool.h"
#include "sched/request.h"

namespace ds {

// A token id the CPU does not know yet and the device fills in (see scheduler.h: overlap scheduling
// feeds the previous step's sampled token this way, MTP verify steps their device-made drafts).
constexpr TokenId kPlaceholderToken = -1;

// Flat arrays (structure of arrays) so the runner copies them to the device as they are: per-token
// input_ids / positions / slot_mapping, and a CSR page table (per-seq page_begin / num_pages into
// page_table; FlashMLA's padded block table [batch, max_pages] is one pass over it).
struct StepPlan {
  struct SeqStep {
    const Request* req = nullptr;  // rid and sampling params; valid until complete_step of this plan
    int32_t row = -1;              // Request::row
    int32_t token_begin = 0;       // offset of this seq's tokens in input_ids / positions / slot_mapping
    int32_t num_tokens = 0;        // prompt chunk length, or 1 for a decode (1 + num_draft with MTP)
    int32_t start_pos = 0;         // position of the first token = tokens already in the KV cache
    int32_t page_begin = 0;        // offset of this seq's page table in page_table
    int32_t num_pages = 0;         // pages covering positions [0, start_pos + num_tokens + max(draft_steps - 1, 0))
    int32_t num_draft = 0;         // trailing input tokens that are MTP drafts to verify (speculative decoding)
    // MTP draft tokens to make after this step for the next one (0: none). Draft step j >= 2 writes the MTP
    // layer's KV one position further than the last accepted token's, so the page table also covers the
    // draft_steps - 1 positions past kv_len() (their pages are the request's own; freed at complete_step).
    int32_t draft_steps = 0;
    bool is_decode = false;        // continues a generating request (false: prompt prefill chunk)
    bool needs_sample = false;     // logits + sampling for the last token; false for a non-final chunk

    int32_t kv_len() const { return start_pos + num_tokens; }  // attention length after this step
  };

  uint64_t step_id = 0;
  int32_t page_size = 0;
  std::vector<SeqStep> seqs;
  std::vector<TokenId> input_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens]
  std::vector<int32_t> slot_mapping;  // [num_tokens]: page * page_size + offset, where the token's KV row goes
  std::vector<PageId> page_table;     // concatenated per-seq page tables
  int32_t num_decode_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_sampled = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(input_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seqs.size()); }
  bool empty() const { return seqs.empty(); }
  // Every sequence continues a generating request (with speculative decoding: a verification step).
  bool all_decoding() const {
    return std::all_of(seqs.begin(), seqs.end(), [](const SeqStep& s) { return s.is_decode; });
  }
};

}  // namespace ds
