// ByteDfa against std::regex (ECMAScript, whole-string) on every short string over small alphabets, UTF-8 classes,
// pruning of dead ends, and errors that name the problem.
#include "text/regex_dfa.h"

#include <chrono>
#include <regex>

#include <gtest/gtest.h>

namespace ds {
namespace {

void all_strings(const std::string& alphabet, int max_len, const std::function<void(const std::string&)>& f) {
  std::vector<std::string> level = {""};
  f("");
  for (int len = 1; len <= max_len; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : level)
      for (char c : alphabet) {
        next.push_back(s + c);
        f(next.back());
      }
    level = std::move(next);
  }
}

TEST(ByteDfa, MatchesWhatStdRegexMatches) {
  const char* patterns[] = {
      "a*b",           "(ab|a)*c?",      "[a-c]{2,3}",   "a{2}|b{1,}",    "(a|b)*abb",     "[^ab]+",
      "x?(y|z)+x",     "\\d+(\\.\\d+)?", "[\\d.]{1,2}a", "(?:ab)+",       "a.b",           "[-a]b*",
      "\\s*x\\s*",     "\\w\\W?",        "(a|)b",        "a{0,2}b{2,}",   "[a\\-c]+",      "((a|b)c|x)*",
  };
  const std::string alphabet = "abcx1. -";
  for (const char* p : patterns) {
    SCOPED_TRACE(p);
    auto dfa = ByteDfa::compile(p);
    ASSERT_TRUE(dfa.is_ok()) << dfa.status().message();
    const std::regex re(p, std::regex::ECMAScript);
    int checked = 0;
    all_strings(alphabet, 5, [&](const std::string& s) {
      const bool want = std::regex_match(s, re);
      if (dfa->matches(s) != want) ADD_FAILURE() << "'" << s << "': std::regex says " << want;
      ++checked;
    });
    EXPECT_GT(checked, 30000);
  }
}

TEST(ByteDfa, CodePointsMatchAsUtf8Sequences) {
  auto greek = ByteDfa::compile("[α-ω]+!");
  ASSERT_TRUE(greek.is_ok());
  EXPECT_TRUE(greek->matches("αβω!"));
  EXPECT_FALSE(greek->matches("ab!"));
  EXPECT_FALSE(greek->matches("Ω!"));
  auto any = ByteDfa::compile("^.{2}$");
  ASSERT_TRUE(any.is_ok());
  EXPECT_TRUE(any->matches("é中"));
  EXPECT_TRUE(any->matches("a😀"));
  EXPECT_FALSE(any->matches("é"));
  EXPECT_FALSE(any->matches("a\n"));
  EXPECT_FALSE(any->matches("a\xff"));  // not UTF-8
  auto neg = ByteDfa::compile("[^\"\\\\]*");  // a JSON string body: anything but quote and backslash
  ASSERT_TRUE(neg.is_ok());
  EXPECT_TRUE(neg->matches("héllo 世界"));
  EXPECT_FALSE(neg->matches("a\"b"));
  EXPECT_FALSE(neg->matches("\xed\xa0\x80"));  // an encoded surrogate
  auto esc = ByteDfa::compile("\\u00e9\\x41");
  ASSERT_TRUE(esc.is_ok());
  EXPECT_TRUE(esc->matches("éA"));
}

TEST(ByteDfa, DeadEndsArePrunedAndCompletionIsKnown) {
  auto d = ByteDfa::compile("ab|ac");
  ASSERT_TRUE(d.is_ok());
  const int a = d->next(d->start(), 'a');
  ASSERT_NE(a, ByteDfa::kDead);
  EXPECT_EQ(d->next(a, 'x'), ByteDfa::kDead);
  const int ab = d->next(a, 'b');
  ASSERT_NE(ab, ByteDfa::kDead);
  EXPECT_TRUE(d->accepting(ab));
  EXPECT_FALSE(d->has_next(ab));
  // A branch that can never finish is dead from its first byte.
  auto e = ByteDfa::compile("a(b[^\\x00-\\U0010ffff])?|c");
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(e->walk(e->start(), "ab"), ByteDfa::kDead);
  EXPECT_TRUE(e->matches("a"));
}

TEST(ByteDfa, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"(ab", "missing )"},      {"[ab", "missing ]"},           {"a{3,2}", "max < min"},
      {"*a", "nothing to repeat"}, {"\\q", "unsupported escape"}, {"[z-a]", "out of order"},
      {"(?=a)", "group syntax"},  {"a{20000}", "over 10000"},
  };
  for (const auto& [p, want] : cases) {
    auto d = ByteDfa::compile(p);
    ASSERT_FALSE(d.is_ok()) << p;
    EXPECT_NE(d.status().message().find(want), std::string::npos) << p << ": " << d.status().message();
  }
  // Hostile patterns end in an error quickly: many states with large NFA sets, a huge NFA.
  const auto t0 = std::chrono::steady_clock::now();
  auto slow = ByteDfa::compile("(a?){9000}a{9000}");
  EXPECT_FALSE(slow.is_ok());
  auto huge = ByteDfa::compile("(.{1000}){100}");
  ASSERT_FALSE(huge.is_ok());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);  // (sanitizer builds too)
  auto big = ByteDfa::compile("[ab]*a[ab]{12}", 1000);  // 2^13 states when determinized
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("over 1000 states"), std::string::npos) << big.status().message();
}

}  // namespace
}  // namespace ds
