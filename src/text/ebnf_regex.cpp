// EBNF (GBNF) grammars to regular expressions (ebnf_regex.h): a parser into a small expression tree per rule, then
// an emitter that inlines rule references, unrolling recursion to a bounded depth and pruning what cannot match.
#include "text/ebnf_regex.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "text/json_schema_regex.h"
#include "text/unicode.h"

namespace ds {
namespace {

// Parsing and emitting recurse once a nesting level: bounds that keep a hostile grammar off the stack's end.
constexpr int kMaxGroupDepth = 500;
constexpr int kMaxStackedQuantifiers = 64;
constexpr int kMaxEmitDepth = 1000;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

struct Expr {
  enum Kind { kLiteral, kClass, kRef, kSeq, kAlt, kRepeat } kind = kSeq;
  std::string text;  // kLiteral: the UTF-8 string; kRef: the rule name
  Ranges ranges;     // kClass: code point ranges, as written
  bool negate = false;  // kClass: [^...]
  std::vector<Expr> kids;
  int min = 0, max = -1;  // kRepeat: bounds (-1: unbounded)
  int line = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view g) : g_(g) {}

  Status parse(std::map<std::string, std::pair<Expr, int>>* rules) {
    skip_space();
    while (!at_end()) {
      const int line = line_;
      std::string name = identifier();
      if (name.empty()) return fail("expected a rule name");
      skip_space();
      if (g_.substr(i_, 3) != "::=") return fail("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      Expr body;
      DS_RETURN_IF_ERROR(alternatives(&body));
      if (rules->count(name)) return fail("rule '" + name + "' is defined twice (first on line " +
                                          std::to_string(rules->at(name).second) + ")", line);
      rules->emplace(name, std::make_pair(std::move(body), line));
      skip_space();
    }
    if (rules->empty()) return fail("the grammar has no rules");
    return Status::ok();
  }

 private:
  bool at_end() const { return i_ >= g_.size(); }
  Status fail(const std::string& what, int line = -1) const {
    return error("ebnf: line ", line >= 0 ? line : line_, ": ", what);
  }
  void skip_space() {
    while (!at_end()) {
      const char c = g_[i_];
      if (c == '#') {
        while (!at_end() && g_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') ++line_;
        ++i_;
      } else {
        break;
      }
    }
  }
  static bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }
  std::string identifier() {
    if (at_end() || !name_start(g_[i_])) return "";
    const size_t b = i_;
    while (!at_end() && name_char(g_[i_])) ++i_;
    return std::string(g_.substr(b, i_ - b));
  }
  // Whether the text at i_ starts the next rule (`name ::=`).
  bool next_rule_starts() const {
    size_t j = i_;
    if (j >= g_.size() || !name_start(g_[j])) return false;
    while (j < g_.size() && name_char(g_[j])) ++j;
    while (j < g_.size() && (g_[j] == ' ' || g_[j] == '\t')) ++j;
    return g_.substr(j, 3) == "::=";
  }

  Status alternatives(Expr* out) {
    out->kind = Expr::kAlt;
    out->line = line_;
    for (;;) {
      Expr seq;
      DS_RETURN_IF_ERROR(sequence(&seq));
      out->kids.push_back(std::move(seq));
      skip_space();
      if (at_end() || g_[i_] != '|') break;
      ++i_;
    }
    return Status::ok();
  }

  Status sequence(Expr* out) {
    out->kind = Expr::kSeq;
    out->line = line_;
    for (;;) {
      skip_space();
      if (at_end() || g_[i_] == '|' || g_[i_] == ')' || next_rule_starts()) return Status::ok();
      Expr item;
      DS_RETURN_IF_ERROR(primary(&item));
      DS_RETURN_IF_ERROR(quantifiers(&item));
      out->kids.push_back(std::move(item));
    }
  }

  Status quantifiers(Expr* item) {
    for (int stacked = 0;; ++stacked) {
      if (at_end()) return Status::ok();
      if (stacked == kMaxStackedQuantifiers)
        return fail("more than " + std::to_string(kMaxStackedQuantifiers) + " quantifiers on one item");
      const char c = g_[i_];
      int lo = 0, hi = -1;
      if (c == '*' || c == '+' || c == '?') {
        ++i_;
        lo = c == '+' ? 1 : 0;
        hi = c == '?' ? 1 : -1;
      } else if (c == '{') {
        ++i_;
        DS_RETURN_IF_ERROR(number(&lo));
        hi = lo;
        if (!at_end() && g_[i_] == ',') {
          ++i_;
          hi = -1;
          if (!at_end() && g_[i_] != '}') DS_RETURN_IF_ERROR(number(&hi));
        }
        if (at_end() || g_[i_] != '}') return fail("expected '}' closing a repetition");
        ++i_;
        if (hi >= 0 && hi < lo) return fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} is empty");
      } else {
        return Status::ok();
      }
      Expr rep;
      rep.kind = Expr::kRepeat;
      rep.min = lo;
      rep.max = hi;
      rep.line = line_;
      rep.kids.push_back(std::move(*item));
      *item = std::move(rep);
    }
  }

  Status number(int* out) {
    const size_t b = i_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(g_[i_])) && i_ - b < 6) ++i_;
    if (i_ == b) return fail("expected a number in a repetition");
    *out = std::stoi(std::string(g_.substr(b, i_ - b)));
    if (*out > 10000) return fail("repetition bound " + std::to_string(*out) + " is above 10000");
    return Status::ok();
  }

  Status primary(Expr* out) {
    out->line = line_;
    const char c = g_[i_];
    if (c == '"') {
      out->kind = Expr::kLiteral;
      ++i_;
      while (!at_end() && g_[i_] != '"') {
        if (g_[i_] == '\n') return fail("newline inside a string");
        uint32_t cp = 0;
        DS_RETURN_IF_ERROR(character(&cp));
        append_utf8(&out->text, cp);
      }
      if (at_end()) return fail("unterminated string");
      ++i_;
      return Status::ok();
    }
    if (c == '[') {
      out->kind = Expr::kClass;
      ++i_;
      bool negate = false;
      if (!at_end() && g_[i_] == '^') negate = true, ++i_;
      Ranges r;
      while (!at_end() && g_[i_] != ']') {
        if (g_[i_] == '\n') return fail("newline inside a character class");
        uint32_t lo = 0, hi = 0;
        DS_RETURN_IF_ERROR(character(&lo));
        hi = lo;
        if (i_ + 1 < g_.size() && g_[i_] == '-' && g_[i_ + 1] != ']') {
          ++i_;
          DS_RETURN_IF_ERROR(character(&hi));
          if (hi < lo) return fail("character class range out of order");
        }
        r.emplace_back(lo, hi);
      }
      if (at_end()) return fail("unterminated character class");
      ++i_;
      out->ranges = std::move(r);
      out->negate = negate;
      return Status::ok();
    }
    if (c == '(') {
      if (depth_ >= kMaxGroupDepth) return fail("groups nested deeper than " + std::to_string(kMaxGroupDepth));
      ++i_;
      ++depth_;
      DS_RETURN_IF_ERROR(alternatives(out));
      --depth_;
      skip_space();
      if (at_end() || g_[i_] != ')') return fail("expected ')'");
      ++i_;
      return Status::ok();
    }
    if (name_start(c)) {
      out->kind = Expr::kRef;
      out->text = identifier();
      return Status::ok();
    }
    return fail(std::string("unexpected character '") + c + "'");
  }

  // One character of a string or class: an escape or a UTF-8 sequence.
  Status character(uint32_t* cp) {
    if (g_[i_] == '\\') {
      ++i_;
      if (at_end()) return fail("trailing backslash");
      const char e = g_[i_++];
      switch (e) {
        case 'n': *cp = '\n'; return Status::ok();
        case 't': *cp = '\t'; return Status::ok();
        case 'r': *cp = '\r'; return Status::ok();
        case '0': *cp = 0; return Status::ok();
        case 'x': return hex(2, cp);
        case 'u': return hex(4, cp);
        case 'U': return hex(8, cp);
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^':
          *cp = static_cast<uint32_t>(e);
          return Status::ok();
        default: return fail(std::string("unsupported escape \\") + e);
      }
    }
    const int n = utf8_sequence_length(g_, i_, cp);
    if (n == 0) return fail("invalid UTF-8");
    i_ += static_cast<size_t>(n);
    return Status::ok();
  }

  Status hex(int digits, uint32_t* cp) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(g_[i_]))) return fail("bad hex escape");
      const char h = g_[i_];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    if (v > kMaxCodePoint) return fail("escape past U+10FFFF");
    *cp = v;
    return Status::ok();
  }

  std::string_view g_;
  size_t i_ = 0;
  int line_ = 1;
  int depth_ = 0;  // groups open at i_
};

class Emitter {
 public:
  Emitter(const std::map<std::string, std::pair<Expr, int>>& rules, int max_recursion, size_t max_bytes)
      : rules_(rules), max_recursion_(max_recursion), max_bytes_(max_bytes) {}

  // The regex of `e`, or nullopt when it admits nothing within the recursion bound.
  Result<std::optional<std::string>> emit(const Expr& e) {
    if (++emitted_ > 4'000'000) return error("ebnf: the grammar is too large once its recursion is unrolled");
    if (nesting_ >= kMaxEmitDepth)
      return error("ebnf: rules and groups nest deeper than ", kMaxEmitDepth, " levels once recursion is unrolled");
    ++nesting_;
    auto r = emit_at(e);
    --nesting_;
    return r;
  }

 private:
  Result<std::optional<std::string>> emit_at(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral: return std::optional<std::string>(escape_literal(e.text));
      case Expr::kClass: {
        if (e.ranges.empty()) {  // [] admits nothing, [^] any character
          if (!e.negate) return std::optional<std::string>();
          return std::optional<std::string>("[\\x00-\\U0010FFFF]");
        }
        std::string s = e.negate ? "[^" : "[";
        char buf[32];
        for (const auto& [lo, hi] : e.ranges) {
          std::snprintf(buf, sizeof buf, lo == hi ? "\\U%08X" : "\\U%08X-\\U%08X", lo, hi);
          s += buf;
        }
        return std::optional<std::string>(s + "]");
      }
      case Expr::kRef: {
        auto it = rules_.find(e.text);
        if (it == rules_.end())
          return error("ebnf: line ", e.line, ": rule '", e.text, "' is not defined");
        int& depth = depth_[e.text];
        if (depth > max_recursion_) return std::optional<std::string>();  // nested too deep: not generated
        ++depth;
        auto inner = emit(it->second.first);
        --depth;
        if (!inner) return inner.status();
        if (!*inner) return inner;
        return std::optional<std::string>("(?:" + **inner + ")");
      }
      case Expr::kSeq: {
        std::string s;
        for (const Expr& k : e.kids) {
          DS_ASSIGN_OR_RETURN(std::optional<std::string> part, emit(k));
          if (!part) return part;
          s += *part;
          if (s.size() > max_bytes_) return too_large();
        }
        return std::optional<std::string>(std::move(s));
      }
      case Expr::kAlt: {
        std::vector<std::string> parts;
        size_t bytes = 0;
        for (const Expr& k : e.kids) {
          DS_ASSIGN_OR_RETURN(std::optional<std::string> part, emit(k));
          if (!part) continue;
          bytes += part->size() + 1;
          if (bytes > max_bytes_) return too_large();
          if (std::find(parts.begin(), parts.end(), *part) == parts.end()) parts.push_back(std::move(*part));
        }
        if (parts.empty()) return std::optional<std::string>();
        if (parts.size() == 1) return std::optional<std::string>(std::move(parts[0]));
        std::string s = "(?:";
        for (size_t k = 0; k < parts.size(); ++k) s += (k ? "|" : "") + parts[k];
        return std::optional<std::string>(s + ")");
      }
      case Expr::kRepeat: {
        DS_ASSIGN_OR_RETURN(std::optional<std::string> inner, emit(e.kids[0]));
        if (!inner) return e.min == 0 ? std::optional<std::string>("") : std::optional<std::string>();
        if (inner->empty()) return inner;
        std::string q = e.min == 0 && e.max == -1 ? "*"
                        : e.min == 1 && e.max == -1 ? "+"
                        : e.min == 0 && e.max == 1  ? "?"
                        : e.max == -1 ? "{" + std::to_string(e.min) + ",}"
                        : e.min == e.max ? "{" + std::to_string(e.min) + "}"
                                         : "{" + std::to_string(e.min) + "," + std::to_string(e.max) + "}";
        return std::optional<std::string>("(?:" + *inner + ")" + q);
      }
    }
    return std::optional<std::string>();
  }

  Status too_large() const {
    return error("ebnf: the grammar's regular form exceeds ", max_bytes_,
                 " bytes once its recursion is unrolled (nest fewer recursive rules)");
  }
  static std::string escape_literal(const std::string& text) {
    std::string out;
    char buf[8];
    for (char c : text) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7F) {
        std::snprintf(buf, sizeof buf, "\\x%02X", u);
        out += buf;
      } else {
        out += regex_escape(std::string(1, c));
      }
    }
    return out;
  }

  const std::map<std::string, std::pair<Expr, int>>& rules_;
  const int max_recursion_;
  const size_t max_bytes_;
  std::map<std::string, int> depth_;  // expansions of each rule on the current path
  size_t emitted_ = 0;
  int nesting_ = 0;  // emit calls on the current path
};

}  // namespace

Result<std::string> ebnf_to_regex(std::string_view grammar, int max_recursion, size_t max_regex_bytes) {
  std::map<std::string, std::pair<Expr, int>> rules;
  DS_RETURN_IF_ERROR(Parser(grammar).parse(&rules));
  if (!rules.count("root")) return error("ebnf: the grammar has no 'root' rule (generation starts there)");
  Emitter em(rules, max_recursion, max_regex_bytes);
  // Every rule's references must exist, reachable from root or not (a typo is an error, not a dead branch).
  for (const auto& [name, body] : rules) {
    std::vector<const Expr*> todo = {&body.first};
    while (!todo.empty()) {
      const Expr* e = todo.back();
      todo.pop_back();
      if (e->kind == Expr::kRef && !rules.count(e->text))
        return error("ebnf: line ", e->line, ": rule '", e->text, "' is not defined");
      for (const Expr& k : e->kids) todo.push_back(&k);
    }
  }
  Expr root;
  root.kind = Expr::kRef;
  root.text = "root";
  DS_ASSIGN_OR_RETURN(std::optional<std::string> re, em.emit(root));
  if (!re) return error("ebnf: 'root' admits no text within ", max_recursion, " levels of recursion");
  return *re;
}

}  // namespace ds
