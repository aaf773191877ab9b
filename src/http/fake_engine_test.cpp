// FakeEngine: the recurrence, stop ids / EOS with min_new_tokens, length, abort, finish_with_stop, validation.
#include "http/fake_engine.h"

#include <gtest/gtest.h>

#include <future>

namespace ds {
namespace {

struct Collected {
  std::vector<int32_t> tokens;
  EngineEvent last;
};

// Submits and waits for the final event.
Collected run(FakeEngine& e, EngineRequest req) {
  auto done = std::make_shared<std::promise<Collected>>();
  auto acc = std::make_shared<Collected>();
  Status st = e.submit(std::move(req), [done, acc](EngineEvent ev) {
    acc->tokens.insert(acc->tokens.end(), ev.new_tokens.begin(), ev.new_tokens.end());
    if (ev.finished) {
      acc->last = ev;
      done->set_value(*acc);
    }
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
  return done->get_future().get();
}

EngineRequest request(std::string rid, std::vector<int32_t> ids, int max_new) {
  EngineRequest r;
  r.rid = std::move(rid);
  r.input_ids = std::move(ids);
  r.sampling.max_new_tokens = max_new;
  return r;
}

FakeEngineOptions small() {
  FakeEngineOptions o;
  o.vocab_size = 100;
  o.eos_token_ids = {};
  o.step_us = 0;
  o.context_length = 1000;
  return o;
}

TEST(FakeEngine, FollowsTheRecurrenceToMaxNewTokens) {
  FakeEngine e(small());
  Collected c = run(e, request("a", {4}, 5));
  std::vector<int32_t> want;
  int32_t t = 4;
  for (int i = 0; i < 5; ++i) want.push_back(t = (t * 31 + 7) % 100);
  EXPECT_EQ(c.tokens, want);
  EXPECT_EQ(c.last.reason.kind, FinishReason::Kind::kLength);
  EXPECT_EQ(c.last.completion_tokens, 5);
  EXPECT_EQ(c.last.prompt_tokens, 1);
}

TEST(FakeEngine, StopIdsRespectMinNewTokensAndEos) {
  FakeEngine e(small());
  const int32_t first = (4 * 31 + 7) % 100;  // 31
  EngineRequest r = request("a", {4}, 10);
  r.sampling.stop_token_ids = {first};
  Collected c = run(e, r);
  EXPECT_EQ(c.tokens, std::vector<int32_t>{first});
  EXPECT_EQ(c.last.reason.kind, FinishReason::Kind::kStop);
  EXPECT_EQ(c.last.reason.matched_token, first);

  r.rid = "b";
  r.sampling.min_new_tokens = 2;
  Collected d = run(e, r);
  EXPECT_GT(d.tokens.size(), 1u);  // the stop id at position 1 does not count yet

  FakeEngineOptions o = small();
  o.eos_token_ids = {first};
  FakeEngine eos(o);
  EXPECT_EQ(run(eos, request("c", {4}, 10)).tokens.size(), 1u);
  EngineRequest ig = request("d", {4}, 10);
  ig.sampling.ignore_eos = true;
  EXPECT_EQ(run(eos, ig).tokens.size(), 10u);
}

TEST(FakeEngine, ValidatesRequests) {
  FakeEngine e(small());
  auto cb = [](EngineEvent) {};
  EXPECT_FALSE(e.submit(request("a", {}, 1), cb).is_ok());
  EXPECT_FALSE(e.submit(request("a", {100}, 1), cb).is_ok());
  EXPECT_FALSE(e.submit(request("a", {1}, 1000), cb).is_ok());
  EXPECT_FALSE(e.submit(request("", {1}, 1), cb).is_ok());
}

TEST(FakeEngine, AbortAndFinishWithStopEndRequests) {
  FakeEngineOptions o = small();
  o.step_us = 1000;
  FakeEngine e(o);
  auto done = std::make_shared<std::promise<EngineEvent>>();
  ASSERT_TRUE(e.submit(request("long", {1}, 900), [done](EngineEvent ev) {
                 if (ev.finished) done->set_value(ev);
               }).is_ok());
  EXPECT_FALSE(e.submit(request("long", {1}, 5), [](EngineEvent) {}).is_ok());  // duplicate rid
  e.abort("long");
  EngineEvent ev = done->get_future().get();
  EXPECT_EQ(ev.reason.kind, FinishReason::Kind::kAbort);
  EXPECT_EQ(e.num_aborts(), 1u);
  EXPECT_EQ(e.num_live(), 0u);

  auto done2 = std::make_shared<std::promise<EngineEvent>>();
  ASSERT_TRUE(e.submit(request("s", {1}, 900), [done2](EngineEvent ev) {
                 if (ev.finished) done2->set_value(ev);
               }).is_ok());
  e.finish_with_stop("s", "END");
  EngineEvent ev2 = done2->get_future().get();
  EXPECT_EQ(ev2.reason.kind, FinishReason::Kind::kStop);
  EXPECT_EQ(ev2.reason.matched_text, "END");
  EXPECT_TRUE(e.flush_cache().is_ok());
}

TEST(FakeEngine, ShutdownAbortsPendingRequests) {
  FakeEngineOptions o = small();
  o.step_us = 1000;
  FakeEngine e(o);
  auto done = std::make_shared<std::promise<EngineEvent>>();
  ASSERT_TRUE(e.submit(request("x", {1}, 900), [done](EngineEvent ev) {
                 if (ev.finished) done->set_value(ev);
               }).is_ok());
  e.shutdown();
  EXPECT_EQ(done->get_future().get().reason.kind, FinishReason::Kind::kAbort);
  EXPECT_FALSE(e.submit(request("y", {1}, 1), [](EngineEvent) {}).is_ok());
}

}  // namespace
}  // namespace ds
