#include "http/sessions.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ds {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBos = 0;

SessionParams params(const std::string& id, std::optional<std::string> rid = std::nullopt) {
  SessionParams p;
  p.id = id;
  p.rid = std::move(rid);
  return p;
}

TEST(SessionStoreTest, OpensWithAFreshOrAGivenIdOnce) {
  SessionStore st;
  Result<std::string> a = st.open("");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a.value().size(), 32u);
  Result<std::string> b = st.open("");
  ASSERT_TRUE(b.is_ok());
  EXPECT_NE(a.value(), b.value());
  ASSERT_TRUE(st.open("mine").is_ok());
  Result<std::string> again = st.open("mine");
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("already open"), std::string::npos);
  EXPECT_TRUE(st.close("mine"));
  EXPECT_FALSE(st.close("mine"));
  EXPECT_FALSE(st.is_open("mine"));
  EXPECT_TRUE(st.open("mine").is_ok());
}

TEST(SessionStoreTest, ContinuesAFinishedRequestWithItsOutputAndTheNewInputLessItsBos) {
  SessionStore st;
  ASSERT_TRUE(st.open("s").is_ok());
  Result<SessionPlan> first = st.begin(params("s"), "r1", Ids{kBos, 5, 6}, kBos);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first.value().prompt_ids, (Ids{kBos, 5, 6}));  // a root keeps its BOS
  st.finish("s", "r1", Ids{7, 8});
  Result<SessionPlan> next = st.begin(params("s", "r1"), "r2", Ids{kBos, 9}, kBos);
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(next.value().prompt_ids, (Ids{kBos, 5, 6, 7, 8, 9}));
  // Without a BOS the input is appended as it is.
  st.finish("s", "r2", Ids{10});
  Result<SessionPlan> third = st.begin(params("s", "r2"), "r3", Ids{11, 12}, kBos);
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ(third.value().prompt_ids, (Ids{kBos, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(st.requests("s"), 3u);
}

TEST(SessionStoreTest, OffsetAndDropPreviousOutputCutTheContinuedIds) {
  SessionStore st;
  ASSERT_TRUE(st.open("s").is_ok());
  ASSERT_TRUE(st.begin(params("s"), "r1", Ids{1, 2, 3}, kBos).is_ok());
  st.finish("s", "r1", Ids{4, 5});
  SessionParams p = params("s", "r1");
  p.offset = 4;
  Result<SessionPlan> cut = st.begin(p, "r2", Ids{9}, kBos);
  ASSERT_TRUE(cut.is_ok());
  EXPECT_EQ(cut.value().prompt_ids, (Ids{1, 2, 3, 4, 9}));
  p.offset = 0;
  p.drop_previous_output = true;
  Result<SessionPlan> dropped = st.begin(p, "r3", Ids{9}, kBos);
  ASSERT_TRUE(dropped.is_ok());
  EXPECT_EQ(dropped.value().prompt_ids, (Ids{1, 2, 3, 9}));
  p.drop_previous_output = false;
  p.offset = 6;  // past the 5 ids
  Result<SessionPlan> past = st.begin(p, "r4", Ids{9}, kBos);
  ASSERT_FALSE(past.is_ok());
  EXPECT_NE(past.status().message().find("offset 6"), std::string::npos);
  EXPECT_EQ(st.requests("s"), 3u);  // the refused one is not recorded
}

TEST(SessionStoreTest, RefusesWhatItCannotContinue) {
  SessionStore st;
  auto fails_with = [&](const SessionParams& p, const std::string& rid, const std::string& words) {
    Result<SessionPlan> r = st.begin(p, rid, Ids{1}, kBos);
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  fails_with(params("nope"), "r1", "not open");
  ASSERT_TRUE(st.open("s").is_ok());
  ASSERT_TRUE(st.begin(params("s"), "r1", Ids{1}, kBos).is_ok());
  fails_with(params("s", "r1"), "r2", "still running");
  fails_with(params("s", "zz"), "r2", "no request 'zz'");
  fails_with(params("s"), "r1", "already in session");
  // A request begun and cancelled (its prompt refused by the server) leaves nothing behind.
  st.finish("s", "r1", Ids{2});
  ASSERT_TRUE(st.begin(params("s", "r1"), "r2", Ids{3}, kBos).is_ok());
  st.cancel("s", "r2");
  EXPECT_EQ(st.requests("s"), 1u);
  ASSERT_TRUE(st.begin(params("s", "r1"), "r2", Ids{3}, kBos).is_ok());
  // A closed session's late finish is ignored.
  EXPECT_TRUE(st.close("s"));
  st.finish("s", "r2", Ids{4});
  EXPECT_EQ(st.requests("s"), 0u);
}

TEST(SessionStoreTest, ReplaceDropsTheBranchesOnceAcceptedAndNamesTheRunningOnes) {
  SessionStore st;
  ASSERT_TRUE(st.open("s").is_ok());
  ASSERT_TRUE(st.begin(params("s"), "root", Ids{1}, kBos).is_ok());
  st.finish("s", "root", Ids{2});
  ASSERT_TRUE(st.begin(params("s", "root"), "a", Ids{3}, kBos).is_ok());
  st.finish("s", "a", Ids{4});
  ASSERT_TRUE(st.begin(params("s", "a"), "a1", Ids{5}, kBos).is_ok());  // running
  ASSERT_TRUE(st.begin(params("s", "root"), "b", Ids{6}, kBos).is_ok());  // running
  EXPECT_EQ(st.requests("s"), 4u);
  SessionParams p = params("s", "root");
  p.replace = true;
  // Begun and cancelled (refused by the server): nothing is dropped.
  ASSERT_TRUE(st.begin(p, "c", Ids{7}, kBos).is_ok());
  st.cancel("s", "c");
  EXPECT_EQ(st.requests("s"), 4u);
  Result<SessionPlan> r = st.begin(p, "c", Ids{7}, kBos);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r.value().prompt_ids, (Ids{1, 2, 7}));
  std::vector<std::string> aborted = st.accept(p, "c");
  std::sort(aborted.begin(), aborted.end());
  EXPECT_EQ(aborted, (std::vector<std::string>{"a1", "b"}));
  EXPECT_EQ(st.requests("s"), 2u);  // root and c
  // c is still root's child: finished, it can be continued.
  st.finish("s", "c", Ids{9});
  Result<SessionPlan> cc = st.begin(params("s", "c"), "cc", Ids{10}, kBos);
  ASSERT_TRUE(cc.is_ok());
  EXPECT_EQ(cc.value().prompt_ids, (Ids{1, 2, 7, 9, 10}));
  // Replace without a rid clears the session: the new request is its only one.
  SessionParams all = params("s");
  all.replace = true;
  Result<SessionPlan> fresh = st.begin(all, "d", Ids{8}, kBos);
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_EQ(fresh.value().prompt_ids, (Ids{8}));
  EXPECT_EQ(st.accept(all, "d"), (std::vector<std::string>{"cc"}));
  EXPECT_EQ(st.requests("s"), 1u);
  // Without replace, accept drops nothing.
  st.finish("s", "d", Ids{});
  ASSERT_TRUE(st.begin(params("s", "d"), "e", Ids{1}, kBos).is_ok());
  EXPECT_TRUE(st.accept(params("s", "d"), "e").empty());
  EXPECT_EQ(st.requests("s"), 2u);
}

TEST(SessionStoreTest, CapsTheRequestsOfASession) {
  SessionStore st;
  ASSERT_TRUE(st.open("s").is_ok());
  for (size_t i = 0; i < SessionStore::kMaxRequestsPerSession; ++i)
    ASSERT_TRUE(st.begin(params("s"), "r" + std::to_string(i), Ids{1}, kBos).is_ok());
  Result<SessionPlan> full = st.begin(params("s"), "more", Ids{1}, kBos);
  ASSERT_FALSE(full.is_ok());
  EXPECT_NE(full.status().message().find("its most"), std::string::npos);
  SessionParams all = params("s");  // a replace without a rid empties it, so it is let in
  all.replace = true;
  ASSERT_TRUE(st.begin(all, "more", Ids{1}, kBos).is_ok());
  EXPECT_EQ(st.accept(all, "more").size(), SessionStore::kMaxRequestsPerSession);
  EXPECT_EQ(st.requests("s"), 1u);
}

// The ids every request holds are counted while kept and given back as requests go (replace, cancel, close).
TEST(SessionStoreTest, CountsTheIdsItHolds) {
  SessionStore st;
  ASSERT_TRUE(st.open("s").is_ok());
  ASSERT_TRUE(st.open("t").is_ok());
  ASSERT_TRUE(st.begin(params("s"), "r1", Ids{1, 2, 3}, kBos).is_ok());
  EXPECT_EQ(st.ids_held(), 3u);
  st.finish("s", "r1", Ids{4, 5});
  EXPECT_EQ(st.ids_held(), 5u);
  ASSERT_TRUE(st.begin(params("s", "r1"), "r2", Ids{6}, kBos).is_ok());  // 1 2 3 4 5 6
  EXPECT_EQ(st.ids_held(), 11u);
  st.cancel("s", "r2");
  EXPECT_EQ(st.ids_held(), 5u);
  ASSERT_TRUE(st.begin(params("t"), "x", Ids{7, 8}, kBos).is_ok());
  EXPECT_EQ(st.ids_held(), 7u);
  SessionParams all = params("s");
  all.replace = true;
  ASSERT_TRUE(st.begin(all, "r3", Ids{9}, kBos).is_ok());
  st.accept(all, "r3");
  EXPECT_EQ(st.ids_held(), 3u);  // r3's 1 and x's 2
  EXPECT_TRUE(st.close("s"));
  EXPECT_TRUE(st.close("t"));
  EXPECT_EQ(st.ids_held(), 0u);
}

}  // namespace
}  // namespace ds
