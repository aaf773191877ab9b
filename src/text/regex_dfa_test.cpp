// ByteDfa against std::regex (ECMAScript, whole-string) on every short string over small alphabets, UTF-8 classes,
// pruning of dead ends, and errors that name the problem.
#include "text/regex_dfa.h"

#include <chrono>
#include <functional>
#include <random>
#include <regex>

#include <gtest/gtest.h>

#include "text/all_strings_test_util.h"

namespace ds {
namespace {

TEST(ByteDfa, MatchesWhatStdRegexMatches) {
  const char* patterns[] = {
      "a*b",           "(ab|a)*c?",      "[a-c]{2,3}",   "a{2}|b{1,}",    "(a|b)*abb",     "[^ab]+",
      "x?(y|z)+x",     "\\d+(\\.\\d+)?", "[\\d.]{1,2}a", "(?:ab)+",       "a.b",           "[-a]b*",
      "\\s*x\\s*",     "\\w\\W?",        "(a|)b",        "a{0,2}b{2,}",   "[a\\-c]+",      "((a|b)c|x)*",
      // Loops one after another (each must be left for good: "a*b*" never matches "ba"), and loops inside an
      // optional or repeated group (the group's skip is no way out of the loop: "(b*c)?" never matches "b").
      "a*b*",          "[^a]*a*",        "a+b*a",        "(a*b)*c*",      "x*(ab)*[a-c]*", "(a|b)*c+a*",
      "(b*c)?",        "(([b-c]?c?)*c)?[ab]?",           "(a*b){0,2}c",   "((a|b)*c)*x",   "(x?a*)?b",
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

// Random patterns (seeded) of literals, classes, groups, alternation and every quantifier, nested, against std::regex on
// every string of up to 5 characters over their alphabet.
TEST(ByteDfa, RandomPatternsMatchWhatStdRegexMatches) {
  std::mt19937 rng(2026);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    // (Each draw its own statement: the order of operands is unspecified, and the patterns must not depend on the
    // compiler.)
    std::string atom;
    switch (depth <= 0 ? pick(3) : pick(6)) {
      case 0: atom = std::string(1, "abc"[pick(3)]); break;
      case 1: atom = std::vector<std::string>{"[ab]", "[^a]", "[b-c]", "[^bc]"}[static_cast<size_t>(pick(4))]; break;
      case 2: atom = "."; break;
      case 3: {
        const std::string x = gen(depth - 1);
        const std::string y = gen(depth - 1);
        atom = "(" + x + y + ")";
        break;
      }
      case 4: {
        const std::string x = gen(depth - 1);
        const std::string y = gen(depth - 1);
        atom = "(" + x + "|" + y + ")";
        break;
      }
      default: atom = "(?:" + gen(depth - 1) + ")"; break;
    }
    static const char* quant[] = {"", "", "*", "+", "?", "{2}", "{0,2}", "{1,}"};
    return atom + quant[pick(8)];
  };
  int patterns = 0;
  for (int i = 0; i < 100; ++i) {
    std::string p;
    for (int k = 1 + pick(3); k > 0; --k) p += gen(2);
    SCOPED_TRACE(p);
    auto dfa = ByteDfa::compile(p);
    ASSERT_TRUE(dfa.is_ok()) << dfa.status().message();
    const std::regex re(p, std::regex::ECMAScript);
    all_strings("abc", 5, [&](const std::string& s) {
      if (dfa->matches(s) != std::regex_match(s, re)) ADD_FAILURE() << "'" << s << "'";
    });
    ++patterns;
  }
  EXPECT_EQ(patterns, 100);
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

// Free text with triggers: against a direct reading of the rule (find the first trigger to end, the longest of those
// ending there; its rest must match some stretch after it, then free text again) on every string up to length 7.
TEST(ByteDfa, TriggeredRestsMatchTheirDefinition) {
  // ("xb<ax" holds "<a" inside it: reading it, "<a" ends first.)
  const std::vector<ByteDfa::Trigger> triggers = {{"<a", "x*>"}, {"<b>", "a|bb"}, {"b<a", "b"}, {"xb<ax", "a"}};
  auto dfa = ByteDfa::compile_triggered(triggers);
  ASSERT_TRUE(dfa.is_ok()) << dfa.status().message();
  std::vector<std::regex> rests;
  for (const auto& t : triggers) rests.emplace_back(t.rest);
  std::function<bool(const std::string&, size_t)> free_from = [&](const std::string& s, size_t i) {
    for (size_t e = i + 1; e <= s.size(); ++e) {
      int pick = -1;
      for (size_t k = 0; k < triggers.size(); ++k) {
        const std::string& t = triggers[k].text;
        if (t.size() <= e - i && s.compare(e - t.size(), t.size(), t) == 0 &&
            (pick < 0 || t.size() > triggers[static_cast<size_t>(pick)].text.size()))
          pick = static_cast<int>(k);
      }
      if (pick < 0) continue;
      for (size_t j = e; j <= s.size(); ++j)
        if (std::regex_match(s.substr(e, j - e), rests[static_cast<size_t>(pick)]) && free_from(s, j)) return true;
      return false;
    }
    return true;  // no trigger: free text to the end
  };
  int accepted = 0, refused = 0;
  all_strings("ab<>x", 7, [&](const std::string& s) {
    const bool want = free_from(s, 0);
    EXPECT_EQ(dfa->matches(s), want) << "'" << s << "'";
    (want ? accepted : refused)++;
  });
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
  EXPECT_FALSE(ByteDfa::compile_triggered({{"<a", "(x"}}).is_ok());
  EXPECT_FALSE(ByteDfa::compile_triggered({{"", "x"}}).is_ok());
  EXPECT_FALSE(ByteDfa::compile_triggered({}).is_ok());
}

// Nesting bounds: 100,000 nested groups or quantifiers would overflow the stack of the recursive parser (a crash a
// request could cause); they are refused by name, and the deepest allowed nesting still compiles.
TEST(ByteDfa, DeepNestingIsRefusedNotACrash) {
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  auto d = ByteDfa::compile(deep);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("nested deeper than 1000"), std::string::npos) << d.status().message();
  auto q = ByteDfa::compile("a" + std::string(100000, '*'));
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("quantifiers on one atom"), std::string::npos) << q.status().message();
  auto ok = ByteDfa::compile(std::string(1000, '(') + "ab" + std::string(1000, ')') + std::string(64, '?'));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_TRUE(ok->matches("ab"));
  EXPECT_TRUE(ok->matches(""));
}

}  // namespace
}  // namespace ds
