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

TEST(SessionStoreTest, ReplaceDropsTheBranchesAndNamesTheRunningOnes) {
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
  Result<SessionPlan> r = st.begin(p, "c", Ids{7}, kBos);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r.value().prompt_ids, (Ids{1, 2, 7}));
  std::vector<std::string> aborted = r.value().to_abort;
  std::sort(aborted.begin(), aborted.end());
  EXPECT_EQ(aborted, (std::vector<std::string>{"a1", "b"}));
  EXPECT_EQ(st.requests("s"), 2u);  // root and c
  // Replace without a rid clears the session: the new request is its only one.
  SessionParams all = params("s");
  all.replace = true;
  Result<SessionPlan> fresh = st.begin(all, "d", Ids{8}, kBos);
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_EQ(fresh.value().to_abort, (std::vector<std::string>{"c"}));
  EXPECT_EQ(fresh.value().prompt_ids, (Ids{8}));
  EXPECT_EQ(st.requests("s"), 1u);
}

}  // namespace
}  // namespace ds
