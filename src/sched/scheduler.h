// Scheduler: continuous batching over a paged KV cache with a radix prefix cache. Decides each step
// which requests run, how many tokens each feeds (chunked prefill mixed with decode) and which pages
// the step writes; turns sampled tokens into per-request events. No CUDA, no model: page ids only.
#pragma once
#include <climits>
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/page_pool.h"
#include "cache/radix_tree.h"
#include "core/status.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace ds {

// The policy in one paragraph (details in scheduler.cpp):
//  * Every step decodes all running requests that are generating, continues any chunked prefill, then
//    admits waiting requests (fcfs, or longest cached prefix first) while the token budget, the page
//    pool and max_running_requests allow. Decode and prefill chunks share one step (mixed batch).
//  * Token budget: chunked_prefill_size bounds decode + prefill tokens of a step, so a long prompt is
//    spread over several steps and never stalls the decoders for more than one chunk's time.
//  * Memory priority follows admission order: when pages run out, the most recently admitted requests
//    are retracted (pages freed, KV kept in the radix cache while it lasts, generated tokens kept) and
//    re-queued in their arrival place. The oldest request always fits (checked at add time), so the
//    system always makes progress.
//
//  * MTP speculative decoding (speculative_num_steps > 0): a decode SeqStep carries num_draft trailing input
//    tokens, the drafts the previous step made (Request::drafts; slots and pages reserved like any token, but
//    only when they fit without retracting anyone: else the decode goes without them). SeqResult's
//    accepted_drafts + token are appended, stop conditions checked after each, and the KV of rejected drafts
//    rolled back: kv_len = start_pos + num_tokens - num_draft + accepted, the pages past pages_for(kv_len)
//    unref'd. Sampling sequences also get draft_steps (the drafts to make for the next step, bounded by what
//    max_new_tokens leaves) and pages for the positions those draft steps write past kv_len(), when free.
//    kv_len stays the only KV cursor. Steps do not overlap (the drafts are host values).
//  * DP attention: one Scheduler (own PagePool + RadixTree) per attention-DP rank (a BatchEngine each,
//    runner/dp_engine.cpp); nothing here is global. The DP controller routes add_request by load (running +
//    waiting; prefix affinity by radix match_length would plug in there). Because the MLP collectives need every
//    rank, each rank still runs a step when its plan is empty (an idle, zero-token step). Still to come with CUDA:
//    batch sizes all-gathered for CUDA-graph padding by the runner.
//  * Overlap scheduling (plan N+1 while N runs; BatchEngine, --disable-overlap-schedule). Up to two
//    plans are in flight (next_step may be called once more before complete_step of the older one; steps
//    complete in order). A request sampled by the step in flight decodes again in the next plan with input
//    kPlaceholderToken (the runner resolves it on the device from that step's token for the request's `row`);
//    Request::pending counts such tokens and uncomputed()/is_decoding() include them. A request whose last
//    allowed token (max_new_tokens) is in flight is not planned again. A request that finishes (stop, EOS,
//    caller, abort) while a later step holds it emits its event once; the later step's token is discarded and
//    its pages and row are freed when that step completes (drop). Retraction never touches a request in
//    flight, and the radix cache only gets KV of completed steps (kv_done). Page reuse stays safe by stream
//    order: pages freed at complete_step(N) are written only by a plan made after it, which the device runs
//    after N + 1. Tested against the reference tokens by scheduler_test's random workloads with two steps in
//    flight. The engine plans and launches N + 1 before finishing N (steps with penalties run one at a time:
//    they need the exact previous tokens): BatchRunner::launch queues a step without waiting for the device,
//    the sampled ids come back into pinned memory behind an event (Ops::sample_async), and each sampled row's
//    token also goes to a device token store that the next step's placeholder ids read (resolve_tokens_,
//    inside the CUDA graph for decode replays).
//
// Not thread-safe: the engine loop owns it; HTTP threads hand it requests and aborts through a queue.

enum class SchedulePolicy { kFcfs, kLpm };
Result<SchedulePolicy> parse_schedule_policy(std::string_view name);  // "fcfs" | "lpm"

struct SchedulerConfig {
  int32_t page_size = 64;                // FlashMLA's native page size
  int32_t num_pages = 0;                 // KV capacity in pages: --max-total-tokens / page_size
  int32_t chunked_prefill_size = 8192;   // token budget per step (decode + prefill); -1: no chunking
  // Chunking off: the prompt tokens of a step. More prompts join a step only up to it, and a longer prompt goes in
  // pieces of it, each a step to itself (the CUDA memory plan reserves activations for this many tokens).
  int32_t max_prefill_tokens = 16384;
  int32_t max_running_requests = 256;
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  bool disable_radix_cache = false;
  int32_t context_length = 0;            // 0: unlimited; else prompts must be shorter, max_new_tokens is clipped
  std::vector<TokenId> eos_token_ids;    // model EOS ids (generation_config)
  // MTP speculative decoding (--speculative-num-steps): draft tokens a decode verifies (0: off). Drafts come back
  // in SeqResult::next_drafts, so steps do not overlap (next_step only after complete_step of the previous one).
  int32_t speculative_num_steps = 0;
  static constexpr int32_t kMaxSpeculativeSteps = 16;

  Status validate() const;
};

// What the runner reports for seqs[i] of the plan.
struct SeqResult {
  TokenId token = -1;                  // the sampled token; only read when seqs[i].needs_sample
  // Speculative decoding: the leading drafts of the step that matched (appended before `token`, the bonus token
  // sampled after them), and the drafts made for the next step (at most seqs[i].draft_steps).
  std::vector<TokenId> accepted_drafts;
  std::vector<TokenId> next_drafts;
  std::optional<FinishReason> finish;  // the caller's own decision (stop string matched, ...), if any
};

// What happened to a request; the engine streams these to clients.
struct RequestEvent {
  std::string rid;
  std::vector<TokenId> new_tokens;  // appended by this step (one per step now; several with MTP)
  bool finished = false;
  FinishReason reason;              // meaningful when finished
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
};

struct SchedulerStats {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t free_pages = 0;
  int32_t cached_pages = 0;     // pages held by the radix cache
  int32_t evictable_pages = 0;  // of those, not locked by a running request
  uint64_t num_steps = 0;
  uint64_t num_retractions = 0;
  uint64_t prompt_tokens_admitted = 0;  // over first admissions: with cached_tokens_total, the cache hit rate
  uint64_t cached_tokens_total = 0;
};

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> create(SchedulerConfig config);
  // Capacity in pages for --max-total-tokens (whole pages only).
  static int32_t pages_for_max_total_tokens(int64_t max_total_tokens, int32_t page_size) {
    return static_cast<int32_t>(max_total_tokens / page_size);
  }

  // Queues a request. Errors (nothing queued): empty or duplicate rid, empty prompt, negative token id,
  // max_new_tokens < 1, prompt >= context_length, prompt + max_new_tokens beyond the KV capacity.
  // max_prefix_reuse: reuse at most this many cached prompt tokens (see Request::max_prefix_reuse).
  Status add_request(std::string rid, std::vector<TokenId> prompt, SamplingParams sampling,
                     int32_t max_prefix_reuse = INT32_MAX);
  // Ends a request with reason abort. Its pages are freed now, or at complete_step when the request is
  // part of the step in flight. Error for an unknown (or already finished) rid.
  Status abort(const std::string& rid, std::string message = "aborted by client");

  // Plans the next step (empty when nothing can run). Every plan, empty ones too, is completed by
  // complete_step, in order. Overlap scheduling: one more plan may be made while a step is in flight (at most
  // two in flight); its decodes of requests sampled by the earlier step feed kPlaceholderToken (the runner
  // takes that step's token for the request's row on the device).
  static constexpr int kMaxStepsInFlight = 2;
  StepPlan next_step();
  // Applies the runner's results (results[i] for plan.seqs[i]) and returns every event since the last
  // call (including aborts of waiting requests).
  std::vector<RequestEvent> complete_step(const StepPlan& plan, std::span<const SeqResult> results);
  // Events produced outside a step (aborts while idle).
  std::vector<RequestEvent> take_events();

  // Takes every running request back to the waiting queue, newest first, as a retraction under memory pressure does
  // (SGLang's pause_generation mode "retract"). Only between steps: none may be in flight.
  void retract_all();
  // Drops the radix cache; refused while requests are waiting or running (as SGLang's /flush_cache). With
  // allow_waiting (a paused engine) only running requests refuse it: waiting ones hold no KV pages.
  Status flush_cache(bool allow_waiting = false);

  // What a weight update waits behind: while held, requests added from now on are not admitted; those added before
  // run on (admitted as usual) until done. Holding again keeps the first hold's boundary.
  void hold_new_admissions() { hold_from_ = std::min(hold_from_, next_arrival_); }
  void release_admissions() { hold_from_ = UINT64_MAX; }
  // A request added before the hold is running or waiting (or a step is in flight).
  bool busy_before_hold() const;
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  bool step_in_flight() const { return !flights_.empty(); }
  int num_steps_in_flight() const { return static_cast<int>(flights_.size()); }
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return cfg_; }
  const PagePool& pool() const { return *pool_; }
  const RadixTree* tree() const { return tree_.get(); }
  const Request* find(const std::string& rid) const;

 private:
  explicit Scheduler(SchedulerConfig config);
  uint64_t hold_from_ = UINT64_MAX;  // hold_new_admissions: the first arrival not admitted

  std::vector<Request*> admission_order();
  bool admit(Request* r, int32_t budget, StepPlan& plan, int32_t* fed);
  int32_t reserve_tokens(Request* r, int32_t want, int32_t min_ok, bool* retracted);
  bool alloc_pages(int32_t n, std::vector<PageId>& out);
  int32_t available_pages() const;
  void add_to_plan(Request* r, int32_t n, bool is_decode, StepPlan& plan, int32_t num_draft = 0);
  // next_step's halves: decodes (with their drafts), prompt chunks and admissions within `budget` tokens.
  void plan_decodes(StepPlan& plan, bool& retracted);
  void plan_prompts(StepPlan& plan, int32_t budget, bool& retracted);
  // Speculative decoding: how many drafts may follow a token at position `pos` within the context.
  int32_t draft_room(int32_t pos) const;
  int64_t free_slots(const Request& r) const;  // r's unused tail slots + what the pool (and eviction) can give
  void retract(Request* r);
  void cache_prefix(Request* r);
  void release_kv(Request* r);
  void finish(Request* r, FinishReason reason, std::vector<TokenId> new_tokens);
  void drop(Request* r);  // frees a finished request's KV and the request itself (nothing of it in flight)
  void roll_back_drafts(Request* r, const StepPlan::SeqStep& s, const SeqResult& res);
  std::optional<FinishReason> check_finish(const Request& r, const std::optional<FinishReason>& caller) const;

  SchedulerConfig cfg_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<RadixTree> tree_;  // null with disable_radix_cache
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;  // waiting + running
  std::vector<Request*> waiting_;    // by arrival
  std::vector<Request*> running_;    // by admission: the back is retracted first
  std::vector<int32_t> free_rows_;
  uint64_t next_arrival_ = 0;

  struct Flight {
    uint64_t step_id = 0;
    std::vector<Request*> reqs;  // reqs[i] is seqs[i].req of that step
  };
  std::deque<Flight> flights_;  // issued steps, oldest first (at most kMaxStepsInFlight)
  uint64_t step_id_ = 0;
  std::vector<RequestEvent> events_;
  SchedulerStats counters_;
};

}  // namespace ds
