// Scheduler policy tests with a fake runner. The fake runner keeps a token-id "KV cache" addressed by
// the plan's slot mapping and page tables, and "samples" a hash of the context it reads back from that
// cache. So a request produces the reference tokens (the hash of prompt + output so far, computed here
// without the scheduler) only if every page table, slot and prefix reuse the scheduler made is right.
#include "sched/scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <cstdio>
#include <set>

#include <gtest/gtest.h>

namespace ds {
namespace {

constexpr TokenId kVocab = 1000;

// The model: the next token is a hash of the whole sequence so far.
TokenId next_token(std::span<const TokenId> seq) {
  uint64_t h = 1469598103934665603ull;
  for (TokenId t : seq) {
    h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ull;
    h *= 1099511628211ull;
  }
  return static_cast<TokenId>((h >> 17) % kVocab);
}

// What a request must produce, computed from the prompt alone.
std::vector<TokenId> reference(std::vector<TokenId> seq, int32_t max_new, const std::vector<TokenId>& stop = {},
                               int32_t min_new = 0) {
  std::vector<TokenId> out;
  while (static_cast<int32_t>(out.size()) < max_new) {
    TokenId t = next_token(seq);
    seq.push_back(t);
    out.push_back(t);
    if (static_cast<int32_t>(out.size()) > min_new && std::find(stop.begin(), stop.end(), t) != stop.end()) break;
  }
  return out;
}

std::vector<TokenId> random_tokens(std::mt19937& rng, int32_t n) {
  std::uniform_int_distribution<TokenId> d(0, kVocab - 1);
  std::vector<TokenId> v(n);
  for (auto& t : v) t = d(rng);
  return v;
}

// name("r", i) trips a GCC 12 -Wrestrict false positive; this does not.
std::string name(const char* prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

SamplingParams params(int32_t max_new) {
  SamplingParams sp;
  sp.max_new_tokens = max_new;
  sp.ignore_eos = true;
  return sp;
}

class FakeRunner {
 public:
  explicit FakeRunner(const Scheduler& s)
      : sched_(s), ps_(s.config().page_size), kv_(static_cast<size_t>(s.config().num_pages) * ps_, -1) {}

  std::vector<SeqResult> run(const StepPlan& plan) {
    const PagePool& pool = sched_.pool();
    EXPECT_EQ(plan.page_size, ps_);
    std::set<int32_t> written;
    // Speculative decoding: a step is all decodes (verification) or all prompt work, never both.
    if (sched_.config().speculative_num_steps > 0) {
      const auto decodes = std::count_if(plan.seqs.begin(), plan.seqs.end(), [](const auto& s) { return s.is_decode; });
      EXPECT_TRUE(decodes == 0 || decodes == static_cast<std::ptrdiff_t>(plan.seqs.size()))
          << decodes << " decodes mixed with " << plan.seqs.size() - decodes << " prompt sequences";
    }
    for (const auto& s : plan.seqs) {
      EXPECT_EQ(s.num_pages, pages_for(s.kv_len() + std::max(s.draft_steps - 1, 0), ps_));
      for (int32_t p = 0; p < s.num_pages; ++p) EXPECT_GE(pool.ref_count(plan.page_table[s.page_begin + p]), 1);
      // The draft steps' positions past the step are the request's own pages.
      for (int32_t pos = s.kv_len(); pos < s.kv_len() + s.draft_steps - 1; ++pos)
        EXPECT_EQ(pool.ref_count(plan.page_table[s.page_begin + pos / ps_]), 1);
      EXPECT_LE(s.draft_steps, sched_.config().speculative_num_steps);
      EXPECT_TRUE(s.num_draft == 0 || (s.is_decode && s.needs_sample && s.num_tokens == 1 + s.num_draft));
      for (int32_t i = 0; i < s.num_tokens; ++i) {
        const int32_t t = s.token_begin + i;
        const int32_t pos = plan.positions[t];
        EXPECT_EQ(pos, s.start_pos + i);
        const PageId page = plan.page_table[s.page_begin + pos / ps_];
        EXPECT_EQ(plan.slot_mapping[t], page * ps_ + pos % ps_);
        EXPECT_TRUE(written.insert(plan.slot_mapping[t]).second) << "two tokens write slot " << plan.slot_mapping[t];
        // A page being written belongs to this request alone: never a cached (shared) page.
        EXPECT_EQ(pool.ref_count(page), 1) << "write into shared page " << page;
      }
    }
    EXPECT_EQ(static_cast<int32_t>(written.size()), plan.num_tokens());
    for (const auto& s : plan.seqs)
      for (int32_t i = 0; i < s.num_tokens; ++i) {
        const int32_t t = s.token_begin + i;
        TokenId id = plan.input_ids[t];
        if (id == kPlaceholderToken) {  // overlap: the token the previous step sampled for this row
          auto it = last_by_row_.find(s.row);
          EXPECT_TRUE(it != last_by_row_.end() && i + 1 == s.num_tokens) << "placeholder without a sampled token";
          id = it == last_by_row_.end() ? -1 : it->second;
          ++placeholders_;
        }
        kv_[plan.slot_mapping[t]] = id;
      }

    std::vector<SeqResult> results(plan.seqs.size());
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const auto& s = plan.seqs[i];
      if (!s.needs_sample) continue;
      // Verification: the first token's context ends before the drafts; each matching draft extends it.
      const int32_t base = s.kv_len() - s.num_draft;
      std::vector<TokenId> context(base);
      for (int32_t pos = 0; pos < base; ++pos)
        context[pos] = kv_[plan.page_table[s.page_begin + pos / ps_] * ps_ + pos % ps_];
      for (int32_t j = 0;; ++j) {
        const TokenId t = next_token(context);
        if (j == s.num_draft || plan.input_ids[s.token_begin + 1 + j] != t) {
          results[i].token = t;
          break;
        }
        results[i].accepted_drafts.push_back(t);
        context.push_back(t);
        ++accepted_;
      }
      drafts_fed_ += s.num_draft;
      last_by_row_[s.row] = results[i].token;
      // Drafts for the next step: the true continuation, each right with probability draft_accuracy.
      context.push_back(results[i].token);
      for (int32_t j = 0; j < s.draft_steps; ++j) {
        const TokenId t = next_token(context);
        context.push_back(t);
        results[i].next_drafts.push_back(static_cast<int>(draft_rng_() % 100) < draft_accuracy ? t : (t + 1) % kVocab);
      }
    }
    return results;
  }
  int64_t placeholders() const { return placeholders_; }
  int64_t drafts_fed() const { return drafts_fed_; }
  int64_t accepted() const { return accepted_; }
  int draft_accuracy = 70;  // percent

 private:
  std::mt19937 draft_rng_{7};
  int64_t drafts_fed_ = 0, accepted_ = 0;
  std::map<int32_t, TokenId> last_by_row_;  // the device's "last sampled token" per request row
  int64_t placeholders_ = 0;
  const Scheduler& sched_;
  int32_t ps_;
  std::vector<TokenId> kv_;
};

struct Outcome {
  std::vector<TokenId> tokens;
  bool finished = false;
  FinishReason reason;
  int32_t cached_tokens = 0;
  int32_t completion_tokens = 0;
};

// Runs steps until the scheduler is idle, checking per-step invariants. before_step(step) may add or
// abort requests; on_plan sees every plan before it runs.
struct Driver {
  Scheduler& s;
  FakeRunner runner;
  std::map<std::string, Outcome> out;
  int32_t max_running_seen = 0;
  int64_t steps = 0;
  // Overlap scheduling: each step is planned and run before the previous one completes (two in flight).
  bool overlap = false;
  std::optional<std::pair<StepPlan, std::vector<SeqResult>>> prev;
  int max_in_flight_seen = 0;

  explicit Driver(Scheduler& sched, bool overlapped = false) : s(sched), runner(sched), overlap(overlapped) {}

  bool busy() const { return s.has_work() || prev.has_value(); }
  void drain() {
    if (!prev) return;
    auto p = std::move(*prev);
    prev.reset();
    apply(s.complete_step(p.first, p.second));
  }

  void apply(const std::vector<RequestEvent>& events) {
    for (const auto& ev : events) {
      Outcome& o = out[ev.rid];
      EXPECT_FALSE(o.finished) << ev.rid << " got an event after finishing";
      o.tokens.insert(o.tokens.end(), ev.new_tokens.begin(), ev.new_tokens.end());
      o.completion_tokens = ev.completion_tokens;
      o.cached_tokens = ev.cached_tokens;
      if (ev.finished) {
        o.finished = true;
        o.reason = ev.reason;
      }
    }
  }

  void step(const std::function<void(const StepPlan&)>& on_plan = nullptr) {
    const SchedulerConfig& cfg = s.config();
    StepPlan plan = s.next_step();
    ++steps;
    SchedulerStats st = s.stats();
    // (With overlap a plan may be empty while the only decodes left are the last tokens in flight.)
    if (!prev) {
      EXPECT_FALSE(plan.empty() && st.num_running + st.num_waiting > 0) << "no progress at step " << steps;
    }
    EXPECT_LE(st.num_running, cfg.max_running_requests);
    EXPECT_LE(plan.num_seqs(), cfg.max_running_requests);
    max_running_seen = std::max(max_running_seen, st.num_running);
    if (cfg.chunked_prefill_size > 0) {
      EXPECT_LE(plan.num_prefill_tokens, std::max(0, cfg.chunked_prefill_size - plan.num_decode_seqs));
    }
    for (const auto& q : plan.seqs) {
      if (q.is_decode) {
        EXPECT_EQ(q.num_tokens, 1 + q.num_draft);
      }
      EXPECT_GE(q.num_tokens, 1);
    }
    if (on_plan) on_plan(plan);
    auto results = runner.run(plan);
    if (!overlap) {
      apply(s.complete_step(plan, results));
      return;
    }
    max_in_flight_seen = std::max(max_in_flight_seen, s.num_steps_in_flight());
    drain();
    prev.emplace(std::move(plan), std::move(results));
  }

  void run_to_idle(int64_t max_steps = 100000, const std::function<void(int64_t)>& before_step = nullptr,
                   const std::function<void(const StepPlan&)>& on_plan = nullptr) {
    for (int64_t i = 0; i < max_steps; ++i) {
      if (before_step) before_step(steps);
      apply(s.take_events());
      if (!s.has_work()) {
        if (!prev) return;
        drain();
        continue;
      }
      step(on_plan);
      if (::testing::Test::HasFailure()) return;
    }
    ADD_FAILURE() << "not idle after " << max_steps << " steps";
  }
};

// Idle: every page is free or an unlocked radix-cache page.
void expect_idle(const Scheduler& s) {
  SchedulerStats st = s.stats();
  EXPECT_EQ(st.num_running + st.num_waiting, 0);
  EXPECT_EQ(st.evictable_pages, st.cached_pages);
  EXPECT_EQ(st.free_pages + st.cached_pages, s.config().num_pages);
  if (s.config().disable_radix_cache) {
    EXPECT_EQ(st.free_pages, s.config().num_pages);
  }
}

SchedulerConfig small_config(int32_t page_size, int32_t num_pages, int32_t chunk, int32_t max_running = 64) {
  SchedulerConfig c;
  c.page_size = page_size;
  c.num_pages = num_pages;
  c.chunked_prefill_size = chunk;
  c.max_running_requests = max_running;
  return c;
}

std::unique_ptr<Scheduler> make(const SchedulerConfig& c) {
  auto r = Scheduler::create(c);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r).value();
}

TEST(Scheduler, SingleRequestProducesTheReferenceTokens) {
  auto s = make(small_config(16, 64, 64));
  std::mt19937 rng(1);
  auto prompt = random_tokens(rng, 40);
  ASSERT_TRUE(s->add_request("a", prompt, params(20)).is_ok());
  Driver d(*s);
  d.run_to_idle();
  ASSERT_TRUE(d.out["a"].finished);
  EXPECT_EQ(d.out["a"].tokens, reference(prompt, 20));
  EXPECT_EQ(d.out["a"].reason.kind, FinishReason::Kind::kLength);
  EXPECT_EQ(d.out["a"].completion_tokens, 20);
  EXPECT_EQ(d.steps, 20);  // one prefill step (40 <= 64) then 19 decodes
  expect_idle(*s);
  EXPECT_EQ(s->stats().cached_pages, (40 + 20 - 1) / 16);  // whole pages of tokens with KV
}

// Speculative decoding, one request: right drafts cut the steps to one per draft_steps + 1 tokens, wrong ones
// cost nothing but their rollback, a stop token among accepted drafts ends the request there, and the tokens are
// the reference's every time.
TEST(Scheduler, DraftsAreVerifiedAcceptedAndRolledBack) {
  std::mt19937 rng(11);
  const auto prompt = random_tokens(rng, 40);
  const auto ref = reference(prompt, 21);
  for (int accuracy : {100, 0}) {
    for (bool stop : {false, true}) {
      SCOPED_TRACE("accuracy " + std::to_string(accuracy) + (stop ? ", stop token" : ""));
      auto cfg = small_config(4, 64, 64);
      cfg.speculative_num_steps = 3;
      auto s = make(cfg);
      SamplingParams p = params(21);
      if (stop) p.stop_token_ids = {ref[6]};  // a token the third step's drafts bring (tokens 4-7)
      ASSERT_TRUE(s->add_request("a", prompt, p).is_ok());
      Driver d(*s);
      d.runner.draft_accuracy = accuracy;
      int32_t max_pages = 0;
      d.run_to_idle(1000, nullptr, [&](const StepPlan& plan) { max_pages = std::max(max_pages, plan.seqs[0].num_pages); });
      ASSERT_TRUE(d.out["a"].finished);
      const auto want = stop ? reference(prompt, 21, {ref[6]}) : ref;
      EXPECT_EQ(d.out["a"].tokens, want);
      const int64_t n = static_cast<int64_t>(want.size());
      // Prefill (token 1), then 4 tokens a step with right drafts (the last steps fewer: drafts are bounded by
      // max_new_tokens), else 1.
      EXPECT_EQ(d.steps, accuracy == 100 ? 1 + (n - 1 + 3) / 4 : n);
      EXPECT_EQ(d.runner.accepted() > 0, accuracy == 100);
      EXPECT_GT(d.runner.drafts_fed(), 0);
      EXPECT_LE(max_pages, pages_for(40 + 21 + 2, 4));  // never past the last token + the draft steps' 2 positions
      expect_idle(*s);
    }
  }
}

TEST(Scheduler, ChunkedPrefillSplitsALongPromptWhileDecodesContinue) {
  const int32_t kChunk = 64;
  auto s = make(small_config(16, 128, kChunk));
  std::mt19937 rng(2);
  auto pd = random_tokens(rng, 10);
  auto pl = random_tokens(rng, 300);
  ASSERT_TRUE(s->add_request("d", pd, params(40)).is_ok());
  Driver d(*s);
  d.step();  // d's prefill; d decodes from now on
  ASSERT_EQ(d.out["d"].tokens.size(), 1u);
  ASSERT_TRUE(s->add_request("long", pl, params(5)).is_ok());

  std::vector<StepPlan::SeqStep> long_chunks;
  int32_t decodes_during_prefill = 0;
  while (long_chunks.empty() || !long_chunks.back().needs_sample) {
    d.step([&](const StepPlan& plan) {
      EXPECT_LE(plan.num_tokens(), kChunk);
      bool saw_d = false;
      for (const auto& q : plan.seqs) {
        if (q.req->rid == "long") long_chunks.push_back(q);
        if (q.req->rid == "d") {
          saw_d = true;
          EXPECT_TRUE(q.is_decode);
        }
      }
      EXPECT_TRUE(saw_d) << "the decoding request was stalled by the prefill";
      decodes_during_prefill += saw_d;
    });
    ASSERT_FALSE(::testing::Test::HasFailure());
  }
  // 300 tokens with 63 budget per step next to one decode: 63, 63, 63, 63, 48.
  ASSERT_EQ(long_chunks.size(), 5u);
  int32_t pos = 0;
  for (size_t i = 0; i < long_chunks.size(); ++i) {
    EXPECT_EQ(long_chunks[i].start_pos, pos);
    EXPECT_EQ(long_chunks[i].num_tokens, i + 1 < long_chunks.size() ? kChunk - 1 : 300 - 4 * (kChunk - 1));
    EXPECT_EQ(long_chunks[i].needs_sample, i + 1 == long_chunks.size());
    EXPECT_FALSE(long_chunks[i].is_decode);
    pos += long_chunks[i].num_tokens;
  }
  EXPECT_EQ(decodes_during_prefill, 5);
  d.run_to_idle();
  EXPECT_EQ(d.out["d"].tokens, reference(pd, 40));
  EXPECT_EQ(d.out["long"].tokens, reference(pl, 5));
  expect_idle(*s);
}

// Holding new admissions (a weight update waiting for the requests before it): a request added before the hold
// runs to the end (a waiting one is still admitted), one added after it waits until the release, then every one
// gives the reference tokens.
TEST(Scheduler, HeldAdmissionsLetTheEarlierRequestsFinish) {
  auto s = make(small_config(16, 128, 32));
  std::mt19937 rng(7);
  const auto pa = random_tokens(rng, 70), pb = random_tokens(rng, 12), pc = random_tokens(rng, 20);
  ASSERT_TRUE(s->add_request("a", pa, params(6)).is_ok());
  Driver d(*s);
  d.step();  // a's first chunk: a runs
  ASSERT_TRUE(s->add_request("b", pb, params(3)).is_ok());  // waiting when the hold comes: still admitted
  s->hold_new_admissions();
  ASSERT_TRUE(s->add_request("c", pc, params(4)).is_ok());
  s->hold_new_admissions();  // a second hold keeps the first boundary
  int steps = 0;
  while (s->busy_before_hold() && steps < 50) {
    d.step([&](const StepPlan& plan) {
      for (const auto& q : plan.seqs) EXPECT_NE(q.req->rid, "c") << "admitted while held";
    });
    ++steps;
  }
  EXPECT_TRUE(d.out["a"].finished);
  EXPECT_TRUE(d.out["b"].finished);
  EXPECT_FALSE(d.out["c"].finished);
  EXPECT_EQ(s->stats().num_waiting, 1);
  EXPECT_TRUE(s->flush_cache(/*allow_waiting=*/true).is_ok());
  s->release_admissions();
  d.run_to_idle();
  EXPECT_EQ(d.out["a"].tokens, reference(pa, 6));
  EXPECT_EQ(d.out["b"].tokens, reference(pb, 3));
  EXPECT_EQ(d.out["c"].tokens, reference(pc, 4));
  expect_idle(*s);
}

TEST(Scheduler, TokenBudgetAndMaxRunningAreRespected) {
  auto cfg = small_config(8, 400, 48, /*max_running=*/3);
  auto s = make(cfg);
  std::mt19937 rng(3);
  std::map<std::string, std::vector<TokenId>> prompts;
  for (int i = 0; i < 10; ++i) {
    std::string rid = name("r", i);
    prompts[rid] = random_tokens(rng, 20 + 13 * i);
    ASSERT_TRUE(s->add_request(rid, prompts[rid], params(10 + i)).is_ok());
  }
  Driver d(*s);
  int32_t max_seqs = 0, max_tokens = 0;
  d.run_to_idle(100000, nullptr, [&](const StepPlan& p) {
    max_seqs = std::max(max_seqs, p.num_seqs());
    max_tokens = std::max(max_tokens, p.num_tokens());
  });
  EXPECT_EQ(d.max_running_seen, 3);  // the cap is reached and never passed (checked every step)
  EXPECT_EQ(max_seqs, 3);
  EXPECT_EQ(max_tokens, 48);  // prompts longer than the budget were chunked to exactly it
  for (int i = 0; i < 10; ++i) {
    std::string rid = name("r", i);
    EXPECT_EQ(d.out[rid].tokens, reference(prompts[rid], 10 + i)) << rid;
  }
  expect_idle(*s);
}

// Same workload with a pool large enough for everything and with one barely larger than the biggest
// request: the small pool must retract, and every request must still produce the same tokens.
void retraction_case(bool radix, int32_t chunk) {
  std::mt19937 rng(4);
  std::vector<std::vector<TokenId>> prompts;
  std::vector<int32_t> max_new;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(random_tokens(rng, 30 + 5 * i));
    max_new.push_back(40 + 6 * i);
  }
  std::map<std::string, Outcome> results[2];
  uint64_t retractions[2] = {0, 0};
  for (int big = 0; big < 2; ++big) {
    auto cfg = small_config(8, big ? 1000 : 19, chunk);  // small: 152 tokens, the biggest request needs 147
    cfg.disable_radix_cache = !radix;
    auto s = make(cfg);
    for (int i = 0; i < 8; ++i)
      ASSERT_TRUE(s->add_request(name("r", i), prompts[i], params(max_new[i])).is_ok());
    Driver d(*s);
    d.run_to_idle();
    results[big] = d.out;
    retractions[big] = s->stats().num_retractions;
    expect_idle(*s);
  }
  EXPECT_EQ(retractions[1], 0u);
  EXPECT_GT(retractions[0], 0u);
  for (int i = 0; i < 8; ++i) {
    std::string rid = name("r", i);
    ASSERT_TRUE(results[0][rid].finished && results[1][rid].finished) << rid;
    EXPECT_EQ(results[0][rid].tokens, results[1][rid].tokens) << rid;
    EXPECT_EQ(results[1][rid].tokens, reference(prompts[i], max_new[i])) << rid;
    EXPECT_EQ(results[0][rid].reason.kind, FinishReason::Kind::kLength);
  }
}
TEST(Scheduler, RetractionUnderASmallPoolKeepsTokensWithRadixCache) { retraction_case(true, 32); }
TEST(Scheduler, RetractionUnderASmallPoolKeepsTokensWithoutRadixCache) { retraction_case(false, 32); }
TEST(Scheduler, RetractionUnderASmallPoolKeepsTokensWithoutChunking) { retraction_case(true, -1); }

// Pausing with mode "retract": every running request (mid-prompt and decoding) goes back to the waiting queue with
// its pages freed; a flush that allows waiting requests then empties the cache; the requests resume with the
// reference tokens (prefilled again from scratch).
TEST(Scheduler, RetractAllThenFlushKeepsTokens) {
  auto s = make(small_config(8, 64, 24));
  std::mt19937 rng(12);
  const auto pa = random_tokens(rng, 20), pb = random_tokens(rng, 40);
  ASSERT_TRUE(s->add_request("a", pa, params(12)).is_ok());
  ASSERT_TRUE(s->add_request("b", pb, params(12)).is_ok());
  Driver d(*s);
  for (int i = 0; i < 2; ++i) d.step();  // a decoding, b's prompt in chunks
  ASSERT_EQ(s->stats().num_running, 2);
  EXPECT_FALSE(s->flush_cache(true).is_ok());  // running requests hold pages
  s->retract_all();
  EXPECT_EQ(s->stats().num_running, 0);
  EXPECT_EQ(s->stats().num_waiting, 2);
  EXPECT_EQ(s->stats().num_retractions, 2u);
  EXPECT_FALSE(s->flush_cache().is_ok());  // requests wait
  ASSERT_TRUE(s->flush_cache(true).is_ok());
  EXPECT_EQ(s->pool().num_free(), 64);
  EXPECT_EQ(s->find("a")->kv_len, 0);
  d.run_to_idle();
  EXPECT_EQ(d.out["a"].tokens, reference(pa, 12));
  EXPECT_EQ(d.out["b"].tokens, reference(pb, 12));
  expect_idle(*s);
}

TEST(Scheduler, AbortFreesPagesWhetherWaitingRunningOrInFlight) {
  for (bool radix : {false, true}) {
    auto cfg = small_config(8, 64, 64, /*max_running=*/2);
    cfg.disable_radix_cache = !radix;
    auto s = make(cfg);
    std::mt19937 rng(5);
    for (const char* rid : {"a", "b", "c", "d"}) ASSERT_TRUE(s->add_request(rid, random_tokens(rng, 20), params(50)).is_ok());
    Driver d(*s);
    d.step();
    d.step();
    EXPECT_EQ(s->find("a")->status, RequestStatus::kRunning);
    EXPECT_EQ(s->find("c")->status, RequestStatus::kWaiting);
    EXPECT_LT(s->pool().num_free(), cfg.num_pages);
    // a: running, between steps. c: waiting.
    ASSERT_TRUE(s->abort("a", "client went away").is_ok());
    ASSERT_TRUE(s->abort("c").is_ok());
    d.apply(s->take_events());
    EXPECT_TRUE(d.out["a"].finished);
    EXPECT_EQ(d.out["a"].reason.kind, FinishReason::Kind::kAbort);
    EXPECT_EQ(d.out["a"].reason.matched_text, "client went away");
    EXPECT_EQ(d.out["a"].tokens.size(), 2u);
    EXPECT_TRUE(d.out["c"].finished);
    EXPECT_TRUE(d.out["c"].tokens.empty());
    EXPECT_EQ(s->find("a"), nullptr);
    EXPECT_FALSE(s->abort("a").is_ok());  // already gone
    EXPECT_FALSE(s->abort("nope").is_ok());
    // b: aborted while its step is in flight: finished when the step completes, its token dropped.
    StepPlan plan = s->next_step();
    ASSERT_TRUE(s->abort("b").is_ok());
    EXPECT_NE(s->find("b"), nullptr);
    d.apply(s->complete_step(plan, d.runner.run(plan)));
    EXPECT_TRUE(d.out["b"].finished);
    EXPECT_EQ(d.out["b"].reason.kind, FinishReason::Kind::kAbort);
    EXPECT_EQ(d.out["b"].tokens.size(), 2u);
    ASSERT_TRUE(s->abort("d").is_ok());
    d.apply(s->take_events());
    EXPECT_TRUE(d.out["d"].finished);
    EXPECT_FALSE(s->has_work());
    expect_idle(*s);
    if (radix) {
      ASSERT_TRUE(s->flush_cache().is_ok());
      EXPECT_EQ(s->pool().num_free(), cfg.num_pages);
    }
  }
}

TEST(Scheduler, SharedPrefixIsServedFromTheRadixCache) {
  for (bool radix : {true, false}) {
    auto cfg = small_config(16, 64, 256);
    cfg.disable_radix_cache = !radix;
    auto s = make(cfg);
    std::mt19937 rng(6);
    auto pa = random_tokens(rng, 64);
    auto pb = std::vector<TokenId>(pa.begin(), pa.begin() + 48);
    auto tail = random_tokens(rng, 20);
    pb.insert(pb.end(), tail.begin(), tail.end());
    Driver d(*s);
    ASSERT_TRUE(s->add_request("a", pa, params(3)).is_ok());
    d.run_to_idle();
    ASSERT_TRUE(s->add_request("b", pb, params(3)).is_ok());
    ASSERT_TRUE(s->add_request("a2", pa, params(3)).is_ok());  // same prompt again
    bool first = true;
    d.run_to_idle(1000, nullptr, [&](const StepPlan& p) {
      if (!first) return;
      first = false;
      ASSERT_EQ(p.num_seqs(), 2);
      EXPECT_EQ(p.seqs[0].start_pos, radix ? 48 : 0);  // b feeds only its own 20 tokens
      EXPECT_EQ(p.seqs[0].num_tokens, radix ? 20 : 68);
      // a2 matches 48 of 64: the last prompt token is always fed, so its page is recomputed.
      EXPECT_EQ(p.seqs[1].start_pos, radix ? 48 : 0);
      if (radix) {  // the three shared pages are held by the tree and both requests
        for (int i = 0; i < 3; ++i) EXPECT_EQ(s->pool().ref_count(p.page_table[p.seqs[0].page_begin + i]), 3);
        EXPECT_EQ(p.page_table[p.seqs[0].page_begin], p.page_table[p.seqs[1].page_begin]);
      }
    });
    EXPECT_EQ(d.out["b"].cached_tokens, radix ? 48 : 0);
    EXPECT_EQ(d.out["a2"].cached_tokens, radix ? 48 : 0);
    EXPECT_EQ(d.out["b"].tokens, reference(pb, 3));
    EXPECT_EQ(d.out["a2"].tokens, reference(pa, 3));
    EXPECT_EQ(d.out["a2"].tokens, d.out["a"].tokens);
    if (radix) {
      SchedulerStats st = s->stats();
      EXPECT_EQ(st.cached_tokens_total, 96u);
      EXPECT_EQ(st.prompt_tokens_admitted, 64u + 68u + 64u);
    }
    expect_idle(*s);
  }
}

// Without chunking (-1) a step's prompt tokens stay within max_prefill_tokens (what the CUDA memory plan reserves
// activations for): prompts that fit go whole, several to a step; a longer one waits for a step with no other prompt
// and goes in pieces of max_prefill_tokens; decodes go on beside the pieces, and every request gets its tokens.
TEST(Scheduler, WithoutChunkingALongPromptGoesInPiecesOfMaxPrefillTokens) {
  auto cfg = small_config(16, 128, /*chunked_prefill_size=*/-1);
  cfg.max_prefill_tokens = 100;
  auto s = make(cfg);
  std::mt19937 rng(5);
  const auto pd = random_tokens(rng, 10), pa = random_tokens(rng, 60), pb = random_tokens(rng, 30),
             pl = random_tokens(rng, 250), pc = random_tokens(rng, 20);
  ASSERT_TRUE(s->add_request("d", pd, params(30)).is_ok());
  Driver d(*s);
  d.step();  // d's prefill; d decodes from now on
  for (const auto& [rid, prompt] : std::vector<std::pair<std::string, std::vector<TokenId>>>{
           {"a", pa}, {"b", pb}, {"long", pl}, {"c", pc}})
    ASSERT_TRUE(s->add_request(rid, prompt, params(3)).is_ok());
  std::vector<std::vector<std::pair<std::string, int32_t>>> prefills;  // per step: (rid, tokens) of prompt pieces
  while (s->has_work()) {
    d.step([&](const StepPlan& plan) {
      EXPECT_LE(plan.num_prefill_tokens, cfg.max_prefill_tokens);
      std::vector<std::pair<std::string, int32_t>> step;
      for (const auto& q : plan.seqs)
        if (!q.is_decode) step.emplace_back(q.req->rid, q.num_tokens);
      if (!step.empty()) prefills.push_back(step);
    });
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_LT(d.steps, 500);
  }
  d.drain();
  // a (60) and b (30) share a step; long (250) waits for a step of its own: 100, 100, 50 (c, 20 tokens, joins the
  // last piece's step: 70 <= 100).
  using Step = std::vector<std::pair<std::string, int32_t>>;
  ASSERT_GE(prefills.size(), 4u);
  EXPECT_EQ(prefills[0], (Step{{"a", 60}, {"b", 30}}));
  EXPECT_EQ(prefills[1], (Step{{"long", 100}}));
  EXPECT_EQ(prefills[2], (Step{{"long", 100}}));
  EXPECT_EQ(prefills[3], (Step{{"long", 50}, {"c", 20}}));
  EXPECT_EQ(prefills.size(), 4u);
  for (const auto& [rid, prompt, max_new] : std::vector<std::tuple<std::string, std::vector<TokenId>, int32_t>>{
           {"d", pd, 30}, {"a", pa, 3}, {"b", pb, 3}, {"long", pl, 3}, {"c", pc, 3}}) {
    ASSERT_TRUE(d.out[rid].finished) << rid;
    EXPECT_EQ(d.out[rid].tokens, reference(prompt, max_new)) << rid;
  }
  expect_idle(*s);
}

TEST(Scheduler, ChunksOfARunningPromptAreSharedWithALaterRequest) {
  // x's prompt is prefilled in chunks of 32; y (same 80-token prompt) is admitted in x's last step and
  // finds the 64 tokens x's earlier chunks cached.
  auto s = make(small_config(16, 64, 32));
  std::mt19937 rng(7);
  auto p = random_tokens(rng, 80);
  ASSERT_TRUE(s->add_request("x", p, params(4)).is_ok());
  ASSERT_TRUE(s->add_request("y", p, params(4)).is_ok());
  Driver d(*s);
  d.run_to_idle();
  EXPECT_EQ(d.out["x"].cached_tokens, 0);
  EXPECT_EQ(d.out["y"].cached_tokens, 64);
  EXPECT_EQ(d.out["x"].tokens, reference(p, 4));
  EXPECT_EQ(d.out["y"].tokens, reference(p, 4));
  expect_idle(*s);
}

TEST(Scheduler, ConcurrentIdenticalPromptsEndUpSharingPages) {
  // Both are admitted in one step (nothing cached yet) and compute the same 4 pages; when the prefill
  // completes the second switches to the first's cached pages and frees its duplicates.
  auto s = make(small_config(16, 64, 256));
  std::mt19937 rng(11);
  auto p = random_tokens(rng, 64);
  ASSERT_TRUE(s->add_request("x", p, params(3)).is_ok());
  ASSERT_TRUE(s->add_request("y", p, params(3)).is_ok());
  Driver d(*s);
  d.step([&](const StepPlan& plan) {
    ASSERT_EQ(plan.num_seqs(), 2);
    EXPECT_EQ(s->pool().num_used(), 8);
  });
  EXPECT_EQ(s->pool().num_used(), 4);
  EXPECT_EQ(s->find("x")->page_table, s->find("y")->page_table);
  EXPECT_EQ(s->pool().ref_count(s->find("x")->page_table[0]), 3);  // tree + x + y
  d.run_to_idle();
  EXPECT_EQ(d.out["x"].tokens, reference(p, 3));
  EXPECT_EQ(d.out["y"].tokens, reference(p, 3));
  expect_idle(*s);
}

TEST(Scheduler, LpmAdmitsTheLongestCachedPrefixFirst) {
  for (SchedulePolicy policy : {SchedulePolicy::kFcfs, SchedulePolicy::kLpm}) {
    auto cfg = small_config(16, 64, 256, /*max_running=*/1);
    cfg.policy = policy;
    auto s = make(cfg);
    std::mt19937 rng(8);
    auto pa = random_tokens(rng, 64);
    Driver d(*s);
    ASSERT_TRUE(s->add_request("a", pa, params(2)).is_ok());
    d.run_to_idle();
    auto pc = pa;
    pc.push_back(7);
    ASSERT_TRUE(s->add_request("b", random_tokens(rng, 64), params(2)).is_ok());  // no shared prefix
    ASSERT_TRUE(s->add_request("c", pc, params(2)).is_ok());                     // 64 tokens cached
    std::vector<std::string> order;  // rids in order of first appearance in a plan
    d.run_to_idle(1000, nullptr, [&](const StepPlan& p) {
      for (const auto& q : p.seqs) {
        if (std::find(order.begin(), order.end(), q.req->rid) == order.end()) order.push_back(q.req->rid);
      }
    });
    ASSERT_EQ(order.size(), 2u);
    if (policy == SchedulePolicy::kLpm) {
      EXPECT_EQ(order, (std::vector<std::string>{"c", "b"}));
    } else {
      EXPECT_EQ(order, (std::vector<std::string>{"b", "c"}));
    }
    EXPECT_EQ(d.out["c"].cached_tokens, 64);
    expect_idle(*s);
  }
}

TEST(Scheduler, StopTokensEosAndMinNewTokens) {
  std::mt19937 rng(9);
  auto prompt = random_tokens(rng, 12);
  auto ref = reference(prompt, 64);
  // An EOS id whose first occurrence in the reference is at index k >= 3 (and occurs again later, if
  // possible, to exercise min_new_tokens).
  size_t k = 3;
  while (std::find(ref.begin(), ref.begin() + k, ref[k]) != ref.begin() + k) ++k;
  const TokenId eos = ref[k];

  auto run = [&](SamplingParams sp) {
    auto cfg = small_config(4, 64, 32);
    cfg.eos_token_ids = {eos};
    auto s = make(cfg);
    EXPECT_TRUE(s->add_request("r", prompt, sp).is_ok());
    Driver d(*s);
    d.run_to_idle();
    expect_idle(*s);
    return d.out["r"];
  };
  SamplingParams sp;
  sp.max_new_tokens = 64;
  Outcome o = run(sp);
  EXPECT_EQ(o.reason.kind, FinishReason::Kind::kStop);
  EXPECT_EQ(o.reason.matched_token, eos);
  EXPECT_EQ(o.tokens, std::vector<TokenId>(ref.begin(), ref.begin() + k + 1));

  sp.ignore_eos = true;
  o = run(sp);
  EXPECT_EQ(o.reason.kind, FinishReason::Kind::kLength);
  EXPECT_EQ(o.tokens, ref);

  sp.stop_token_ids = {eos};  // explicit stop ids apply even with ignore_eos
  o = run(sp);
  EXPECT_EQ(o.reason.kind, FinishReason::Kind::kStop);
  EXPECT_EQ(o.tokens.size(), k + 1);

  sp.ignore_eos = false;
  sp.stop_token_ids.clear();
  sp.min_new_tokens = static_cast<int32_t>(k + 1);  // the EOS at position k is too early to stop
  o = run(sp);
  EXPECT_EQ(o.tokens, reference(prompt, 64, {eos}, sp.min_new_tokens));
  EXPECT_GT(o.tokens.size(), k + 1);
}

TEST(Scheduler, CallerFinishDecisionEndsTheRequest) {
  auto s = make(small_config(4, 64, 32));
  std::mt19937 rng(10);
  auto prompt = random_tokens(rng, 9);
  ASSERT_TRUE(s->add_request("r", prompt, params(50)).is_ok());
  FakeRunner runner(*s);
  std::vector<TokenId> got;
  for (int step = 0; step < 4; ++step) {
    StepPlan plan = s->next_step();
    auto res = runner.run(plan);
    if (step == 3) res[0].finish = FinishReason{FinishReason::Kind::kStop, -1, "</end>"};  // a stop string
    for (const auto& ev : s->complete_step(plan, res)) {
      got.insert(got.end(), ev.new_tokens.begin(), ev.new_tokens.end());
      EXPECT_EQ(ev.finished, step == 3);
      if (ev.finished) {
        EXPECT_EQ(ev.reason.matched_text, "</end>");
      }
    }
  }
  EXPECT_EQ(got, reference(prompt, 4));
  EXPECT_FALSE(s->has_work());
  expect_idle(*s);
}

TEST(Scheduler, UserErrorsAreRejectedWithAMessage) {
  auto cfg = small_config(16, 4, 32);  // 64 tokens of KV
  Status st = make(cfg)->add_request("big", std::vector<TokenId>(40, 1), params(25));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("max-total-tokens"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("big"), std::string::npos);
  EXPECT_TRUE(make(cfg)->add_request("ok", std::vector<TokenId>(40, 1), params(24)).is_ok());

  cfg.context_length = 60;
  auto s = make(cfg);

  EXPECT_FALSE(s->add_request("e", {}, params(5)).is_ok());
  EXPECT_FALSE(s->add_request("", {1}, params(5)).is_ok());
  EXPECT_FALSE(s->add_request("n", {1, -3}, params(5)).is_ok());
  EXPECT_FALSE(s->add_request("z", {1}, params(0)).is_ok());
  EXPECT_FALSE(s->add_request("ctx", std::vector<TokenId>(60, 1), params(1)).is_ok());  // prompt >= context
  ASSERT_TRUE(s->add_request("x", std::vector<TokenId>(50, 1), params(30)).is_ok());   // clipped to 10
  EXPECT_EQ(s->find("x")->sampling.max_new_tokens, 10);
  EXPECT_FALSE(s->add_request("x", {1}, params(1)).is_ok());  // duplicate
  EXPECT_FALSE(s->flush_cache().is_ok());                      // refused while a request waits
  EXPECT_FALSE(s->abort("missing").is_ok());

  EXPECT_FALSE(parse_schedule_policy("random").is_ok());
  EXPECT_EQ(parse_schedule_policy("lpm").value(), SchedulePolicy::kLpm);
  auto bad = small_config(16, 0, 32);
  EXPECT_FALSE(Scheduler::create(bad).is_ok());
  bad = small_config(16, 4, 0);
  EXPECT_FALSE(Scheduler::create(bad).is_ok());
  EXPECT_EQ(Scheduler::pages_for_max_total_tokens(1000, 64), 15);
}

// Random workloads over random configurations: arrivals over time, shared prefixes, aborts. Every
// request that is not aborted produces its reference tokens; aborted ones a prefix of them; the pool
// returns to idle.
enum class Mode { kSerial, kOverlap, kSpeculative };
void random_workloads(Mode mode) {
  const bool overlap = mode == Mode::kOverlap;
  uint64_t retractions = 0, cached = 0, aborted = 0, chunked = 0, stopped = 0;
  int64_t placeholders = 0, drafts_fed = 0, accepted = 0;
  int max_in_flight = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(1000 + seed);
    auto pick = [&](std::initializer_list<int32_t> v) { return *(v.begin() + rng() % v.size()); };
    SchedulerConfig cfg;
    cfg.page_size = pick({1, 4, 16});
    cfg.chunked_prefill_size = pick({-1, 8, 33, 128});
    cfg.max_prefill_tokens = pick({16, 64, 1000});
    cfg.max_running_requests = pick({1, 3, 8, 64});
    cfg.policy = rng() % 2 ? SchedulePolicy::kLpm : SchedulePolicy::kFcfs;
    cfg.disable_radix_cache = rng() % 4 == 0;
    const int32_t max_req_tokens = 120;
    cfg.num_pages = pages_for(max_req_tokens, cfg.page_size) + static_cast<int32_t>(rng() % 3) *
                    pages_for(max_req_tokens, cfg.page_size) / 2;
    if (mode == Mode::kSpeculative) cfg.speculative_num_steps = pick({1, 2, 3, 5});
    auto s = make(cfg);

    std::vector<std::vector<TokenId>> bases = {random_tokens(rng, 50), random_tokens(rng, 30), random_tokens(rng, 70)};
    struct Spec {
      std::string rid;
      std::vector<TokenId> prompt;
      int32_t max_new;
      int64_t arrive;
      int64_t abort_at = -1;
    };
    std::vector<Spec> specs;
    for (int i = 0; i < 16; ++i) {
      Spec sp;
      sp.rid = name("q", i);
      const auto& base = bases[rng() % bases.size()];
      sp.prompt.assign(base.begin(), base.begin() + 1 + rng() % base.size());
      auto tail = random_tokens(rng, static_cast<int32_t>(rng() % 20));
      sp.prompt.insert(sp.prompt.end(), tail.begin(), tail.end());
      sp.max_new = 1 + static_cast<int32_t>(rng() % (max_req_tokens - sp.prompt.size()));
      sp.arrive = rng() % 60;
      if (rng() % 8 == 0) sp.abort_at = sp.arrive + rng() % 40;
      specs.push_back(sp);
    }
    // Some requests stop on a token of their own reference output (a stop found one step late with overlap).
    std::map<std::string, std::vector<TokenId>> stops;
    for (const auto& sp : specs)
      if (rng() % 4 == 0 && sp.max_new > 2) {
        const auto ref = reference(sp.prompt, sp.max_new);
        stops[sp.rid] = {ref[rng() % ref.size()]};
      }
    Driver d(*s, overlap);
    d.runner.draft_accuracy = pick({0, 50, 90, 100});
    auto before = [&](int64_t step) {
      for (const auto& sp : specs) {
        if (sp.arrive == step) {
          SamplingParams p = params(sp.max_new);
          if (stops.count(sp.rid)) p.stop_token_ids = stops[sp.rid];
          ASSERT_TRUE(s->add_request(sp.rid, sp.prompt, p).is_ok());
        }
        const Request* q = sp.abort_at == step ? s->find(sp.rid) : nullptr;
        if (q && !q->finish) {  // (with overlap a finished request drains its last step)
          ASSERT_TRUE(s->abort(sp.rid).is_ok());
        }
      }
    };
    // Keep stepping (possibly with nothing to do) until all arrivals happened and the queue drained.
    while (d.steps < 100 || s->has_work()) {  // (then the step still in flight completes: drain)
      before(d.steps);
      d.apply(s->take_events());
      d.step([&](const StepPlan& p) {
        for (const auto& q : p.seqs) chunked += !q.is_decode && !q.needs_sample;
        // A step's tokens within the chunk budget (decodes alone may exceed it), or without chunking its prompt
        // tokens within max_prefill_tokens.
        if (cfg.chunked_prefill_size > 0)
          EXPECT_LE(p.num_prefill_tokens, std::max(cfg.chunked_prefill_size - p.num_decode_seqs, 0));
        else
          EXPECT_LE(p.num_prefill_tokens, cfg.max_prefill_tokens);
      });
      ASSERT_FALSE(::testing::Test::HasFailure());
      ASSERT_LT(d.steps, 20000);
    }
    d.drain();
    placeholders += d.runner.placeholders();
    drafts_fed += d.runner.drafts_fed();
    accepted += d.runner.accepted();
    max_in_flight = std::max(max_in_flight, d.max_in_flight_seen);
    retractions += s->stats().num_retractions;
    cached += s->stats().cached_tokens_total;
    for (const auto& sp : specs) {
      const Outcome& o = d.out[sp.rid];
      ASSERT_TRUE(o.finished) << sp.rid;
      auto ref = reference(sp.prompt, sp.max_new, stops.count(sp.rid) ? stops[sp.rid] : std::vector<TokenId>{});
      stopped += o.reason.kind == FinishReason::Kind::kStop;
      EXPECT_EQ(o.completion_tokens, static_cast<int32_t>(o.tokens.size())) << sp.rid;
      if (o.reason.kind == FinishReason::Kind::kAbort) {
        ++aborted;
        ASSERT_LE(o.tokens.size(), ref.size());
        EXPECT_TRUE(std::equal(o.tokens.begin(), o.tokens.end(), ref.begin())) << sp.rid;
      } else {
        EXPECT_EQ(o.tokens, ref) << sp.rid;
      }
    }
    expect_idle(*s);
  }
  // The workloads exercised the interesting paths.
  EXPECT_GT(retractions, 0u);
  EXPECT_GT(cached, 0u);
  EXPECT_GT(aborted, 0u);
  EXPECT_GT(chunked, 0u);
  EXPECT_GT(stopped, 0u);
  if (overlap) {  // the overlapped runs really had two steps in flight and fed device-resolved tokens
    EXPECT_EQ(max_in_flight, Scheduler::kMaxStepsInFlight);
    EXPECT_GT(placeholders, 0);
  } else {
    EXPECT_EQ(placeholders, 0);
  }
  if (mode == Mode::kSpeculative) {  // drafts were fed, some accepted, some rolled back
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafts_fed);
  } else {
    EXPECT_EQ(drafts_fed, 0);
  }
  std::printf("random workloads%s: %llu retractions, %llu cached prompt tokens, %llu aborts, %llu stops, %llu "
              "non-final chunks, %lld placeholder tokens, %lld of %lld drafts accepted\n",
              overlap ? " (overlap)" : mode == Mode::kSpeculative ? " (drafts)" : "", (unsigned long long)retractions, (unsigned long long)cached,
              (unsigned long long)aborted, (unsigned long long)stopped, (unsigned long long)chunked,
              (long long)placeholders, (long long)accepted, (long long)drafts_fed);
}

TEST(Scheduler, RandomWorkloadsMatchTheReference) { random_workloads(Mode::kSerial); }
// Overlap scheduling: the same workloads with step N + 1 planned and run before step N completes give the same
// tokens, finish once (a stop or abort found a step late discards that step's token), and leave the pool idle.
TEST(Scheduler, RandomWorkloadsWithTwoStepsInFlightMatchTheReference) { random_workloads(Mode::kOverlap); }
// Speculative decoding: decodes feed the drafts the previous step made (some wrong), accept the matching prefix
// plus the token after it, and roll the rest back; the tokens are the reference's, and the pool ends idle.
TEST(Scheduler, RandomWorkloadsWithDraftsMatchTheReference) { random_workloads(Mode::kSpeculative); }

}  // namespace
}  // namespace ds
