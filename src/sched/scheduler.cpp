// Scheduler policy: admission, chunked prefill, mixed decode, retraction under memory pressure, and the
// radix-cache bookkeeping around a request's life (see scheduler.h for the overview).
#include "sched/scheduler.h"

#include <algorithm>
#include <climits>

#include "core/check.h"

namespace ds {

namespace {
// lpm sorts the queue by radix match length, O(prompt) per waiting request per step; past this queue
// length it costs more than it saves and fcfs is used instead (SGLang uses the same cut-off, 128).
constexpr size_t kLpmMaxQueue = 128;

bool contains(const std::vector<TokenId>& v, TokenId t) { return std::find(v.begin(), v.end(), t) != v.end(); }

// The tokens whose KV may come from the radix cache: never the last one (its logits give the next token),
// and not past the request's reuse limit.
std::span<const TokenId> reusable_prefix(const Request& r) {
  const int32_t n = std::min(r.num_tokens() - 1, r.max_prefix_reuse);
  return std::span<const TokenId>(r.tokens).first(static_cast<size_t>(std::max(n, 0)));
}
}  // namespace

Result<SchedulePolicy> parse_schedule_policy(std::string_view name) {
  if (name == "fcfs") return SchedulePolicy::kFcfs;
  if (name == "lpm") return SchedulePolicy::kLpm;
  return error("--schedule-policy: unknown policy '", name, "' (expected fcfs or lpm)");
}

Status SchedulerConfig::validate() const {
  if (page_size < 1) return error("--page-size must be >= 1, got ", page_size);
  if (num_pages < 1)
    return error("the KV cache has no pages: --max-total-tokens must be at least one page (", page_size, " tokens)");
  if (chunked_prefill_size != -1 && chunked_prefill_size < 1)
    return error("--chunked-prefill-size must be -1 (off) or >= 1, got ", chunked_prefill_size);
  if (max_prefill_tokens < 1) return error("--max-prefill-tokens must be >= 1, got ", max_prefill_tokens);
  if (max_running_requests < 1) return error("--max-running-requests must be >= 1, got ", max_running_requests);
  if (context_length < 0) return error("--context-length must be >= 0, got ", context_length);
  if (speculative_num_steps < 0 || speculative_num_steps > kMaxSpeculativeSteps)
    return error("--speculative-num-steps must be in [0, ", kMaxSpeculativeSteps, "], got ", speculative_num_steps);
  return Status::ok();
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(SchedulerConfig config) {
  DS_RETURN_IF_ERROR(config.validate());
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(config)));
}

Scheduler::Scheduler(SchedulerConfig config)
    : cfg_(std::move(config)), pool_(std::make_unique<PagePool>(cfg_.num_pages, cfg_.page_size)) {
  if (!cfg_.disable_radix_cache) tree_ = std::make_unique<RadixTree>(pool_.get());
  for (int32_t row = cfg_.max_running_requests - 1; row >= 0; --row) free_rows_.push_back(row);
}

// ---------------------------------------------------------------------------------------------------
// Requests in and out

Status Scheduler::add_request(std::string rid, std::vector<TokenId> prompt, SamplingParams sampling,
                              int32_t max_prefix_reuse) {
  if (rid.empty()) return error("request id is empty");
  if (requests_.count(rid)) return error("duplicate request id '", rid, "'");
  if (prompt.empty()) return error("request '", rid, "': the prompt is empty");
  for (TokenId t : prompt)
    if (t < 0) return error("request '", rid, "': negative token id ", t, " in the prompt");
  if (sampling.max_new_tokens < 1)
    return error("request '", rid, "': max_new_tokens must be >= 1, got ", sampling.max_new_tokens);
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  if (cfg_.context_length > 0) {
    if (prompt_len >= cfg_.context_length)
      return error("request '", rid, "': the prompt has ", prompt_len, " tokens, the context length is ",
                   cfg_.context_length);
    // As SGLang: a too-long generation is clipped to the context, not refused.
    sampling.max_new_tokens =
        static_cast<int32_t>(std::min<int64_t>(sampling.max_new_tokens, cfg_.context_length - prompt_len));
  }
  const int64_t capacity = static_cast<int64_t>(cfg_.num_pages) * cfg_.page_size;
  if (prompt_len + sampling.max_new_tokens > capacity)
    return error("request '", rid, "' needs ", prompt_len + sampling.max_new_tokens, " tokens of KV cache (prompt ",
                 prompt_len, " + max_new_tokens ", sampling.max_new_tokens, ") but the cache holds only ", capacity,
                 " (--max-total-tokens)");

  auto req = std::make_unique<Request>();
  req->rid = rid;
  req->tokens = std::move(prompt);
  req->num_prompt = static_cast<int32_t>(prompt_len);
  req->sampling = std::move(sampling);
  req->arrival = next_arrival_++;
  req->max_prefix_reuse = std::max<int32_t>(max_prefix_reuse, 0);
  waiting_.push_back(req.get());  // arrivals are increasing: the queue stays in arrival order
  requests_.emplace(std::move(rid), std::move(req));
  return Status::ok();
}

Status Scheduler::abort(const std::string& rid, std::string message) {
  auto it = requests_.find(rid);
  if (it == requests_.end()) return error("abort: unknown or finished request id '", rid, "'");
  Request* r = it->second.get();
  if (r->finish) return error("abort: request '", rid, "' already finished");  // draining its last step
  FinishReason reason{FinishReason::Kind::kAbort, -1, std::move(message)};
  if (r->in_flight) {  // the device is writing its pages: finish it when the step completes
    r->abort_requested = true;
    r->abort_message = std::move(reason.matched_text);
    return Status::ok();
  }
  finish(r, std::move(reason), {});
  return Status::ok();
}

const Request* Scheduler::find(const std::string& rid) const {
  auto it = requests_.find(rid);
  return it == requests_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------------------------------------------
// Planning a step

StepPlan Scheduler::next_step() {
  DS_CHECK(static_cast<int>(flights_.size()) < kMaxStepsInFlight, "next_step() with ", flights_.size(),
           " steps in flight");
  DS_CHECK(cfg_.speculative_num_steps == 0 || flights_.empty(), "speculative decoding plans one step at a time");
  StepPlan plan;
  plan.step_id = ++step_id_;
  plan.page_size = cfg_.page_size;
  flights_.push_back(Flight{plan.step_id, {}});  // even an empty plan is completed: DP ranks idle in lockstep
  ++counters_.num_steps;
  const bool chunking = cfg_.chunked_prefill_size > 0;
  bool retracted = false;

  // Speculative decoding keeps prompt chunks out of verify steps (as SGLang turns mixed chunking off with it): a
  // step is the prompts' when any can run (prefill first, SGLang's order), else the decodes'. Verify steps then have
  // one shape (every sequence its token and drafts), that of their CUDA graphs.
  if (cfg_.speculative_num_steps > 0) {
    plan_prompts(plan, chunking ? cfg_.chunked_prefill_size : cfg_.max_prefill_tokens, retracted);
    if (plan.seqs.empty()) plan_decodes(plan, retracted);
    return plan;
  }
  plan_decodes(plan, retracted);
  // The token budget bounds the whole step (decode tokens count), so a step's latency is bounded by the chunk size.
  // Decodes are never cut; if they alone exceed it no prompt token joins. Without chunking it bounds the step's
  // prompt tokens (max_prefill_tokens): the activations of a step are planned for that many, so a longer prompt
  // still goes in pieces.
  plan_prompts(plan, chunking ? cfg_.chunked_prefill_size - plan.num_decode_seqs : cfg_.max_prefill_tokens, retracted);
  return plan;
}

// Decode every generating request, oldest first. Decodes go before prompts (without speculative decoding) because a
// decode step is what users wait on between tokens; when pages run out the newest requests are retracted.
void Scheduler::plan_decodes(StepPlan& plan, bool& retracted) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* r = running_[i];
    if (!r->is_decoding()) continue;
    // Overlap: the token in flight is its last one (max_new_tokens): nothing more to decode.
    if (r->num_output() + r->pending >= r->sampling.max_new_tokens) continue;
    // Speculative decoding: the drafts to verify, all of them (past max_new_tokens too: the runner accepts none
    // beyond it, and a step whose every sequence feeds the same number replays a verify graph), within the context,
    // and only where they fit without retracting anyone.
    int32_t k = std::min<int32_t>(static_cast<int32_t>(r->drafts.size()), draft_room(r->kv_len));
    if (k > 0 && free_slots(*r) < 1 + k) k = 0;
    if (reserve_tokens(r, 1 + k, 1, &retracted) == 0) {
      // Overlap: a request whose step is in flight keeps its pages; it decodes again once memory frees up.
      if (r->in_flight || running_.back() != r) continue;
      retract(r);  // it is the newest running request (all newer were retracted) and no page is left
      retracted = true;
      break;
    }
    add_to_plan(r, 1 + k, /*is_decode=*/true, plan, k);
  }
}

// Prompt tokens, at most `budget`: chunks of running prompts, then admissions.
void Scheduler::plan_prompts(StepPlan& plan, int32_t budget, bool& retracted) {
  // Continue prompts that were cut into chunks, oldest first. A chunk shrinks to the pages there are; newer
  // requests are retracted only when not a single token fits.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Request* r = running_[i];
    // A prompt's next chunk (its tokens are known even while the previous chunk is in flight).
    if (r->pending > 0 || r->is_decoding() || r->uncomputed() <= 0) continue;
    int32_t n = reserve_tokens(r, std::min(r->uncomputed(), budget), 1, &retracted);
    if (n == 0) continue;  // waits for pages (what is newer is already in this plan)
    add_to_plan(r, n, /*is_decode=*/false, plan);
    budget -= n;
  }

  // Admit waiting requests, but not in a step that had to retract: memory is short, and admitting now would only
  // retract again (or re-admit what was just retracted).
  if (!retracted) {
    for (Request* r : admission_order()) {
      if (r->arrival >= hold_from_) continue;  // added after a hold (a weight update): waits for its release
      // (A finished request draining its last step in flight still holds its row.)
      if (static_cast<int32_t>(running_.size()) >= cfg_.max_running_requests || free_rows_.empty()) break;
      if (budget <= 0) break;
      int32_t fed = 0;
      // Head-of-line: if the next request does not fit, later ones wait too (keeps the order fair).
      if (!admit(r, budget, plan, &fed)) break;
      budget -= fed;
    }
    std::erase_if(waiting_, [](const Request* r) { return r->status == RequestStatus::kRunning; });
  }
}

std::vector<Request*> Scheduler::admission_order() {
  std::vector<Request*> order = waiting_;  // arrival order: fcfs
  if (cfg_.policy == SchedulePolicy::kLpm && tree_ && order.size() <= kLpmMaxQueue) {
    // Longest cached prefix first: those requests reuse the most KV, and admitting them while their
    // prefix is cached keeps it from being evicted by others. Ties keep arrival order.
    std::vector<std::pair<int32_t, Request*>> keyed;
    keyed.reserve(order.size());
    for (Request* r : order)
      keyed.emplace_back(tree_->match_length(reusable_prefix(*r)), r);
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < order.size(); ++i) order[i] = keyed[i].second;
  }
  return order;
}

bool Scheduler::admit(Request* r, int32_t budget, StepPlan& plan, int32_t* fed) {
  const bool chunking = cfg_.chunked_prefill_size > 0;
  // Reuse the longest cached prefix, but always feed at least the last token: its logits give the
  // next token. Lock the prefix first so that making room below cannot evict it.
  RadixTree::Match m;
  if (tree_) {
    m = tree_->match_prefix(reusable_prefix(*r));
    tree_->lock(m.node);
  }
  const int32_t extend = r->num_tokens() - m.num_tokens;
  int32_t n = extend;
  if (chunking) {
    n = std::min(extend, budget);
  } else if (extend > budget) {
    // Without chunking a prompt goes whole when it fits the step's prompt tokens; a bigger one waits for a step
    // with no other prompt, whose budget is all of max_prefill_tokens, and goes in pieces of it.
    n = plan.num_prefill_tokens > 0 ? 0 : budget;
  }
  // Memory: the whole rest of the prompt must fit now, even when only a chunk runs this step (chunking
  // bounds compute, not memory; admitting half a prompt would only be retracted again), plus one spare
  // page per running request so that admitting does not force a retraction at the next decode step.
  const int32_t spare = static_cast<int32_t>(running_.size());
  const int32_t prompt_pages = pages_for(r->num_tokens(), cfg_.page_size) - static_cast<int32_t>(m.pages.size());
  if (prompt_pages + spare > available_pages()) n = 0;
  if (n == 0) {
    if (tree_) tree_->unlock(m.node);
    return false;
  }

  r->page_table = std::move(m.pages);
  for (PageId p : r->page_table) pool_->ref(p);
  r->prefix_node = m.node;
  r->tree_tokens = m.num_tokens;
  r->kv_len = m.num_tokens;
  r->kv_done = m.num_tokens;
  if (r->num_retractions == 0) {  // a re-admission's "hit" is its own earlier work, not a cache hit
    r->cached_tokens = m.num_tokens;
    counters_.prompt_tokens_admitted += r->num_prompt;
    counters_.cached_tokens_total += m.num_tokens;
  }
  bool ok = alloc_pages(pages_for(r->kv_len + n, cfg_.page_size) - static_cast<int32_t>(r->page_table.size()),
                        r->page_table);
  DS_CHECK(ok, "admission: ", n, " tokens checked to fit but pages could not be allocated");
  DS_CHECK(!free_rows_.empty());
  r->row = free_rows_.back();
  free_rows_.pop_back();
  r->status = RequestStatus::kRunning;
  running_.push_back(r);
  add_to_plan(r, n, /*is_decode=*/false, plan);
  *fed = n;
  return true;
}

// Makes room for up to `want` more tokens of r (at least min_ok), retracting newer requests from the
// back of running_ while even min_ok does not fit. Requests already in this step's plan are never
// retracted (their pages are in the plan). Returns the tokens reserved, 0 when min_ok still does not
// fit and nothing newer can be retracted.
int32_t Scheduler::reserve_tokens(Request* r, int32_t want, int32_t min_ok, bool* retracted) {
  for (;;) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(want, free_slots(*r)));
    if (n >= min_ok) {
      bool ok = alloc_pages(pages_for(r->kv_len + n, cfg_.page_size) - static_cast<int32_t>(r->page_table.size()),
                            r->page_table);
      DS_CHECK(ok, "reserve: ", n, " tokens checked to fit but pages could not be allocated");
      return n;
    }
    if (running_.back() == r || running_.back()->in_flight) return 0;
    retract(running_.back());
    *retracted = true;
  }
}

int64_t Scheduler::free_slots(const Request& r) const {
  const int64_t tail_slots = static_cast<int64_t>(r.page_table.size()) * cfg_.page_size - r.kv_len;
  return tail_slots + static_cast<int64_t>(available_pages()) * cfg_.page_size;
}

int32_t Scheduler::available_pages() const {
  // Unlocked radix pages count as free: evicting them frees them (only locked paths are shared with
  // running requests).
  return pool_->num_free() + (tree_ ? tree_->evictable_pages() : 0);
}

bool Scheduler::alloc_pages(int32_t n, std::vector<PageId>& out) {
  if (n <= 0) return true;
  if (pool_->num_free() < n && tree_) tree_->evict(n - pool_->num_free());
  return pool_->alloc(n, out);
}

int32_t Scheduler::draft_room(int32_t pos) const {
  // Drafts after a token at `pos` take positions pos + 1, ..: all below the context length.
  return cfg_.context_length > 0 ? std::max(cfg_.context_length - 1 - pos, 0) : INT32_MAX;
}

void Scheduler::add_to_plan(Request* r, int32_t n, bool is_decode, StepPlan& plan, int32_t num_draft) {
  const int32_t ps = cfg_.page_size;
  DS_CHECK(n >= 1 && num_draft >= 0 && num_draft <= static_cast<int32_t>(r->drafts.size()) &&
               r->kv_len + n <= r->num_tokens() + r->pending + num_draft,
           "plan of ", n, " tokens at ", r->kv_len, " of ", r->num_tokens(), " + ", r->pending, " in flight + ",
           num_draft, " drafts");
  DS_CHECK(static_cast<int32_t>(r->page_table.size()) == pages_for(r->kv_len + n, ps), "page table of '", r->rid,
           "' does not cover the step");
  const bool needs_sample = r->kv_len + n == r->num_tokens() + r->pending + num_draft;
  // Speculative decoding: drafts for the next step (whose token goes at kv_len + n), as many as configured within
  // the context (not bounded by max_new_tokens: see the decode planning), where the pages their draft steps write
  // fit. None once this step's token is the request's last.
  int32_t draft_steps = 0;
  if (cfg_.speculative_num_steps > 0 && needs_sample &&
      r->num_output() + r->pending + 1 < r->sampling.max_new_tokens) {
    draft_steps = std::min(cfg_.speculative_num_steps, draft_room(r->kv_len + n));
    const int32_t need = pages_for(r->kv_len + n + std::max(draft_steps - 1, 0), ps) - pages_for(r->kv_len + n, ps);
    if (draft_steps <= 0 || (need > 0 && (available_pages() < need || !alloc_pages(need, r->page_table))))
      draft_steps = 0;
  }
  StepPlan::SeqStep s;
  s.req = r;
  s.row = r->row;
  s.token_begin = plan.num_tokens();
  s.num_tokens = n;
  s.start_pos = r->kv_len;
  s.page_begin = static_cast<int32_t>(plan.page_table.size());
  s.num_pages = static_cast<int32_t>(r->page_table.size());
  s.is_decode = is_decode;
  s.needs_sample = needs_sample;
  s.num_draft = num_draft;
  s.draft_steps = draft_steps;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = r->kv_len + i;
    // Past the known tokens: a draft to verify, or the one the step in flight samples (overlap), resolved on the
    // device.
    const int32_t past = pos - r->num_tokens();
    plan.input_ids.push_back(past < 0 ? r->tokens[pos] : num_draft > 0 ? r->drafts[past] : kPlaceholderToken);
    plan.positions.push_back(pos);
    plan.slot_mapping.push_back(r->page_table[pos / ps] * ps + pos % ps);
  }
  plan.page_table.insert(plan.page_table.end(), r->page_table.begin(), r->page_table.end());
  plan.num_decode_seqs += is_decode ? 1 : 0;
  plan.num_prefill_tokens += is_decode ? 0 : n;
  plan.num_sampled += s.needs_sample ? 1 : 0;
  plan.seqs.push_back(s);
  flights_.back().reqs.push_back(r);
  r->kv_len += n;  // at plan time: the next plan (overlap scheduling) must see these slots as taken
  ++r->in_flight;
  if (s.needs_sample) ++r->pending;
}

// ---------------------------------------------------------------------------------------------------
// Completing a step

std::vector<RequestEvent> Scheduler::complete_step(const StepPlan& plan, std::span<const SeqResult> results) {
  DS_CHECK(!flights_.empty() && plan.step_id == flights_.front().step_id, "complete_step for step ", plan.step_id,
           ", oldest in flight: ", flights_.empty() ? 0 : flights_.front().step_id);
  const Flight f = std::move(flights_.front());
  flights_.pop_front();
  DS_CHECK(results.size() == plan.seqs.size() && f.reqs.size() == plan.seqs.size(), "complete_step: ",
           results.size(), " results for ", plan.seqs.size(), " seqs");
  for (size_t i = 0; i < f.reqs.size(); ++i) {
    Request* r = f.reqs[i];
    const StepPlan::SeqStep& s = plan.seqs[i];
    --r->in_flight;
    if (s.num_draft > 0 || s.draft_steps > 1) roll_back_drafts(r, s, results[i]);
    r->kv_done = std::max(r->kv_done, std::min(s.kv_len(), r->kv_len));
    if (s.needs_sample) --r->pending;
    if (r->finish) {  // finished by an earlier step (overlap): this step's token is discarded
      if (!r->in_flight) drop(r);
      continue;
    }
    if (r->abort_requested) {
      finish(r, FinishReason{FinishReason::Kind::kAbort, -1, r->abort_message}, {});
      continue;
    }
    if (!s.needs_sample) {  // a prompt chunk: cache what is computed so others can share it at once
      cache_prefix(r);
      continue;
    }
    // The accepted drafts, then the sampled token, each checked for the end of the request.
    std::vector<TokenId> added;
    std::optional<FinishReason> reason;
    for (size_t j = 0; j <= results[i].accepted_drafts.size() && !reason; ++j) {
      const TokenId t = j < results[i].accepted_drafts.size() ? results[i].accepted_drafts[j] : results[i].token;
      DS_CHECK(t >= 0, "runner returned token ", t, " for '", r->rid, "'");
      r->tokens.push_back(t);
      added.push_back(t);
      reason = check_finish(*r, j == results[i].accepted_drafts.size() ? results[i].finish : std::nullopt);
    }
    if (reason) {
      finish(r, std::move(*reason), std::move(added));
      continue;
    }
    r->drafts = results[i].next_drafts;
    DS_CHECK(static_cast<int32_t>(r->drafts.size()) <= s.draft_steps, "runner made ", r->drafts.size(),
             " drafts for '", r->rid, "', the plan asked for ", s.draft_steps);
    if (!s.is_decode) cache_prefix(r);  // the prompt just completed
    RequestEvent ev;
    ev.rid = r->rid;
    ev.new_tokens = std::move(added);
    ev.prompt_tokens = r->num_prompt;
    ev.completion_tokens = r->num_output();
    ev.cached_tokens = r->cached_tokens;
    events_.push_back(std::move(ev));
  }
  return take_events();
}

// Speculative decoding: the KV of rejected drafts and the pages past the accepted tokens (those of the draft
// steps' positions too) go; the drafts are spent. Nothing else is in flight for r (steps do not overlap).
void Scheduler::roll_back_drafts(Request* r, const StepPlan::SeqStep& s, const SeqResult& res) {
  DS_CHECK(r->in_flight == 0, "speculative step of '", r->rid, "' completed with another step in flight");
  const int32_t accepted = static_cast<int32_t>(res.accepted_drafts.size());
  DS_CHECK(accepted <= s.num_draft, "runner accepted ", accepted, " of ", s.num_draft, " drafts for '", r->rid, "'");
  for (int32_t j = 0; j < accepted; ++j)
    DS_CHECK(res.accepted_drafts[j] == r->drafts[j], "accepted draft ", j, " of '", r->rid, "' is not the one fed");
  r->kv_len = s.kv_len() - s.num_draft + accepted;
  const int32_t keep = pages_for(r->kv_len, cfg_.page_size);
  for (size_t p = keep; p < r->page_table.size(); ++p) pool_->unref(r->page_table[p]);
  r->page_table.resize(std::min<size_t>(keep, r->page_table.size()));
  r->drafts.clear();
}

std::optional<FinishReason> Scheduler::check_finish(const Request& r, const std::optional<FinishReason>& caller) const {
  const SamplingParams& sp = r.sampling;
  const TokenId t = r.tokens.back();
  if (r.num_output() >= sp.max_new_tokens) return FinishReason{FinishReason::Kind::kLength, -1, ""};
  if (r.num_output() > sp.min_new_tokens &&
      (contains(sp.stop_token_ids, t) || (!sp.ignore_eos && contains(cfg_.eos_token_ids, t))))
    return FinishReason{FinishReason::Kind::kStop, t, ""};
  return caller;
}

std::vector<RequestEvent> Scheduler::take_events() {
  std::vector<RequestEvent> out;
  out.swap(events_);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// KV bookkeeping

// Inserts r's whole computed pages into the radix tree and moves r's lock to the end of them. Where the
// tree already had pages for the same tokens (another request computed them concurrently), r switches
// to the tree's and its duplicates go back to the pool.
void Scheduler::cache_prefix(Request* r) {
  if (!tree_) return;
  const int32_t full = std::min(r->kv_done, r->num_tokens()) / cfg_.page_size;  // KV of completed steps only
  if (full * cfg_.page_size <= r->tree_tokens) return;
  auto ins = tree_->insert(std::span<const TokenId>(r->tokens).first(full * cfg_.page_size),
                           std::span<const PageId>(r->page_table).first(full));
  for (int32_t i = 0; i < full; ++i) {
    if (ins.pages[i] == r->page_table[i]) continue;
    pool_->ref(ins.pages[i]);
    pool_->unref(r->page_table[i]);
    r->page_table[i] = ins.pages[i];
  }
  tree_->lock(ins.node);  // lock the new path before unlocking the old so shared ancestors stay locked
  tree_->unlock(r->prefix_node);
  r->prefix_node = ins.node;
  r->tree_tokens = full * cfg_.page_size;
}

// Gives up all of r's KV: whole pages are cached in the radix tree (unlocked, so they are the first
// thing to evict when memory is short, and free hits if r or a sibling comes back), the rest is freed.
void Scheduler::release_kv(Request* r) {
  DS_CHECK(!r->in_flight, "releasing the KV of '", r->rid, "' while its step is in flight");
  if (tree_) {
    // Not past the known tokens: an aborted request's last step may have fed one its host never saw.
    const int32_t full = std::min(r->kv_len, r->num_tokens()) / cfg_.page_size;
    if (full * cfg_.page_size > r->tree_tokens)
      tree_->insert(std::span<const TokenId>(r->tokens).first(full * cfg_.page_size),
                    std::span<const PageId>(r->page_table).first(full));
    tree_->unlock(r->prefix_node);
  }
  pool_->unref(r->page_table);
  r->page_table.clear();
  r->prefix_node = nullptr;
  r->tree_tokens = 0;
  r->kv_len = 0;
  r->kv_done = 0;
  if (r->row >= 0) {
    free_rows_.push_back(r->row);
    r->row = -1;
  }
}

// Takes the newest running request back to the waiting queue. Its generated tokens stay: re-admission
// prefills prompt + output so far (mostly from the radix cache if its pages survived) and generation
// continues where it stopped, with the same tokens (sampling state is per row and seed, not per step).
void Scheduler::retract(Request* r) {
  DS_CHECK(!running_.empty() && running_.back() == r, "only the newest running request is retracted");
  running_.pop_back();
  release_kv(r);
  r->drafts.clear();
  r->status = RequestStatus::kWaiting;
  ++r->num_retractions;
  ++counters_.num_retractions;
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), r,
                              [](const Request* a, const Request* b) { return a->arrival < b->arrival; });
  waiting_.insert(pos, r);
}

void Scheduler::finish(Request* r, FinishReason reason, std::vector<TokenId> new_tokens) {
  if (r->status == RequestStatus::kRunning) {
    std::erase(running_, r);
  } else {
    std::erase(waiting_, r);
  }
  r->status = RequestStatus::kFinished;
  RequestEvent ev;
  ev.rid = r->rid;
  ev.new_tokens = std::move(new_tokens);
  ev.finished = true;
  ev.reason = std::move(reason);
  ev.prompt_tokens = r->num_prompt;
  ev.completion_tokens = r->num_output();
  ev.cached_tokens = r->cached_tokens;
  r->finish = ev.reason;
  events_.push_back(std::move(ev));
  // Overlap: a later step still in flight writes its pages; they go when that step completes.
  if (!r->in_flight) drop(r);
}

void Scheduler::drop(Request* r) {
  release_kv(r);
  requests_.erase(r->rid);  // r is gone from here on
}

void Scheduler::retract_all() {
  DS_CHECK(flights_.empty(), "retract_all with a step in flight");
  while (!running_.empty()) retract(running_.back());
}

bool Scheduler::busy_before_hold() const {
  if (!flights_.empty() || !running_.empty()) return true;
  for (const Request* r : waiting_)
    if (r->arrival < hold_from_) return true;
  return false;
}

Status Scheduler::flush_cache(bool allow_waiting) {
  if (!flights_.empty()) return error("flush_cache refused: a step is in flight");
  if (!running_.empty() || (!allow_waiting && !waiting_.empty()))
    return error("flush_cache refused: ", running_.size(), " requests running and ", waiting_.size(), " waiting");
  if (tree_) tree_->clear();
  return Status::ok();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = counters_;
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_running = static_cast<int32_t>(running_.size());
  s.free_pages = pool_->num_free();
  s.cached_pages = tree_ ? tree_->cached_pages() : 0;
  s.evictable_pages = tree_ ? tree_->evictable_pages() : 0;
  return s;
}

}  // namespace ds
