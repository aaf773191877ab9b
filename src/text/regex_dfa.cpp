// Regex -> syntax tree (recursive descent) -> Thompson NFA over bytes (code point sets split into UTF-8 byte range
// sequences) -> DFA by subset construction over byte classes -> dead states pruned.
#include "text/regex_dfa.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <memory>

#include "text/unicode.h"

namespace ds {
namespace {

constexpr int kMaxNfaStates = 200000;
// Groups inside groups, and quantifiers on one atom: the parser, the NFA construction and the tree's destruction
// recurse once a level, so a hostile pattern ("(((...a...)))" 100,000 deep) would overflow the stack.
constexpr int kMaxGroupDepth = 1000;
constexpr int kMaxStackedQuantifiers = 64;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code point ranges, inclusive

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  }
  return out;
}

// Everything but r (and the UTF-16 surrogates, which UTF-8 cannot carry).
Ranges complement(const Ranges& r) {
  Ranges n = normalize(r), out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : n) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  Ranges cut;
  for (const auto& [lo, hi] : out) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      cut.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) cut.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) cut.emplace_back(0xE000, hi);
  }
  return cut;
}

struct Node {
  enum Kind { kSet, kConcat, kAlt, kRepeat } kind = kConcat;
  Ranges set;
  std::vector<std::unique_ptr<Node>> kids;
  int min = 0, max = 0;  // kRepeat: max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Result<NodePtr> parse() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    NodePtr n = alt();
    if (!err_.empty()) return error(err_);
    if (i_ < p_.size()) return error("regex: unexpected '", p_[i_], "' at offset ", i_);
    return n;
  }

 private:
  void fail(const std::string& what) {
    if (err_.empty()) err_ = "regex: " + what + " at offset " + std::to_string(i_);
  }
  bool at_end() const { return i_ >= p_.size(); }

  NodePtr alt() {
    NodePtr first = concat();
    if (at_end() || p_[i_] != '|') return first;
    NodePtr a = make(Node::kAlt);
    a->kids.push_back(std::move(first));
    while (!at_end() && p_[i_] == '|' && err_.empty()) {
      ++i_;
      a->kids.push_back(concat());
    }
    return a;
  }

  NodePtr concat() {
    NodePtr c = make(Node::kConcat);
    while (!at_end() && p_[i_] != '|' && p_[i_] != ')' && err_.empty()) {
      if (p_[i_] == '$' && i_ + 1 == p_.size()) {  // the end anchor: whole-string matching anyway
        ++i_;
        break;
      }
      NodePtr a = atom();
      if (!err_.empty()) break;
      c->kids.push_back(quantified(std::move(a)));
    }
    return c;
  }

  NodePtr quantified(NodePtr a) {
    int stacked = 0;
    while (!at_end() && err_.empty()) {
      const char q = p_[i_];
      int mn = 0, mx = 0;
      if (q == '*') {
        mn = 0, mx = -1, ++i_;
      } else if (q == '+') {
        mn = 1, mx = -1, ++i_;
      } else if (q == '?') {
        mn = 0, mx = 1, ++i_;
      } else if (q == '{' && braces(&mn, &mx)) {
      } else {
        break;
      }
      if (!at_end() && (p_[i_] == '?' || p_[i_] == '+')) ++i_;  // lazy / possessive: the same strings
      if (++stacked > kMaxStackedQuantifiers) {
        fail("more than " + std::to_string(kMaxStackedQuantifiers) + " quantifiers on one atom");
        break;
      }
      NodePtr r = make(Node::kRepeat);
      r->min = mn;
      r->max = mx;
      r->kids.push_back(std::move(a));
      a = std::move(r);
    }
    return a;
  }

  // {m}, {m,}, {m,n}; anything else is a literal '{' (as Python reads it).
  bool braces(int* mn, int* mx) {
    size_t j = i_ + 1;
    auto number = [&](int* out) {
      const size_t s = j;
      long v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && j - s < 6) v = v * 10 + (p_[j++] - '0');
      *out = static_cast<int>(v);
      return j > s;
    };
    int a = 0, b = 0;
    const bool has_a = number(&a);
    if (j < p_.size() && p_[j] == '}') {
      if (!has_a) return false;
      i_ = j + 1;
      *mn = *mx = a;
      if (a > 10000) fail("repeat count over 10000");
      return true;
    }
    if (j >= p_.size() || p_[j] != ',') return false;
    ++j;
    const bool has_b = number(&b);
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    *mn = has_a ? a : 0;
    *mx = has_b ? b : -1;
    if (has_b && b < *mn) fail("repeat {" + std::to_string(*mn) + "," + std::to_string(b) + "} with max < min");
    if (*mn > 10000 || *mx > 10000) fail("repeat count over 10000");
    return true;
  }

  // One UTF-8 character of the pattern as a code point.
  uint32_t literal_char() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > p_.size()) {
      fail("invalid UTF-8");
      ++i_;
      return 0;
    }
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + k]) & 0x3F);
    i_ += static_cast<size_t>(n);
    return cp;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) {
        fail("bad hex escape");
        return 0;
      }
      const char h = p_[i_];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After a backslash: a class (\d ...) into *set and true, or one character into *cp and false.
  bool escape(Ranges* set, uint32_t* cp) {
    if (at_end()) {
      fail("trailing backslash");
      return false;
    }
    const char e = p_[i_++];
    static const Ranges digit = {{'0', '9'}};
    static const Ranges word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const Ranges space = {{'\t', '\r'}, {' ', ' '}};
    switch (e) {
      case 'd': *set = digit; return true;
      case 'D': *set = complement(digit); return true;
      case 'w': *set = word; return true;
      case 'W': *set = complement(word); return true;
      case 's': *set = space; return true;
      case 'S': *set = complement(space); return true;
      case 'n': *cp = '\n'; return false;
      case 't': *cp = '\t'; return false;
      case 'r': *cp = '\r'; return false;
      case 'f': *cp = '\f'; return false;
      case 'v': *cp = '\v'; return false;
      case '0': *cp = 0; return false;
      case 'x': *cp = hex(2); return false;
      case 'u': *cp = hex(4); return false;
      case 'U': *cp = hex(8); return false;
      default:
        if (std::isalnum(static_cast<unsigned char>(e))) {
          --i_;
          fail(std::string("unsupported escape \\") + e);
          ++i_;
          return false;
        }
        --i_;
        *cp = literal_char();  // escaped punctuation (or any other character): itself
        return false;
    }
  }

  NodePtr set_node(Ranges r) {
    NodePtr n = make(Node::kSet);
    n->set = normalize(std::move(r));
    return n;
  }

  NodePtr atom() {
    const char c = p_[i_];
    if (c == '(') {
      if (depth_ >= kMaxGroupDepth) {
        fail("groups nested deeper than " + std::to_string(kMaxGroupDepth));
        return nullptr;
      }
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (!at_end() && p_[i_] == '?') {
        fail("unsupported group syntax (?");
        return nullptr;
      }
      ++depth_;
      NodePtr inner = alt();
      --depth_;
      if (at_end() || p_[i_] != ')') {
        fail("missing )");
        return nullptr;
      }
      ++i_;
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return set_node(complement({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?') {
      fail(std::string("nothing to repeat before '") + c + "'");
      return nullptr;
    }
    if (c == '\\') {
      ++i_;
      Ranges set;
      uint32_t cp = 0;
      if (escape(&set, &cp)) return set_node(std::move(set));
      return set_node({{cp, cp}});
    }
    const uint32_t cp = literal_char();
    return set_node({{cp, cp}});
  }

  NodePtr char_class() {
    ++i_;  // [
    bool negate = false;
    if (!at_end() && p_[i_] == '^') negate = true, ++i_;
    Ranges r;
    bool first = true;
    while (!at_end() && (p_[i_] != ']' || first) && err_.empty()) {
      first = false;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        Ranges set;
        if (escape(&set, &lo)) {
          r.insert(r.end(), set.begin(), set.end());
          continue;
        }
      } else {
        lo = literal_char();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          Ranges set;
          if (escape(&set, &hi)) {
            fail("a class escape cannot end a range");
            return nullptr;
          }
        } else {
          hi = literal_char();
        }
        if (hi < lo) {
          fail("class range out of order");
          return nullptr;
        }
      }
      r.emplace_back(lo, hi);
    }
    if (at_end()) {
      fail("missing ]");
      return nullptr;
    }
    ++i_;  // ]
    return set_node(negate ? complement(r) : r);
  }

  std::string_view p_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open at i_
  std::string err_;
};

// ---- NFA ----

}  // namespace

struct ByteDfa::Nfa {
  struct Edge {
    uint8_t lo, hi;
    int to;
  };
  std::vector<std::vector<int>> eps;
  std::vector<std::vector<Edge>> edges;
  bool overflow = false;

  int add() {
    if (static_cast<int>(eps.size()) >= kMaxNfaStates) overflow = true;
    eps.emplace_back();
    edges.emplace_back();
    return static_cast<int>(eps.size()) - 1;
  }
};

namespace {

using Nfa = ByteDfa::Nfa;

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode_utf8(uint32_t cp, uint8_t* out) {
  const int n = utf8_len(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  for (int k = n - 1; k > 0; --k, cp >>= 6) out[k] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>((0xF00 >> n) | cp);
}

// Splits [lo, hi] into ranges whose UTF-8 forms are byte-wise ranges, adding a path start -> end for each.
void add_utf8_range(Nfa& nfa, int start, int end, uint32_t lo, uint32_t hi) {
  static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t b : bounds)
    if (lo <= b && hi > b) {
      add_utf8_range(nfa, start, end, lo, b);
      add_utf8_range(nfa, start, end, b + 1, hi);
      return;
    }
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        add_utf8_range(nfa, start, end, lo, lo | m);
        add_utf8_range(nfa, start, end, (lo | m) + 1, hi);
        return;
      }
      if ((hi & m) != m) {
        add_utf8_range(nfa, start, end, lo, (hi & ~m) - 1);
        add_utf8_range(nfa, start, end, hi & ~m, hi);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode_utf8(lo, a);
  encode_utf8(hi, b);
  int from = start;
  for (int k = 0; k < n; ++k) {
    const int to = k + 1 == n ? end : nfa.add();
    nfa.edges[static_cast<size_t>(from)].push_back({a[k], b[k], to});
    from = to;
  }
}

// The fragment for n from `start`; returns its end state.
int build(Nfa& nfa, const Node& n, int start) {
  if (nfa.overflow) return start;
  switch (n.kind) {
    case Node::kSet: {
      const int end = nfa.add();
      for (const auto& [lo, hi] : n.set) add_utf8_range(nfa, start, end, lo, hi);
      return end;
    }
    case Node::kConcat: {
      int at = start;
      for (const auto& k : n.kids) at = build(nfa, *k, at);
      return at;
    }
    case Node::kAlt: {
      const int end = nfa.add();
      for (const auto& k : n.kids) {
        const int s = nfa.add();
        nfa.eps[static_cast<size_t>(start)].push_back(s);
        const int e = build(nfa, *k, s);
        nfa.eps[static_cast<size_t>(e)].push_back(end);
      }
      return end;
    }
    case Node::kRepeat: {
      const Node& k = *n.kids[0];
      int at = start;
      for (int i = 0; i < n.min && !nfa.overflow; ++i) at = build(nfa, k, at);
      if (n.max < 0) {  // at -> loop -> (k -> loop)* -> end, loop and end fresh states
        // A loop through `at` itself would share it with what the enclosing pattern hangs on `at` (the skip of an
        // enclosing '?': "(b*c)?" matching "b") or on the returned end (a following loop: "x*y*" matching "yx").
        const int loop = nfa.add();
        nfa.eps[static_cast<size_t>(at)].push_back(loop);
        const int s = nfa.add();
        nfa.eps[static_cast<size_t>(loop)].push_back(s);
        const int e = build(nfa, k, s);
        nfa.eps[static_cast<size_t>(e)].push_back(loop);
        const int end = nfa.add();
        nfa.eps[static_cast<size_t>(loop)].push_back(end);
        return end;
      }
      const int end = nfa.add();
      nfa.eps[static_cast<size_t>(at)].push_back(end);
      for (int i = n.min; i < n.max && !nfa.overflow; ++i) {
        at = build(nfa, k, at);
        nfa.eps[static_cast<size_t>(at)].push_back(end);
      }
      return end;
    }
  }
  return start;
}

void closure(const Nfa& nfa, std::vector<int>& set, std::vector<uint32_t>& mark, uint32_t stamp) {
  std::vector<int> stack(set.begin(), set.end());
  for (int s : set) mark[static_cast<size_t>(s)] = stamp;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int t : nfa.eps[static_cast<size_t>(s)])
      if (mark[static_cast<size_t>(t)] != stamp) {
        mark[static_cast<size_t>(t)] = stamp;
        set.push_back(t);
        stack.push_back(t);
      }
  }
  std::sort(set.begin(), set.end());
}

}  // namespace

Result<ByteDfa> ByteDfa::compile(std::string_view pattern, int max_states) {
  Parser parser(pattern);
  DS_ASSIGN_OR_RETURN(NodePtr root, parser.parse());
  Nfa nfa;
  const int start = nfa.add();
  const int accept = build(nfa, *root, start);
  return determinize(nfa, start, accept, max_states);
}

Result<ByteDfa> ByteDfa::compile_triggered(const std::vector<Trigger>& triggers, int max_states) {
  if (triggers.empty()) return error("structural tag: no triggers");
  // The triggers' Aho-Corasick automaton over bytes: trie nodes, their failure links, and for each node the first
  // trigger (in the given order) that ends there or at a suffix of it (-1: none).
  std::vector<std::array<int, 256>> go(1);
  go[0].fill(-1);
  std::vector<int> ends(1, -1);
  for (size_t k = 0; k < triggers.size(); ++k) {
    const std::string& t = triggers[k].text;
    if (t.empty()) return error("structural tag: an empty trigger");
    int u = 0;
    for (char c : t) {
      const uint8_t b = static_cast<uint8_t>(c);
      if (go[static_cast<size_t>(u)][b] < 0) {
        go[static_cast<size_t>(u)][b] = static_cast<int>(go.size());
        go.emplace_back().fill(-1);
        ends.push_back(-1);
      }
      u = go[static_cast<size_t>(u)][b];
    }
    if (ends[static_cast<size_t>(u)] < 0) ends[static_cast<size_t>(u)] = static_cast<int>(k);
  }
  const size_t n = go.size();
  std::vector<int> fail(n, 0), order;
  for (int b = 0; b < 256; ++b) {
    int& v = go[0][static_cast<size_t>(b)];
    if (v < 0) v = 0;
    else order.push_back(v);
  }
  for (size_t at = 0; at < order.size(); ++at) {
    const int u = order[at];
    if (ends[static_cast<size_t>(u)] < 0) ends[static_cast<size_t>(u)] = ends[static_cast<size_t>(fail[static_cast<size_t>(u)])];
    for (int b = 0; b < 256; ++b) {
      int& v = go[static_cast<size_t>(u)][static_cast<size_t>(b)];
      const int via = go[static_cast<size_t>(fail[static_cast<size_t>(u)])][static_cast<size_t>(b)];
      if (v < 0) {
        v = via;
      } else {
        fail[static_cast<size_t>(v)] = via;
        order.push_back(v);
      }
    }
  }
  // Free text: the automaton's states where no trigger has ended (each accepting: text may end there). A byte that
  // completes trigger k enters k's rest, whose end returns to free text from the root.
  Nfa nfa;
  std::vector<int> state(n, -1);
  for (size_t u = 0; u < n; ++u)
    if (ends[u] < 0) state[u] = nfa.add();
  const int accept = nfa.add();
  std::vector<int> entry(triggers.size());
  for (size_t k = 0; k < triggers.size(); ++k) {
    Parser parser(triggers[k].rest);
    auto node = parser.parse();
    if (!node) return error("structural tag: trigger '", triggers[k].text, "': ", node.status().message());
    entry[k] = nfa.add();
    const int end = build(nfa, **node, entry[k]);
    nfa.eps[static_cast<size_t>(end)].push_back(state[0]);
  }
  for (size_t u = 0; u < n; ++u) {
    if (state[u] < 0) continue;
    nfa.eps[static_cast<size_t>(state[u])].push_back(accept);
    for (int lo = 0; lo < 256;) {  // runs of bytes with one target as one edge
      const int v = go[u][static_cast<size_t>(lo)];
      int hi = lo;
      while (hi + 1 < 256 && go[u][static_cast<size_t>(hi + 1)] == v) ++hi;
      const int to = ends[static_cast<size_t>(v)] >= 0 ? entry[static_cast<size_t>(ends[static_cast<size_t>(v)])]
                                                       : state[static_cast<size_t>(v)];
      nfa.edges[static_cast<size_t>(state[u])].push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to});
      lo = hi + 1;
    }
  }
  return determinize(nfa, state[0], accept, max_states);
}

Result<ByteDfa> ByteDfa::determinize(const Nfa& nfa, int start, int accept, int max_states) {
  if (nfa.overflow) return error("regex: too large (over ", kMaxNfaStates, " automaton states before determinizing)");
  // Byte classes: bytes no edge boundary separates behave alike.
  std::vector<uint8_t> cls(256, 0);
  {
    std::vector<bool> cut(257, false);
    for (const auto& es : nfa.edges)
      for (const auto& e : es) cut[e.lo] = cut[static_cast<size_t>(e.hi) + 1] = true;
    int c = -1;
    for (int b = 0; b < 256; ++b) {
      if (b == 0 || cut[static_cast<size_t>(b)]) ++c;
      cls[static_cast<size_t>(b)] = static_cast<uint8_t>(c);
    }
  }
  const int num_cls = cls[255] + 1;
  std::vector<uint8_t> rep(static_cast<size_t>(num_cls));  // a byte of each class
  for (int b = 255; b >= 0; --b) rep[cls[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);

  ByteDfa dfa;
  std::map<std::vector<int>, int> ids;
  std::vector<std::vector<int>> sets;
  std::vector<uint32_t> mark(nfa.eps.size(), 0);
  uint32_t stamp = 0;
  std::vector<int> s0 = {start};
  closure(nfa, s0, mark, ++stamp);
  ids.emplace(s0, 0);
  sets.push_back(s0);
  std::vector<std::vector<int32_t>> by_cls;  // [state][class]
  // A bound on the construction's work (NFA states visited), so that a hostile pattern costs a request, not a
  // server thread's seconds (well under a second here).
  constexpr int64_t kMaxWork = 30'000'000;
  int64_t work = 0;
  for (size_t at = 0; at < sets.size(); ++at) {
    work += static_cast<int64_t>(sets[at].size()) * num_cls;
    if (work > kMaxWork) return error("regex: too complex to compile (its automaton's construction ran past its budget)");
    std::vector<int32_t> row(static_cast<size_t>(num_cls), kDead);
    for (int c = 0; c < num_cls; ++c) {
      const uint8_t b = rep[static_cast<size_t>(c)];
      std::vector<int> nxt;
      ++stamp;
      for (int s : sets[at])
        for (const auto& e : nfa.edges[static_cast<size_t>(s)])
          if (e.lo <= b && b <= e.hi && mark[static_cast<size_t>(e.to)] != stamp) {
            mark[static_cast<size_t>(e.to)] = stamp;
            nxt.push_back(e.to);
          }
      if (nxt.empty()) continue;
      closure(nfa, nxt, mark, ++stamp);
      auto [it, fresh] = ids.emplace(nxt, static_cast<int>(sets.size()));
      if (fresh) {
        if (static_cast<int>(sets.size()) >= max_states)
          return error("regex: its automaton has over ", max_states, " states (simplify the pattern or schema)");
        sets.push_back(std::move(nxt));
      }
      row[static_cast<size_t>(c)] = it->second;
    }
    by_cls.push_back(std::move(row));
  }
  const size_t n = sets.size();
  // Live states: those that reach an accepting one (backwards from the accepting states).
  std::vector<uint8_t> acc(n, 0), live(n, 0);
  std::vector<std::vector<int>> preds(n);
  for (size_t s = 0; s < n; ++s) {
    acc[s] = std::binary_search(sets[s].begin(), sets[s].end(), accept) ? 1 : 0;
    for (int32_t t : by_cls[s])
      if (t != kDead) preds[static_cast<size_t>(t)].push_back(static_cast<int>(s));
  }
  std::vector<int> stack;
  for (size_t s = 0; s < n; ++s)
    if (acc[s]) live[s] = 1, stack.push_back(static_cast<int>(s));
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int p : preds[static_cast<size_t>(s)])
      if (!live[static_cast<size_t>(p)]) live[static_cast<size_t>(p)] = 1, stack.push_back(p);
  }
  dfa.trans_.assign(n * 256, kDead);
  dfa.accept_ = acc;
  dfa.has_next_.assign(n, 0);
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = by_cls[s][cls[static_cast<size_t>(b)]];
      if (t != kDead && live[static_cast<size_t>(t)]) {
        dfa.trans_[s * 256 + static_cast<size_t>(b)] = t;
        dfa.has_next_[s] = 1;
      }
    }
  }
  if (!live[0]) return error("regex: matches no string");
  return dfa;
}

int ByteDfa::walk(int s, std::string_view bytes) const {
  for (char c : bytes) {
    if (s == kDead) return kDead;
    s = next(s, static_cast<uint8_t>(c));
  }
  return s;
}

bool ByteDfa::matches(std::string_view text) const {
  const int s = walk(start(), text);
  return s != kDead && accepting(s);
}

}  // namespace ds
