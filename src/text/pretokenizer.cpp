// Pre-tokenizers (see pretokenizer.h). Semantics follow the Rust tokenizers crate: a Split step
// turns each piece into (range, is_match) spans covering it, then merges or drops spans according
// to the behaviour; empty pieces are removed.
#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "text/unicode.h"
#include "text/unicode_classes.h"

namespace ds {
namespace {

using Spans = std::vector<std::pair<uint32_t, uint32_t>>;

// Oniguruma's \s is the Unicode White_Space property; PCRE2's (UCP) \s also matches U+180E, so
// both \s and \S are spelled out. Inside a character class only \s can be expanded.
constexpr const char kSpaceMembers[] =
    "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}"
    "\\x{3000}";

// PCRE2 class members for the code points that `category` gained after PCRE2's Unicode version.
std::string class_additions(char category) {
  std::string out;
  char buf[48];
  for (const CodePointRange& r : unicode_class_additions(category)) {
    if (r.first == r.last) std::snprintf(buf, sizeof(buf), "\\x{%X}", r.first);
    else std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", r.first, r.last);
    out += buf;
  }
  return out;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string translate_pattern(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's') {
        // Appended piece by piece: gcc 12's -Wrestrict misfires on "[" + std::string(...).
        if (!in_class) out += '[';
        out += kSpaceMembers;
        if (!in_class) out += ']';
      } else if (n == 'S' && !in_class) {
        out += "[^";
        out += kSpaceMembers;
        out += ']';
      } else if ((n == 'p' || n == 'P') && !(n == 'P' && in_class)) {
        // \p{X} / \pX for a one-letter category: add what PCRE2's older tables lack.
        char cat = 0;
        size_t len = 0;  // characters after the backslash
        if (i + 4 < p.size() && p[i + 2] == '{' && p[i + 4] == '}') cat = p[i + 3], len = 4;
        else if (i + 2 < p.size() && p[i + 2] != '{') cat = p[i + 2], len = 2;
        std::string extra = cat ? class_additions(cat) : std::string();
        if (extra.empty()) {
          out += c;
          out += n;
        } else {
          std::string prop = std::string("\\p{") + cat + "}" + extra;
          out += in_class ? prop : (n == 'p' ? "[" : "[^") + prop + "]";
          i += len - 1;
        }
      } else if (n == 'u' && i + 5 < p.size() && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) &&
                 is_hex(p[i + 5])) {
        out += "\\x{" + p.substr(i + 2, 4) + "}";  // Oniguruma \uHHHH
        i += 4;
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

// Per-thread PCRE2 match state shared by all patterns (only the whole-match offsets are used).
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<char*>(buf);
}

// Spans covering `len` bytes: the matches (true) and the gaps between them (false).
void matches_to_spans(const Spans& matches, uint32_t len, std::vector<std::pair<Spans::value_type, bool>>* out) {
  out->clear();
  uint32_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s) out->push_back({{prev, s}, false});
    out->push_back({{s, e}, true});
    prev = e;
  }
  if (prev != len) out->push_back({{prev, len}, false});
}

// Applies a delimiter behaviour to spans (is_match flags), appending the kept ranges.
void apply_behavior(const std::vector<std::pair<Spans::value_type, bool>>& spans, SplitBehavior b, Spans* out) {
  out->clear();
  switch (b) {
    case SplitBehavior::kIsolated:
      for (auto& [r, m] : spans) out->push_back(r);
      break;
    case SplitBehavior::kRemoved:
      for (auto& [r, m] : spans)
        if (!m) out->push_back(r);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto& [r, m] : spans) {
        if (m && !prev_match && !out->empty()) out->back().second = r.second;
        else out->push_back(r);
        prev_match = m;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_match = false;
      for (size_t k = spans.size(); k-- > 0;) {
        auto& [r, m] = spans[k];
        if (m && !prev_match && !out->empty()) out->back().first = r.first;
        else out->push_back(r);
        prev_match = m;
      }
      std::reverse(out->begin(), out->end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (auto& [r, m] : spans) {
        if (m == prev_match && !out->empty()) out->back().second = r.second;
        else out->push_back(r);
        prev_match = m;
      }
      break;
    }
  }
}

Result<SplitBehavior> parse_behavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return error("pre_tokenizer Split: unknown behavior '", s, "'");
}

// The regex of GPT-2 that ByteLevel(use_regex=true) splits with.
constexpr const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void find_literal(std::string_view subject, const std::string& lit, Spans* out) {
  if (lit.empty()) return;
  size_t pos = 0;
  while ((pos = subject.find(lit, pos)) != std::string_view::npos) {
    out->push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + lit.size())});
    pos += lit.size();
  }
}

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  std::string translated = translate_pattern(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!code) return error("cannot compile regex '", pattern, "' at offset ", err_off, ": ", pcre2_message(err));
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: the interpreter is used when JIT is absent
  std::shared_ptr<Regex> r(new Regex());
  r->pattern_ = pattern;
  r->code_ = code;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find_all(std::string_view subject, Spans* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t n = subject.size();
  size_t start = 0;
  while (start <= n) {
    int rc = pcre2_match(code, subj, n, start, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // very long pieces: retry with the heap-based interpreter
      rc = pcre2_match(code, subj, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return error("regex '", pattern_, "' failed at byte ", start, ": ", pcre2_message(rc));
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    size_t s = ov[0], e = ov[1];
    if (e > s) {
      out->push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
      start = e;
    } else {  // empty match: step over one character
      if (s >= n) break;
      start = s + 1;
      while (start < n && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return Status::ok();
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  if (!j.is_null()) DS_RETURN_IF_ERROR(p.add_from_json(j));
  return p;
}

Status PreTokenizer::add_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type")) return error("pre_tokenizer: expected an object with a \"type\"");
  std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    for (const auto& sub : j.value("pretokenizers", nlohmann::json::array())) DS_RETURN_IF_ERROR(add_from_json(sub));
    return Status::ok();
  }
  if (byte_level_)  // later steps would see byte-level characters; no known tokenizer does this
    return error("pre_tokenizer: a ", type, " step after ByteLevel is not supported");
  PreTokenizerStep step;
  if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const auto& pat = j.at("pattern");
    if (pat.contains("Regex")) {
      DS_ASSIGN_OR_RETURN(step.regex, Regex::compile(pat["Regex"].get<std::string>()));
    } else if (pat.contains("String")) {
      step.literal = pat["String"].get<std::string>();
    } else {
      return error("pre_tokenizer Split: pattern must have \"Regex\" or \"String\"");
    }
    DS_ASSIGN_OR_RETURN(step.behavior, parse_behavior(j.value("behavior", std::string("Isolated"))));
    step.invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", true);
    step.use_regex = j.value("use_regex", true);
    if (step.use_regex) {
      DS_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern));
    }
    byte_level_ = true;
  } else {
    return error("pre_tokenizer type '", type, "' is not supported");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status PreTokenizer::split(std::string_view text, std::vector<Piece>* out) const {
  std::vector<Piece> cur, next;
  if (!text.empty()) cur.push_back({0, static_cast<uint32_t>(text.size()), false});
  Spans matches, kept;
  std::vector<std::pair<Spans::value_type, bool>> spans;
  std::string tmp;
  for (const auto& step : steps_) {
    next.clear();
    for (const Piece& pc : cur) {
      std::string_view sub = text.substr(pc.begin, pc.end - pc.begin);
      if (step.kind == PreTokenizerStep::Kind::kSplit) {
        matches.clear();
        if (step.regex) DS_RETURN_IF_ERROR(step.regex->find_all(sub, &matches));
        else find_literal(sub, step.literal, &matches);
        matches_to_spans(matches, static_cast<uint32_t>(sub.size()), &spans);
        if (step.invert)
          for (auto& s : spans) s.second = !s.second;
        apply_behavior(spans, step.behavior, &kept);
        for (auto [s, e] : kept)
          if (e > s) next.push_back({pc.begin + s, pc.begin + e, false});
        continue;
      }
      // ByteLevel: maybe prepend a space, maybe split with the GPT-2 regex.
      bool prefix = step.add_prefix_space && !sub.empty() && sub[0] != ' ';
      if (!step.use_regex) {
        next.push_back({pc.begin, pc.end, prefix});
        continue;
      }
      std::string_view subject = sub;
      if (prefix) {
        tmp.clear();
        tmp.push_back(' ');
        tmp.append(sub);
        subject = tmp;
      }
      matches.clear();
      DS_RETURN_IF_ERROR(step.regex->find_all(subject, &matches));
      matches_to_spans(matches, static_cast<uint32_t>(subject.size()), &spans);
      for (auto& [r, m] : spans) {
        auto [s, e] = r;
        if (e <= s) continue;
        if (!prefix) next.push_back({pc.begin + s, pc.begin + e, false});
        else if (s == 0) next.push_back({pc.begin, pc.begin + e - 1, true});  // holds the added space
        else next.push_back({pc.begin + s - 1, pc.begin + e - 1, false});
      }
    }
    cur.swap(next);
  }
  out->insert(out->end(), cur.begin(), cur.end());
  return Status::ok();
}

}  // namespace ds
