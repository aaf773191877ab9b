// MTP drafting: one MTP forward over every sequence's newly valid positions (slot t pairs the target hidden
// h_t with token t + 1, at position t), then draft_steps - 1 more one-token forwards per drafting sequence,
// each on the previous step's shared_head.norm output and draft, one position further.
#include "runner/mtp_drafter.h"

#include <algorithm>

#include "runner/attn_metadata.h"

namespace ds {

Tensor MtpDrafter::upload_ids(const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), t.data_as<int32_t>());
  return ops_.upload(t);  // [n] I32
}

void MtpDrafter::idle_forwards(int done) {
  AttnMetadata none;
  none.num_tokens = 0;
  for (int k = done; k < lockstep_steps_; ++k) (void)model_.mtp_forward(0, upload_ids({}), Tensor(), none, cache_);
}

std::vector<std::vector<int32_t>> MtpDrafter::run(const StepPlan& plan, const Tensor& hidden,
                                                  const std::vector<DraftSeq>& seqs) {
  DS_CHECK(seqs.size() == plan.seqs.size(), "drafter: ", seqs.size(), " entries for ", plan.seqs.size(), " sequences");
  DS_CHECK(model_.num_mtp_layers() >= 1, "drafting without an MTP layer");
  DS_CHECK(hidden.dim(0) == plan.num_tokens(), "drafter: hidden has ", hidden.dim(0), " rows for ", plan.num_tokens(),
           " tokens");
  std::vector<std::vector<int32_t>> drafts(plan.seqs.size());
  std::vector<std::vector<int32_t>> pages(plan.seqs.size());  // sized up front: slices point into it
  std::vector<SeqSlice> slices;
  std::vector<int64_t> rows;     // hidden rows of the valid positions
  std::vector<int32_t> next;     // the token after each of them
  std::vector<size_t> live;      // drafting sequences
  std::vector<int64_t> last;     // their last valid position's row in the MTP output
  std::vector<int32_t> last_pos;  // and that position
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const StepPlan::SeqStep& sq = plan.seqs[s];
    const DraftSeq& d = seqs[s];
    if (d.valid <= 0) continue;
    DS_CHECK(d.valid <= sq.num_tokens && d.next_token >= 0 && d.draft_steps <= sq.draft_steps,
             "drafter: sequence ", s, " valid ", d.valid, " of ", sq.num_tokens, ", next token ", d.next_token,
             ", draft steps ", d.draft_steps, " of ", sq.draft_steps);
    DS_CHECK(lockstep_steps_ == 0 || d.draft_steps <= lockstep_steps_, "drafter: ", d.draft_steps,
             " draft steps past the lockstep's ", lockstep_steps_);
    pages[s].assign(plan.page_table.begin() + sq.page_begin, plan.page_table.begin() + sq.page_begin + sq.num_pages);
    slices.push_back(SeqSlice{sq.start_pos, d.valid, &pages[s]});
    for (int32_t j = 0; j < d.valid; ++j) {
      rows.push_back(sq.token_begin + j);
      const int32_t t = j + 1 < d.valid ? plan.input_ids[sq.token_begin + j + 1] : d.next_token;
      DS_CHECK(t >= 0, "drafter: unresolved input token of sequence ", s);
      next.push_back(t);
    }
    if (d.draft_steps > 0) {
      live.push_back(s);
      last.push_back(static_cast<int64_t>(rows.size()) - 1);
      last_pos.push_back(sq.start_pos + d.valid - 1);
    }
  }
  if (slices.empty()) {
    idle_forwards(0);
    return drafts;
  }
  // Fill the MTP cache at every valid position; the drafting sequences' last row gives their first draft.
  AttnMetadata meta = build_attn_metadata(slices, plan.page_size, ops_);
  // After a verification step (every sequence decoding) each has at most steps + 1 rows: the absorbed form, as
  // for the verification itself (batch_runner.cpp); after prompt chunks the MHA form.
  Tensor z = model_.mtp_forward(0, upload_ids(next), ops_.select_rows(hidden, rows), meta, cache_,
                                plan.all_decoding() ? AttnMode::kAbsorbed : AttnMode::kAuto);  // [rows, d]
  if (live.empty()) {
    idle_forwards(1);
    return drafts;
  }
  Tensor zn = model_.mtp_norm(0, ops_.select_rows(z, last));  // [live, d]
  for (int32_t step = 1;; ++step) {
    Tensor logits = model_.mtp_head(0, zn);  // [live, vocab]
    SampleBatch batch;
    batch.vocab = model_.config().vocab_size;
    for (size_t b = 0; b < live.size(); ++b) {
      SampleRow r;
      r.logits_row = static_cast<int32_t>(b);  // temperature 0: greedy
      batch.rows.push_back(r);
    }
    SampleResult res = ops_.sample(logits, batch);
    std::vector<size_t> keep_seq;
    std::vector<int64_t> keep_row;
    std::vector<int32_t> keep_pos, ids;
    slices.clear();
    for (size_t b = 0; b < live.size(); ++b) {
      const size_t s = live[b];
      if (res.bad_id[b] >= 0) continue;  // non-finite draft logits: this sequence drafts no further
      drafts[s].push_back(res.tokens[b]);
      if (static_cast<int32_t>(drafts[s].size()) >= seqs[s].draft_steps) continue;
      keep_seq.push_back(s);
      keep_row.push_back(static_cast<int64_t>(b));
      keep_pos.push_back(last_pos[b]);
      ids.push_back(res.tokens[b]);
      slices.push_back(SeqSlice{last_pos[b] + step, 1, &pages[s]});
    }
    if (keep_seq.empty()) {
      idle_forwards(step);  // forwards so far: the first and step - 1 chained ones
      break;
    }
    // The next draft: the MTP layer at one position further, on its own normed output and the draft just made.
    AttnMetadata m = build_attn_metadata(slices, plan.page_size, ops_);
    Tensor h = ops_.select_rows(zn, keep_row);                        // [keep, d]
    zn = model_.mtp_norm(0, model_.mtp_forward(0, upload_ids(ids), h, m, cache_));  // [keep, d]
    live = std::move(keep_seq);
    last_pos = std::move(keep_pos);
  }
  return drafts;
}

}  // namespace ds
