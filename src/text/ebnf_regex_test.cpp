// EBNF grammars as regular expressions: the compiled automaton accepts exactly the grammar's strings on small
// alphabets (checked against a derivation enumerator over the same rules), recursion is unrolled to the bound and no
// further, and bad grammars get errors that name the problem and its line.
#include "text/ebnf_regex.h"

#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "text/all_strings_test_util.h"
#include "text/regex_dfa.h"

namespace ds {
namespace {

ByteDfa compile(const std::string& grammar, int max_recursion = 4) {
  auto re = ebnf_to_regex(grammar, max_recursion);
  EXPECT_TRUE(re.is_ok()) << re.status().message();
  auto dfa = ByteDfa::compile(re.is_ok() ? *re : "x");
  EXPECT_TRUE(dfa.is_ok()) << dfa.status().message();
  return std::move(dfa).value();
}

TEST(EbnfRegex, AlternativesClassesAndRepetitions) {
  ByteDfa yn = compile(R"G(root ::= "yes" | "no")G");
  EXPECT_TRUE(yn.matches("yes"));
  EXPECT_TRUE(yn.matches("no"));
  EXPECT_FALSE(yn.matches("yesno"));
  EXPECT_FALSE(yn.matches(""));

  // Over a small alphabet, every string up to length 6 against a hand-written membership test.
  ByteDfa g = compile(R"G(
# a comment, then a rule over two lines
root ::= word ("-" word)?
         "!"*
word ::= [a-b]{1,2} [^a-z!-]?   # one or two of a, b, then maybe one character that is neither
)G");
  auto in_word = [](const std::string& w) {
    size_t n = 0;
    while (n < w.size() && n < 2 && (w[n] == 'a' || w[n] == 'b')) ++n;
    if (n == 0) return false;
    if (n == w.size()) return true;
    const char c = w[n];
    return n + 1 == w.size() && !(c >= 'a' && c <= 'z') && c != '!' && c != '-';
  };
  auto in_lang = [&](const std::string& s) {
    size_t end = s.size();
    while (end > 0 && s[end - 1] == '!') --end;
    const std::string body = s.substr(0, end);
    if (in_word(body)) return true;
    for (size_t k = 0; k < body.size(); ++k)
      if (body[k] == '-' && in_word(body.substr(0, k)) && in_word(body.substr(k + 1))) return true;
    return false;
  };
  int accepted = 0;
  all_strings("ab1-!c", 6, [&](const std::string& s) {
    EXPECT_EQ(g.matches(s), in_lang(s)) << "'" << s << "'";
    accepted += in_lang(s);
  });
  EXPECT_GT(accepted, 50);
}

TEST(EbnfRegex, RecursionIsUnrolledToTheBound) {
  // Balanced parentheses around one x: depth d needs root inside itself d times.
  for (int bound : {0, 2, 4}) {
    ByteDfa g = compile(R"G(root ::= "(" root ")" | "x")G", bound);
    for (int d = 0; d <= 6; ++d) {
      const std::string s = std::string(d, '(') + "x" + std::string(d, ')');
      EXPECT_EQ(g.matches(s), d <= bound) << bound << " " << s;
    }
    EXPECT_FALSE(g.matches("(x"));
    EXPECT_FALSE(g.matches("((x)"));
  }
  // Mutual recursion (a JSON-like list): up to length 9, accepted = well nested with at most three values on a path
  // (value inside itself twice).
  ByteDfa list = compile(R"G(
root ::= value
value ::= "1" | list
list ::= "[" ( value ( "," value )* )? "]"
)G", 2);
  // How many `value`s nest on the deepest path ("1" and "[]" one, "[1]" and "[[]]" two); -1: not a value.
  std::function<int(const std::string&, size_t&)> depth_of;
  depth_of = [&](const std::string& s, size_t& i) -> int {
    if (i < s.size() && s[i] == '1') return ++i, 1;
    if (i >= s.size() || s[i] != '[') return -1;
    ++i;
    int d = 0;
    if (i < s.size() && s[i] == ']') return ++i, 1;
    for (;;) {
      const int v = depth_of(s, i);
      if (v < 0) return -1;
      d = std::max(d, v);
      if (i < s.size() && s[i] == ',') { ++i; continue; }
      if (i < s.size() && s[i] == ']') return ++i, d + 1;
      return -1;
    }
  };
  int accepted = 0;
  all_strings("1[],", 9, [&](const std::string& s) {
    size_t i = 0;
    const int d = depth_of(s, i);
    const bool ok = d >= 0 && i == s.size() && d <= 3;  // value inside itself at most twice: three levels
    EXPECT_EQ(list.matches(s), ok) << "'" << s << "'";
    accepted += ok;
  });
  EXPECT_GT(accepted, 30);
}

TEST(EbnfRegex, EscapesAndUnicode) {
  ByteDfa g = compile(R"G(root ::= "a\n\t\"\\" [\u00e9-\u00ea] "日本" [\x30-\x31]+ [^\U0001F600])G");
  EXPECT_TRUE(g.matches("a\n\t\"\\é日本01z"));
  EXPECT_TRUE(g.matches("a\n\t\"\\ê日本1\xF0\x9F\x98\x81"));  // U+1F601
  EXPECT_FALSE(g.matches("a\n\t\"\\ë日本1z"));
  EXPECT_FALSE(g.matches("a\n\t\"\\é日本1\xF0\x9F\x98\x80"));  // U+1F600 excluded
  // Regex metacharacters inside strings are literals.
  ByteDfa meta = compile(R"G(root ::= "a.b*(c)|[d]{2}?$^+")G");
  EXPECT_TRUE(meta.matches("a.b*(c)|[d]{2}?$^+"));
  EXPECT_FALSE(meta.matches("axb"));
}

TEST(EbnfRegex, BadGrammarsNameTheProblem) {
  const std::pair<const char*, const char*> bad[] = {
      {"root ::= item", "rule 'item' is not defined"},
      {"root ::= \"a\"\nother ::= missing", "line 2: rule 'missing' is not defined"},
      {"start ::= \"a\"", "no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"abc", "unterminated string"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root \"a\"", "expected '::='"},
      {"root ::= \"a\" @", "unexpected character '@'"},
      {"root ::= \"\\q\"", "unsupported escape"},
      {"root ::= [z-a]", "out of order"},
      {"root ::= \"a\"{3,2}", "is empty"},
      {"root ::= \"a\" root", "admits no text"},
      {"root ::= []", "admits no text"},
      {"", "no rules"},
      {"root ::= \"\\x", "bad hex escape"},
      {"root ::= \"a\"{99999999}", "above 10000"},
  };
  for (const auto& [g, want] : bad) {
    auto r = ebnf_to_regex(g);
    ASSERT_FALSE(r.is_ok()) << g;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << g << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find("ebnf"), std::string::npos) << r.status().message();
  }
  // A class of no character left is the regex's to refuse.
  auto none = ebnf_to_regex("root ::= [^\\x00-\\U0010FFFF]");
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  auto none_dfa = ByteDfa::compile(*none);
  ASSERT_FALSE(none_dfa.is_ok());
  EXPECT_NE(none_dfa.status().message().find("matches no string"), std::string::npos) << none_dfa.status().message();
  // Unrolled too far: the size cap answers, naming the cause.
  auto big = ebnf_to_regex(R"G(root ::= v
v ::= "1" | "[" v "," v "," v "," v "]")G", 30, 1 << 16);
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("unrolled"), std::string::npos) << big.status().message();
}

TEST(EbnfRegex, AJsonGrammarCompiles) {
  const char* json = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array  ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
)G";
  ByteDfa g = compile(json, 3);
  EXPECT_TRUE(g.matches(R"G({"a":[1,2.5,{"b":null}],"c":"x\"y","d":true})G"));
  EXPECT_TRUE(g.matches("{}"));
  EXPECT_FALSE(g.matches(R"G({"a":})G"));
  EXPECT_FALSE(g.matches(R"G([1])G"));  // root is an object
  EXPECT_FALSE(g.matches(R"G({"a":01})G"));
}

// Nesting bounds (the parser and emitter recurse once a level): deep groups, stacked quantifiers and long rule chains
// are refused by name instead of overflowing the stack.
TEST(EbnfRegex, DeepNestingIsRefusedNotACrash) {
  auto groups = ebnf_to_regex("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')'));
  ASSERT_FALSE(groups.is_ok());
  EXPECT_NE(groups.status().message().find("nested deeper than 500"), std::string::npos) << groups.status().message();
  auto quants = ebnf_to_regex("root ::= \"a\"" + std::string(100000, '?'));
  ASSERT_FALSE(quants.is_ok());
  EXPECT_NE(quants.status().message().find("quantifiers on one item"), std::string::npos) << quants.status().message();
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 5000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r5000 ::= \"x\"\n";
  auto deep = ebnf_to_regex(chain);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("nest deeper than"), std::string::npos) << deep.status().message();
  std::string short_chain = "root ::= r0\n";
  for (int i = 0; i < 100; ++i) short_chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  short_chain += "r100 ::= \"x\"\n";
  EXPECT_TRUE(compile(short_chain).matches("x"));
}

}  // namespace
}  // namespace ds
