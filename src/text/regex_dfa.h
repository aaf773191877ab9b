// ByteDfa: a regular expression compiled to a deterministic automaton over UTF-8 bytes that matches whole strings,
// for constrained decoding (SGLang's `regex` sampling parameter, and the regexes JSON schemas become). The syntax
// is Python re's core: literals, escapes (\d \w \s and their negations as ASCII classes, \n \t \r \f \v, \xHH,
// \uHHHH, escaped punctuation), classes [a-z] [^...], `.` (any character but \n), groups ( ) (?: ), alternation,
// and the quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same strings). Anchors ^ and $ at the ends are
// accepted and ignored (the whole string is matched). Characters are Unicode code points, matched as their UTF-8
// byte sequences.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ds {

class ByteDfa {
 public:
  // An error names the problem and its offset in the pattern (or that the automaton outgrew max_states).
  static Result<ByteDfa> compile(std::string_view pattern, int max_states = 20000);

  // Free text in which every occurrence of a trigger goes on with that trigger's `rest` (a pattern) before free text
  // resumes (SGLang's structural_tag: a trigger opens one of its structures). The text may end anywhere in free
  // text, never inside a rest. Where triggers overlap, the first to end is taken (the longest of those ending
  // together). Errors name the trigger whose rest does not compile.
  struct Trigger {
    std::string text;
    std::string rest;
  };
  static Result<ByteDfa> compile_triggered(const std::vector<Trigger>& triggers, int max_states = 20000);

  static constexpr int kDead = -1;
  int start() const { return 0; }
  // The state after byte b from s; kDead when no match can continue (dead ends are pruned: every live state can
  // still reach an accepting one).
  int next(int s, uint8_t b) const { return trans_[static_cast<size_t>(s) * 256 + b]; }
  bool accepting(int s) const { return accept_[static_cast<size_t>(s)] != 0; }
  // Whether any byte leads on from s (an accepting state without one is complete).
  bool has_next(int s) const { return has_next_[static_cast<size_t>(s)] != 0; }
  int num_states() const { return static_cast<int>(accept_.size()); }
  // The state after `bytes` from s (kDead when it leaves the language's prefixes).
  int walk(int s, std::string_view bytes) const;
  bool matches(std::string_view text) const;

  struct Nfa;  // the construction's automaton (regex_dfa.cpp)

 private:
  static Result<ByteDfa> determinize(const Nfa& nfa, int start, int accept, int max_states);

  std::vector<int32_t> trans_;   // [states * 256]
  std::vector<uint8_t> accept_;  // [states]
  std::vector<uint8_t> has_next_;
};

}  // namespace ds
