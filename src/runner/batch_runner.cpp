// Executes a StepPlan: forward over every new token of the batch, logits only where needed, sampling with
// penalties and min_new_tokens, and log-probabilities of sampled and (on request) prompt tokens.
#include "runner/batch_runner.h"

#include "runner/attn_metadata.h"
#include "runner/fault_inject.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

namespace ds {

AttnMetadata build_attn_metadata(const StepPlan& plan, Ops& ops) {
  AttnMetadata m;
  m.num_seqs = plan.num_seqs();
  m.num_tokens = plan.num_tokens();
  m.page_size = plan.page_size;
  int32_t max_pages = 1;
  for (const auto& s : plan.seqs) {
    max_pages = std::max(max_pages, s.num_pages);
    m.max_seq_len = std::max(m.max_seq_len, s.kv_len());
    m.max_q_len = std::max(m.max_q_len, s.num_tokens);
    m.total_context = (m.total_context < 0 ? 0 : m.total_context) + s.kv_len();
  }
  const int64_t T = m.num_tokens;
  Tensor positions = Tensor::empty({T}, DType::kI32), slots = Tensor::empty({T}, DType::kI32);
  std::copy(plan.positions.begin(), plan.positions.end(), positions.data_as<int32_t>());
  std::copy(plan.slot_mapping.begin(), plan.slot_mapping.end(), slots.data_as<int32_t>());
  Tensor q_starts = Tensor::empty({m.num_seqs + 1}, DType::kI32), seq_lens = Tensor::empty({m.num_seqs}, DType::kI32);
  Tensor table = Tensor::zeros({m.num_seqs, max_pages}, DType::kI32);
  for (int s = 0; s < m.num_seqs; ++s) {
    const auto& sq = plan.seqs[s];
    DS_CHECK(sq.token_begin == (s == 0 ? 0 : plan.seqs[s - 1].token_begin + plan.seqs[s - 1].num_tokens),
             "plan tokens are not contiguous per sequence");
    q_starts.data_as<int32_t>()[s] = sq.token_begin;
    seq_lens.data_as<int32_t>()[s] = sq.kv_len();
    std::copy(plan.page_table.begin() + sq.page_begin, plan.page_table.begin() + sq.page_begin + sq.num_pages,
              table.data_as<int32_t>() + static_cast<int64_t>(s) * max_pages);
  }
  q_starts.data_as<int32_t>()[m.num_seqs] = static_cast<int32_t>(T);
  upload_attn_metadata(m, positions, slots, q_starts, seq_lens, table, ops);
  return m;
}

BatchRunner::BatchRunner(DeepseekModel& model, Ops& ops, KvCache cache, int32_t max_rows)
    : model_(model), ops_(ops), cache_(std::move(cache)) {
  DS_CHECK(max_rows > 0, "BatchRunner with ", max_rows, " rows");
  ops_.bind_thread();  // each entry point binds the calling thread to the runner's device (multi-GPU ranks)
  Tensor zeros = Tensor::zeros({max_rows}, DType::kI32);
  token_store_ = ops_.upload(zeros);
  row_sampled_.assign(static_cast<size_t>(max_rows), 0);
}

TokenLogprob BatchRunner::logprob_at(const float* lp, int64_t vocab, int32_t id, int32_t top_k) const {
  TokenLogprob t;
  t.id = id;
  t.logprob = id >= 0 ? lp[id] : std::numeric_limits<float>::quiet_NaN();
  if (top_k > 0) {
    std::vector<int32_t> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    const int64_t k = std::min<int64_t>(top_k, vocab);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
    for (int64_t i = 0; i < k; ++i) t.top.emplace_back(lp[idx[i]], idx[i]);
  }
  return t;
}

namespace {

// The request's info when this step computes prompt positions whose logprobs it asked for, else null.
const RunnerRequestInfo* input_logprob_info(const StepPlan::SeqStep& sq,
                                            const std::unordered_map<std::string, RunnerRequestInfo>& info) {
  auto it = info.find(sq.req->rid);
  const bool want = it != info.end() && it->second.return_logprob && it->second.logprob_start_len >= 0 &&
                    sq.start_pos < sq.req->num_prompt;
  return want ? &it->second : nullptr;
}

}  // namespace

bool BatchRunner::launch_waits(const StepPlan& plan,
                               const std::unordered_map<std::string, RunnerRequestInfo>& info) const {
  if (plan.num_tokens() > ops_.max_async_tokens()) return true;
  for (const auto& sq : plan.seqs)  // prompt-row logprobs read the log-softmax on the host
    if (input_logprob_info(sq, info)) return true;
  return false;
}

LaunchedStep BatchRunner::launch(const StepPlan& plan, const std::unordered_map<std::string, RunnerRequestInfo>& info) {
  ops_.bind_thread();
  LaunchedStep step;
  std::vector<SeqOutput>& out = step.out;
  out.resize(plan.seqs.size());
  if (plan.empty()) return step;
  // Rows whose logits are needed: the last token of sampling sequences, and prompt rows for input logprobs.
  std::vector<int64_t> rows;
  std::vector<std::pair<size_t, int32_t>> row_owner;  // (seq index, position of the token whose row it is)
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const auto& sq = plan.seqs[s];
    const RunnerRequestInfo* want_input = input_logprob_info(sq, info);
    // Sampled rows: the last token's, and with drafts also the token before each draft (verification).
    const int32_t first_sampled = sq.num_tokens - 1 - sq.num_draft;
    for (int32_t j = 0; j < sq.num_tokens; ++j) {
      const int32_t pos = sq.start_pos + j;
      const bool input_row = want_input && pos + 1 < sq.req->num_prompt && pos + 1 >= want_input->logprob_start_len;
      if ((j >= first_sampled && sq.needs_sample) || input_row) {
        rows.push_back(sq.token_begin + j);
        row_owner.emplace_back(s, pos);
      }
    }
    if (want_input && sq.start_pos == 0 && want_input->logprob_start_len == 0)  // token 0 has no prediction
      out[s].input_logprobs.emplace_back(0, TokenLogprob{sq.req->tokens[0], std::numeric_limits<float>::quiet_NaN(), {}, {}});
  }
  // Overlap scheduling: a decode planned while the previous step was in flight feeds kPlaceholderToken for the
  // token that step sampled. It becomes -(row + 1) here and the token store's entry on the device
  // (Ops::resolve_tokens_), which that step's sampling wrote: the host never waits for it.
  std::vector<int32_t> input_ids(plan.input_ids.begin(), plan.input_ids.end());
  bool any_placeholder = false;
  for (const auto& sq : plan.seqs)
    for (int32_t j = 0; j < sq.num_tokens; ++j) {
      int32_t& id = input_ids[sq.token_begin + j];
      if (id == kPlaceholderToken) {
        DS_CHECK(sq.row >= 0 && sq.row < static_cast<int32_t>(row_sampled_.size()) && row_sampled_[sq.row] &&
                     j + 1 == sq.num_tokens,
                 "placeholder token of '", sq.req->rid, "' with no sampled token for row ", sq.row);
        id = -(sq.row + 1);
        any_placeholder = true;
      } else {
        DS_CHECK(id >= 0, "negative input token ", id);
      }
    }
  // return_hidden_states / return_routed_experts: every row of the sequences that asked (which of a verification's are
  // kept is known after sampling, in finish()).
  std::vector<int64_t> hidden_rows, routed_rows;
  for (size_t s = 0; reports_rows_ && s < plan.seqs.size(); ++s) {
    const auto& sq = plan.seqs[s];
    auto it = info.find(sq.req->rid);
    if (it == info.end()) continue;
    for (int32_t j = 0; j < sq.num_tokens; ++j) {
      const LaunchedStep::RowOwner owner{s, sq.start_pos + j, sq.start_pos + sq.num_tokens - sq.num_draft};
      if (it->second.return_hidden_states) {
        hidden_rows.push_back(sq.token_begin + j);
        step.hidden_owner.push_back(owner);
      }
      if (it->second.return_routed_experts && model_.routed_capture()) {
        routed_rows.push_back(sq.token_begin + j);
        step.routed_owner.push_back(owner);
      }
    }
  }
  Tensor dev_logits;  // [R, vocab] on the backend
  // A decode-only step (one sampled token per sequence, no prompt rows) replays a CUDA graph when one fits. With
  // speculative decoding the graphs are verify graphs of q rows a sequence (the token and its drafts, every row
  // sampled): a step whose every sequence feeds q - 1 drafts replays one.
  const int64_t q = graphs_ ? graphs_->tokens_per_seq() : 1;
  bool graph = graphs_ && speculative() == (q > 1) && graphs_->can_run(plan.num_seqs()) &&
               (hidden_rows.empty() || graphs_->keeps_hidden()) &&
               static_cast<int64_t>(rows.size()) == plan.num_seqs() * q &&
               (!any_placeholder || graphs_->resolves_placeholders());
  for (size_t s = 0; graph && s < plan.seqs.size(); ++s) {
    const auto& sq = plan.seqs[s];
    graph = sq.num_tokens == q && sq.is_decode && sq.token_begin == static_cast<int32_t>(s * q) &&
            rows[s * q] == sq.token_begin && rows[s * q + q - 1] == sq.token_begin + q - 1;
  }
  if (graph) {
    std::vector<DecodeSeq> seqs(plan.seqs.size());
    for (size_t s = 0; s < plan.seqs.size(); ++s) {
      const auto& sq = plan.seqs[s];
      seqs[s] = DecodeSeq{input_ids[sq.token_begin], plan.positions[sq.token_begin],
                          plan.slot_mapping[sq.token_begin], plan.page_table.data() + sq.page_begin, sq.num_pages};
      if (q > 1) {
        seqs[s].tokens = input_ids.data() + sq.token_begin;
        seqs[s].slots = plan.slot_mapping.data() + sq.token_begin;
      }
    }
    dev_logits = graphs_->replay(seqs).rows(0, plan.num_seqs() * q);
    graph_steps_.fetch_add(1, std::memory_order_relaxed);
    if (!hidden_rows.empty()) step.hidden_rows = ops_.select_rows(graphs_->hidden(), hidden_rows);
    if (!routed_rows.empty()) step.routed_rows = ops_.select_rows(model_.routed_ids(plan.num_seqs() * q), routed_rows);
    if (speculative()) {  // the graph's static hidden rows: read by finish()'s drafter before the next replay
      step.hidden = graphs_->hidden().rows(0, plan.num_seqs() * q);
      step.plan = std::make_shared<const StepPlan>(plan);
      step.graph_verify = true;
    }
  } else {
    AttnMetadata meta = build_attn_metadata(plan, ops_);
    Tensor ids = Tensor::empty({plan.num_tokens()}, DType::kI32);
    std::copy(input_ids.begin(), input_ids.end(), ids.data_as<int32_t>());
    Tensor dev_ids = ops_.upload(ids);  // [T] I32
    if (any_placeholder) ops_.resolve_tokens_(dev_ids, token_store_);
    // Verification steps (every sequence decoding, a few rows each) attend in the absorbed form over the latent
    // cache, as SGLang's target_verify does: the MHA form would expand every context latent through kv_b_proj.
    const bool verify = speculative() && plan.all_decoding();
    Tensor hidden = model_.forward(dev_ids, meta, cache_, verify ? AttnMode::kAbsorbed : AttnMode::kAuto);  // [T, d]
    if (speculative()) {  // finish() verifies and drafts (every step: the MTP layer's cache covers prompts too)
      step.hidden = hidden;
      step.plan = std::make_shared<const StepPlan>(plan);
    }
    if (!hidden_rows.empty()) step.hidden_rows = ops_.select_rows(hidden, hidden_rows);
    if (!routed_rows.empty()) step.routed_rows = ops_.select_rows(model_.routed_ids(plan.num_tokens()), routed_rows);
    if (rows.empty()) return step;
    dev_logits = model_.logits(ops_.select_rows(hidden, rows));
  }
  // Prompt rows (input logprobs, rare) read the whole log-softmax on the host; sampled rows go through
  // Ops::sample, so on CUDA only their ids and requested logprobs come back, never B x V logits.
  const int64_t vocab = dev_logits.dim(1);
  const bool any_prompt_row = std::any_of(row_owner.begin(), row_owner.end(), [&](const auto& o) {
    return o.second + 1 < plan.seqs[o.first].req->num_prompt;
  });
  // Their log-softmax 1,024 rows at a time (a whole 8,192-row chunk's would be another 4 GB of fp32 on the device at
  // V3's vocabulary beside the logits).
  constexpr int64_t kLogprobBlockRows = 1024;
  std::vector<Tensor> logprob_blocks;  // [ceil(rows / kLogprobBlockRows)] host [<= kLogprobBlockRows, vocab]
  if (any_prompt_row)
    for (int64_t r0 = 0; r0 < dev_logits.dim(0); r0 += kLogprobBlockRows)
      logprob_blocks.push_back(
          ops_.to_host(ops_.log_softmax(dev_logits.rows(r0, std::min(dev_logits.dim(0), r0 + kLogprobBlockRows)))));
  const auto& eos = model_.config().eos_token_ids;
  SampleBatch batch;
  batch.vocab = vocab;
  std::vector<size_t> batch_row;  // row_owner index of each batch row
  std::unordered_map<int32_t, SamplePenalty> pens;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto [s, pos] = row_owner[r];
    const auto& sq = plan.seqs[s];
    const Request& req = *sq.req;
    auto it = info.find(req.rid);
    const RunnerRequestInfo ri = it != info.end() ? it->second : RunnerRequestInfo{};
    if (pos + 1 < req.num_prompt) {  // a prompt row: the logprob of the next prompt token (never a sampling row)
      const int64_t rr = static_cast<int64_t>(r);
      const float* lp = logprob_blocks[rr / kLogprobBlockRows].f32() + (rr % kLogprobBlockRows) * vocab;
      TokenLogprob t = logprob_at(lp, vocab, req.tokens[pos + 1], ri.top_logprobs_num);
      for (int32_t id : ri.token_ids_logprob) t.ids.emplace_back(id >= 0 && id < vocab ? lp[id] : NAN, id);
      out[s].input_logprobs.emplace_back(pos + 1, std::move(t));
      continue;
    }
    // Verification rows: the drafts before this row count as output already (penalties, min_new_tokens).
    const int32_t before = pos - (sq.kv_len() - 1 - sq.num_draft);
    DS_CHECK(sq.needs_sample && before >= 0 && before <= sq.num_draft, "unexpected logits row");
    const auto drafts_before = std::span<const int32_t>(plan.input_ids).subspan(sq.token_begin + sq.num_tokens -
                                                                                  sq.num_draft, before);
    // NaN-logit isolation (RELIABILITY.md): a non-finite row fails this request only; the others go on.
    if (fault_injected(FaultKind::kNanLogits, req.rid)) {
      Tensor cell = dev_logits.row(static_cast<int64_t>(r)).reshape({vocab, 1}).rows(vocab / 2, vocab / 2 + 1);
      ops_.fill(cell, std::numeric_limits<float>::quiet_NaN());
    }
    const SamplingParams& sp = req.sampling;
    auto sit = samplers_.find(req.rid);
    if (sit == samplers_.end()) sit = samplers_.emplace(req.rid, Sampler(sp)).first;
    if (sq.num_draft > 0 && before == 0 && sp.temperature > 0.0f) step.rewind.emplace_back(s, sit->second);
    SampleRow row = sit->second.next_row(static_cast<int32_t>(r));
    row.want_logprob = ri.return_logprob;
    row.top_logprobs = ri.return_logprob ? ri.top_logprobs_num : 0;
    row.ids_begin = row.ids_end = static_cast<int32_t>(batch.logprob_ids.size());
    if (ri.return_logprob)
      for (int32_t id : ri.token_ids_logprob)
        if (id >= 0 && id < vocab) {  // (the engine refused others; the logits' padding columns are not ids)
          batch.logprob_ids.push_back(id);
          row.ids_end = static_cast<int32_t>(batch.logprob_ids.size());
        }
    // Penalties over the output so far (frequency/presence), prompt + output (repetition), and stop tokens
    // masked until min_new_tokens: one entry per touched id.
    pens.clear();
    auto entry = [&](TokenId t) -> SamplePenalty* {
      if (t < 0 || t >= vocab) return nullptr;
      SamplePenalty& e = pens[t];
      e.id = t;
      return &e;
    };
    if (sp.frequency_penalty != 0.0f || sp.presence_penalty != 0.0f) {
      for (TokenId t : req.output())
        if (SamplePenalty* e = entry(t)) ++e->output_count;
      for (TokenId t : drafts_before)
        if (SamplePenalty* e = entry(t)) ++e->output_count;
    }
    if (sp.repetition_penalty != 1.0f) {
      for (TokenId t : req.tokens)
        if (SamplePenalty* e = entry(t)) e->seen = 1;
      for (TokenId t : drafts_before)
        if (SamplePenalty* e = entry(t)) e->seen = 1;
    }
    for (const auto& [t, bias] : sp.logit_bias)
      if (SamplePenalty* e = entry(t)) e->bias += bias;
    // Outputs before the token sampled now: the appended ones plus those of steps in flight (overlap), less this,
    // plus the drafts before a verification row.
    if (req.num_output() + std::max(req.pending - 1, 0) + before < sp.min_new_tokens) {
      for (TokenId t : sp.stop_token_ids)
        if (SamplePenalty* e = entry(t)) e->banned = 1;
      if (!sp.ignore_eos)
        for (int64_t t : eos)
          if (SamplePenalty* e = entry(static_cast<TokenId>(t))) e->banned = 1;
    }
    row.penalty_begin = static_cast<int32_t>(batch.penalties.size());
    if (ri.grammar) constrain(*ri.grammar, req, drafts_before, vocab, pens, batch.penalties);  // (bans appended)
    for (const auto& [t, e] : pens) batch.penalties.push_back(e);
    row.penalty_end = static_cast<int32_t>(batch.penalties.size());
    batch.rows.push_back(row);
    batch_row.push_back(r);
  }
  if (batch.rows.empty()) return step;
  for (size_t b = 0; b < batch_row.size(); ++b) {
    const auto [s, pos] = row_owner[batch_row[b]];
    step.sampled.emplace_back(s, pos);
    step.want_logprob.push_back(batch.rows[b].want_logprob ? 1 : 0);
    step.id_ranges.emplace_back(batch.rows[b].ids_begin, batch.rows[b].ids_end);
    const int32_t row = plan.seqs[s].row;
    // (A plan from a test without rows: nothing can refer to its token. Drafts: no overlap, no placeholders.)
    if (row < 0 || plan.seqs[s].num_draft > 0) continue;
    DS_CHECK(row < static_cast<int32_t>(row_sampled_.size()), "request row ", row, " outside the runner's ",
             row_sampled_.size());
    batch.rows[b].store_index = row;
    row_sampled_[row] = 1;
  }
  step.logprob_ids = batch.logprob_ids;
  step.sample = ops_.sample_async(dev_logits, batch, token_store_);
  return step;
}

void BatchRunner::constrain(const TokenFsm& g, const Request& req, std::span<const int32_t> drafts_before,
                            int64_t vocab, std::unordered_map<int32_t, SamplePenalty>& pens,
                            std::vector<SamplePenalty>& out) {
  DS_CHECK(req.pending <= 1, "constrained request '", req.rid, "' with ", req.pending - 1, " earlier tokens in flight");
  auto [it, fresh] = grammar_state_.try_emplace(req.rid);
  GrammarState& gs = it->second;
  if (fresh) gs.state = g.start();
  const auto output = req.output();
  if (gs.read > output.size()) gs = GrammarState{g.start(), 0};  // (outputs only grow; defensive)
  for (; gs.read < output.size(); ++gs.read) gs.state = g.advance(gs.state, output[gs.read]);
  // A verification row: the state after the drafts before it too (not kept: they may be rejected). After a draft the
  // grammar does not allow, the state is dead and the row forced to the end of sequence: its sample is never used,
  // since that draft's own row, constrained, cannot have sampled it.
  int state = gs.state;
  for (int32_t t : drafts_before) state = g.advance(state, t);
  const auto& eos = model_.config().eos_token_ids;
  auto is_eos = [&](int32_t id) { return std::find(eos.begin(), eos.end(), id) != eos.end(); };
  const bool done = g.complete(state);
  const std::vector<uint64_t>* bits = done ? nullptr : &g.allowed(state);
  const int64_t words = bits ? std::min<int64_t>(static_cast<int64_t>(bits->size()), (vocab + 63) / 64) : 0;
  // Whether any token but an EOS id is allowed (EOS ids spell nothing, so the grammar's bits never hold them).
  bool other = false;
  for (int64_t w = 0; w < words && !other; ++w) {
    uint64_t m = (*bits)[static_cast<size_t>(w)];
    if (w * 64 + 64 > vocab) m &= (uint64_t{1} << (vocab - w * 64)) - 1;
    for (; m && !other; m &= m - 1) other = !is_eos(static_cast<int32_t>(w * 64 + __builtin_ctzll(m)));
  }
  // The end of sequence: at a whole match, or when nothing else can be spelled. Then it also overrides
  // min_new_tokens' ban of the EOS ids (otherwise no token could be sampled at all).
  const bool end_ok = done || g.accepting(state) || !other;
  auto ban = [&](int32_t id) {
    if (end_ok && is_eos(id)) return;
    if (auto p = pens.find(id); p != pens.end()) {
      p->second.banned = 1;
    } else {
      SamplePenalty b;
      b.id = id;
      b.banned = 1;
      out.push_back(b);
    }
  };
  for (int64_t w = 0; w * 64 < vocab; ++w) {  // the clear bits of each word: the banned ids
    uint64_t z = ~(w < words ? (*bits)[static_cast<size_t>(w)] : uint64_t{0});
    if (w * 64 + 64 > vocab) z &= (uint64_t{1} << (vocab - w * 64)) - 1;
    for (; z; z &= z - 1) ban(static_cast<int32_t>(w * 64 + __builtin_ctzll(z)));
  }
  if (!other)
    for (int64_t e : eos)
      if (auto p = pens.find(static_cast<int32_t>(e)); p != pens.end()) p->second.banned = 0;
}

void BatchRunner::idle_step() {
  ops_.bind_thread();
  AttnMetadata none;
  none.num_tokens = 0;
  (void)model_.forward(ops_.upload(Tensor::empty({0}, DType::kI32)), none, cache_);
  if (drafter_) drafter_->idle();  // the drafter's MTP forwards, as a stepping rank's finish() makes them
}

void BatchRunner::enable_speculative(int num_steps, const NgramOptions* ngram) {
  if (ngram) {
    ngram_ = std::make_unique<NgramDrafter>(*ngram);
    return;
  }
  DS_CHECK(model_.num_mtp_layers() >= 1, "speculative decoding without an MTP layer");
  DS_CHECK(static_cast<int>(cache_.latent.size()) > model_.config().num_hidden_layers,
           "speculative decoding without the MTP layer's cache");
  drafter_ = std::make_unique<MtpDrafter>(model_, ops_, cache_, model_.dp_attention() ? num_steps : 0);
}

std::vector<SeqOutput> BatchRunner::finish(LaunchedStep step) {
  ops_.bind_thread();
  std::vector<SeqOutput> out = std::move(step.out);
  SampleResult res;
  if (step.sample) res = step.sample->wait();
  // A sequence's rows come in position order. Each row but its last is followed by a draft, accepted while it
  // equals the row's sample; the first sample that differs (or the last row's) is the token.
  std::vector<uint8_t> decided(out.size(), 0);
  for (size_t b = 0; b < step.sampled.size(); ++b) {
    const auto [s, pos] = step.sampled[b];
    if (decided[s]) continue;
    if (res.bad_id[b] >= 0) {
      out[s].token = 0;  // placeholder for the scheduler; the engine drops it and finishes the request
      out[s].accepted_drafts.clear();
      out[s].accepted_logprobs.clear();
      out[s].error = "non-finite logits (" + std::to_string(res.bad_value[b]) + " at token id " +
                     std::to_string(res.bad_id[b]) + ") at position " + std::to_string(pos);
      decided[s] = 1;
      continue;
    }
    TokenLogprob lp;
    if (step.want_logprob[b]) {
      lp = TokenLogprob{res.tokens[b], res.logprobs[b], std::move(res.top[b]), {}};
      for (int32_t e = step.id_ranges[b].first; e < step.id_ranges[b].second; ++e)
        lp.ids.emplace_back(res.id_logprobs[e], step.logprob_ids[e]);
    }
    if (b + 1 < step.sampled.size() && step.sampled[b + 1].first == s) {
      DS_CHECK(step.plan, "several sampled rows of one sequence without a speculative plan");
      const StepPlan::SeqStep& sq = step.plan->seqs[s];
      const int32_t draft = step.plan->input_ids[sq.token_begin + (pos - sq.start_pos) + 1];
      // Drafts past max_new_tokens are fed (a fixed count keeps verify graphs usable) but never accepted: the
      // sample of the row where the request's last token falls is that token.
      const int32_t room = sq.req->sampling.max_new_tokens - sq.req->num_output() - 1;
      if (res.tokens[b] == draft && static_cast<int32_t>(out[s].accepted_drafts.size()) < room) {
        out[s].accepted_drafts.push_back(draft);
        if (step.want_logprob[b]) out[s].accepted_logprobs.push_back(std::move(lp));
        continue;
      }
    }
    out[s].token = res.tokens[b];
    if (step.want_logprob[b]) out[s].logprob = std::move(lp);
    decided[s] = 1;
  }
  // The rows whose tokens are final: not those of rejected drafts.
  const auto final_row = [&](const LaunchedStep::RowOwner& o) {
    return o.pos < o.draft_from + static_cast<int32_t>(out[o.seq].accepted_drafts.size()) && out[o.seq].error.empty();
  };
  // Each final row of a gathered host tensor [rows, n] (data: its elements) into its sequence's output list.
  const auto take = [&](const Tensor& host, const auto* data, const std::vector<LaunchedStep::RowOwner>& owners,
                        auto SeqOutput::*list) {
    const int64_t n = host.dim(1);
    for (size_t r = 0; r < owners.size(); ++r) {
      if (!final_row(owners[r])) continue;
      const auto* row = data + static_cast<int64_t>(r) * n;
      (out[owners[r].seq].*list).emplace_back(owners[r].pos, std::vector(row, row + n));
    }
  };
  if (step.hidden_rows.defined()) {
    const Tensor host = to_f32(ops_.to_host(step.hidden_rows));  // [rows, d]
    take(host, host.f32(), step.hidden_owner, &SeqOutput::hidden_rows);
  }
  if (step.routed_rows.defined()) {
    const Tensor host = ops_.to_host(step.routed_rows);  // [rows, layers * top_k] I32
    take(host, host.data_as<int32_t>(), step.routed_owner, &SeqOutput::routed_rows);
  }
  if (!step.plan) return out;
  const StepPlan& plan = *step.plan;
  // Seeded sampling: each token consumed one uniform, as without drafts; the rows past it give theirs back.
  for (auto& [s, saved] : step.rewind) {
    if (!out[s].error.empty()) continue;
    auto it = samplers_.find(plan.seqs[s].req->rid);
    DS_CHECK(it != samplers_.end(), "no sampler for a verified sequence");
    it->second = saved;
    it->second.skip(static_cast<int32_t>(out[s].accepted_drafts.size()) + 1);
  }
  std::vector<DraftSeq> d(plan.seqs.size());
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const StepPlan::SeqStep& sq = plan.seqs[s];
    if (!out[s].error.empty()) continue;
    if (!sq.needs_sample) {  // a prompt chunk: its tokens are final, the next prompt token follows
      d[s] = DraftSeq{sq.num_tokens, sq.req->tokens[sq.start_pos + sq.num_tokens], 0};
    } else {
      const int32_t valid = sq.num_tokens - sq.num_draft + static_cast<int32_t>(out[s].accepted_drafts.size());
      d[s] = DraftSeq{valid, out[s].token, sq.draft_steps};
    }
  }
  if (ngram_) {  // drafts from the request's own tokens: its history so far, the accepted drafts, the token
    for (size_t s = 0; s < plan.seqs.size(); ++s) {
      const StepPlan::SeqStep& sq = plan.seqs[s];
      if (!out[s].error.empty() || !sq.needs_sample || d[s].draft_steps < 1) continue;
      const std::vector<TokenId>& known = sq.req->tokens;
      DS_CHECK(static_cast<int32_t>(known.size()) == sq.start_pos + sq.num_tokens - sq.num_draft,
               "n-gram drafts: '", sq.req->rid, "' has ", known.size(), " tokens for a step ending at ",
               sq.start_pos + sq.num_tokens - sq.num_draft);
      std::vector<int32_t> tail(out[s].accepted_drafts.begin(), out[s].accepted_drafts.end());
      tail.push_back(out[s].token);
      out[s].next_drafts = ngram_->draft(sq.req->rid, known, tail, d[s].draft_steps);
    }
    return out;
  }
  if (step.graph_verify && draft_graphs_ && graph_drafts(plan, d, out)) return out;
  std::vector<std::vector<int32_t>> drafts = drafter_->run(plan, step.hidden, d);
  for (size_t s = 0; s < plan.seqs.size(); ++s) out[s].next_drafts = std::move(drafts[s]);
  return out;
}

bool BatchRunner::graph_drafts(const StepPlan& plan, const std::vector<DraftSeq>& d, std::vector<SeqOutput>& out) {
  const int q = draft_graphs_->tokens_per_seq();
  for (size_t s = 0; s < plan.seqs.size(); ++s)
    if (d[s].valid < 1 || d[s].draft_steps < 1 || plan.seqs[s].num_tokens != q) return false;
  // Row j embeds the token after it: the accepted draft that follows, then the token sampled after the last
  // accepted row; the rows past that run on anything (their outputs are not read).
  std::vector<int32_t> next(plan.seqs.size() * q, 0);
  std::vector<DecodeSeq> seqs(plan.seqs.size());
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const StepPlan::SeqStep& sq = plan.seqs[s];
    int32_t* nx = next.data() + s * q;
    for (int32_t j = 0; j + 1 < d[s].valid; ++j) nx[j] = plan.input_ids[sq.token_begin + j + 1];
    nx[d[s].valid - 1] = d[s].next_token;
    DecodeSeq& g = seqs[s];
    g.position = sq.start_pos;
    g.pages = plan.page_table.data() + sq.page_begin;
    g.num_pages = sq.num_pages;
    g.tokens = nx;
    g.slots = plan.slot_mapping.data() + sq.token_begin;
    g.valid = d[s].valid;
  }
  std::vector<std::vector<int32_t>> drafts = draft_graphs_->replay_drafts(seqs);
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    drafts[s].resize(std::min<size_t>(drafts[s].size(), static_cast<size_t>(d[s].draft_steps)));
    out[s].next_drafts = std::move(drafts[s]);
  }
  return true;
}

}  // namespace ds
