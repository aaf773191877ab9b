// Tool-call extraction (see tool_call_parser.h). One state machine serves the three formats: text
// outside a block is content (holding back a possible partial marker and the whitespace before it),
// inside a block complete calls are parsed one by one. Calls are only emitted whole, so a call whose
// JSON turns out broken can still be returned as content. A block that produces no valid call is
// returned verbatim (markers included) as content.
#include "text/tool_call_parser.h"

#include <cstdio>

#include "text/chat_json.h"
#include "text/parser_util.h"

namespace ds {
namespace {
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kToolSep = "<｜tool▁sep｜>";
constexpr std::string_view kDsmlCallsBegin = "<｜DSML｜function_calls>";
constexpr std::string_view kDsmlCallsEnd = "</｜DSML｜function_calls>";
constexpr std::string_view kDsmlInvoke = "<｜DSML｜invoke";
constexpr std::string_view kDsmlInvokeEnd = "</｜DSML｜invoke>";
constexpr std::string_view kDsmlParam = "<｜DSML｜parameter";
constexpr std::string_view kDsmlParamEnd = "</｜DSML｜parameter>";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void skip_space(std::string_view s, size_t* i) {
  while (*i < s.size() && is_json_space(s[*i])) ++*i;
}

// Reads `attr="value"` at *i (after optional whitespace); false when absent.
bool read_attr(std::string_view s, size_t* i, std::string_view attr, std::string* value) {
  skip_space(s, i);
  if (!starts_with(s.substr(*i), attr) || s.substr(*i + attr.size(), 2) != "=\"") return false;
  const size_t start = *i + attr.size() + 2;
  const size_t end = s.find('"', start);
  if (end == std::string_view::npos) return false;
  *value = std::string(s.substr(start, end - start));
  *i = end + 1;
  return true;
}

// JSON object text -> json.dumps form; false when not a JSON object.
bool normalize_object(std::string_view text, std::string* out) {
  auto parsed = parse_json_text(text, "arguments");
  if (!parsed.is_ok() || !parsed.value().is_object()) return false;
  *out = py_json_dumps(parsed.value());
  return true;
}
}  // namespace

Result<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  if (name == "deepseekv3") return ToolCallFormat::kDeepSeekV3;
  if (name == "deepseekv31") return ToolCallFormat::kDeepSeekV31;
  if (name == "deepseekv32") return ToolCallFormat::kDeepSeekV32;
  return error("unknown tool-call parser '", name, "' (expected deepseekv3, deepseekv31 or deepseekv32)");
}

ToolCallParser::ToolCallParser(ToolCallFormat format, uint64_t id_seed)
    : format_(format), rng_(id_seed ? id_seed : std::random_device{}()) {
  if (format == ToolCallFormat::kDeepSeekV32) {
    block_begin_ = kDsmlCallsBegin;
    block_end_ = kDsmlCallsEnd;
    call_begin_ = kDsmlInvoke;
    call_end_ = kDsmlInvokeEnd;
  } else {
    block_begin_ = kCallsBegin;
    block_end_ = kCallsEnd;
    call_begin_ = kCallBegin;
    call_end_ = kCallEnd;
  }
}

bool ToolCallParser::parse_call_body(std::string_view body, std::string* name, std::string* arguments) const {
  if (format_ != ToolCallFormat::kDeepSeekV32) {
    // V3: "function<sep>NAME\n```json\nARGS\n```"; V3.1: "NAME<sep>ARGS". Either shape is accepted by
    // both parsers: models fine-tuned on one format sometimes emit the other.
    const size_t sep = body.find(kToolSep);
    if (sep == std::string_view::npos) return false;
    std::string_view before = trim_json_space(body.substr(0, sep));
    std::string_view after = body.substr(sep + kToolSep.size());
    std::string_view args = trim_json_space(after);
    if (!args.empty() && args.front() == '{') {
      *name = std::string(before);
    } else {
      const size_t nl = after.find('\n');
      if (nl == std::string_view::npos) return false;
      *name = std::string(trim_json_space(after.substr(0, nl)));
      args = trim_json_space(after.substr(nl + 1));
      if (starts_with(args, "```")) {
        const size_t fence_nl = args.find('\n');
        if (fence_nl == std::string_view::npos) return false;
        args = args.substr(fence_nl + 1);
        args = trim_json_space(args);
        if (args.size() >= 3 && args.substr(args.size() - 3) == "```") args.remove_suffix(3);
        args = trim_json_space(args);
      }
    }
    if (name->empty()) return false;
    return normalize_object(args, arguments);
  }

  // V3.2 DSML: ` name="NAME">` then <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>
  // lines (or, leniently, one JSON object). Arguments are assembled as encoding_dsv32's decoder does:
  // string values JSON-quoted, other values inserted as written.
  size_t i = 0;
  if (!read_attr(body, &i, "name", name) || name->empty()) return false;
  skip_space(body, &i);
  if (i >= body.size() || body[i] != '>') return false;
  std::string_view rest = body.substr(i + 1);
  std::string_view trimmed = trim_json_space(rest);
  if (!trimmed.empty() && trimmed.front() == '{' && normalize_object(trimmed, arguments)) return true;
  std::string args = "{";
  std::vector<std::string> keys;
  size_t j = 0;
  while (true) {
    skip_space(rest, &j);
    if (j >= rest.size()) break;
    if (!starts_with(rest.substr(j), kDsmlParam)) return false;
    j += kDsmlParam.size();
    std::string key, is_str;
    if (!read_attr(rest, &j, "name", &key) || !read_attr(rest, &j, "string", &is_str)) return false;
    if (is_str != "true" && is_str != "false") return false;
    skip_space(rest, &j);
    if (j >= rest.size() || rest[j] != '>') return false;
    const size_t vstart = j + 1;
    const size_t vend = rest.find(kDsmlParamEnd, vstart);
    if (vend == std::string_view::npos) return false;
    const std::string_view value = rest.substr(vstart, vend - vstart);
    j = vend + kDsmlParamEnd.size();
    for (const std::string& k : keys)
      if (k == key) return false;  // duplicate parameter
    keys.push_back(key);
    if (keys.size() > 1) args += ", ";
    py_json_append_string(args, key);
    args += ": ";
    if (is_str == "true" || !parse_json_text(value, "value").is_ok()) {
      py_json_append_string(args, value);
    } else {
      args += value;
    }
  }
  args += "}";
  *arguments = std::move(args);
  return true;
}

void ToolCallParser::emit_call(std::string name, std::string arguments, ToolCallParseDelta* out) {
  ToolCall call;
  char hex[32];
  const uint64_t a = rng_(), b = rng_();
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffULL));
  call.id = std::string("call_") + hex;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  out->calls.push_back(ToolCallDelta{static_cast<int>(calls_.size()), call.id, call.name, call.arguments});
  calls_.push_back(std::move(call));
}

ToolCallParseDelta ToolCallParser::feed(std::string_view chunk) {
  buf_.append(chunk);
  return drain(false);
}

ToolCallParseDelta ToolCallParser::finish() { return drain(true); }

ToolCallParseDelta ToolCallParser::drain(bool final) {
  ToolCallParseDelta out;
  // Until a block yields a valid call, its opening text is kept so that it can be returned as content.
  auto flush_prefix = [&]() {
    if (!block_had_call_) out.content += block_prefix_;
    block_prefix_.clear();
  };
  while (true) {
    if (!in_block_) {
      std::string_view which;
      const size_t p = find_first_marker(buf_, {block_begin_, call_begin_}, &which);
      if (p != std::string::npos) {
        size_t q = p;  // whitespace before a block is layout ("\n\n<｜DSML｜function_calls>")
        while (q > 0 && is_json_space(buf_[q - 1])) --q;
        out.content.append(buf_, 0, q);
        const size_t consumed = which == block_begin_ ? p + which.size() : p;
        block_prefix_ = buf_.substr(q, consumed - q);
        block_had_call_ = false;
        buf_.erase(0, consumed);
        in_block_ = true;
        continue;
      }
      size_t hold = 0;
      if (!final) {
        hold = partial_marker_suffix(buf_, {block_begin_, call_begin_});
        size_t k = buf_.size() - hold;
        while (k > 0 && is_json_space(buf_[k - 1])) --k;
        hold = buf_.size() - k;
      }
      out.content.append(buf_, 0, buf_.size() - hold);
      buf_.erase(0, buf_.size() - hold);
      return out;
    }

    size_t i = 0;
    while (i < buf_.size() && is_json_space(buf_[i])) ++i;
    const std::string_view rest = std::string_view(buf_).substr(i);
    if (rest.empty()) {
      if (final) {  // block left open at the end of the output
        flush_prefix();
        if (!block_had_call_) out.content += buf_;
        buf_.clear();
        in_block_ = false;
      }
      return out;
    }
    if (starts_with(rest, block_end_)) {
      if (!block_had_call_) {
        flush_prefix();
        out.content.append(buf_, 0, i + block_end_.size());
      }
      block_prefix_.clear();
      buf_.erase(0, i + block_end_.size());
      in_block_ = false;
      continue;
    }
    if (starts_with(rest, call_begin_)) {
      const size_t e = rest.find(call_end_, call_begin_.size());
      if (e == std::string_view::npos) {
        if (final) {  // unterminated call: plain content
          flush_prefix();
          out.content += buf_;
          buf_.clear();
          in_block_ = false;
        }
        return out;
      }
      const size_t raw_len = e + call_end_.size();
      std::string name, arguments;
      if (parse_call_body(rest.substr(call_begin_.size(), e - call_begin_.size()), &name, &arguments)) {
        block_prefix_.clear();
        block_had_call_ = true;
        emit_call(std::move(name), std::move(arguments), &out);
      } else {
        flush_prefix();
        out.content.append(buf_, 0, i + raw_len);
      }
      buf_.erase(0, i + raw_len);
      continue;
    }
    if (!final && (starts_with(block_end_, rest) || starts_with(call_begin_, rest))) return out;
    // Anything else closes the block; the text is content again.
    flush_prefix();
    in_block_ = false;
  }
}

ToolCallParser::Parsed ToolCallParser::parse(ToolCallFormat format, std::string_view text, uint64_t id_seed) {
  ToolCallParser p(format, id_seed);
  Parsed out;
  ToolCallParseDelta a = p.feed(text);
  ToolCallParseDelta b = p.finish();
  out.content = a.content + b.content;
  out.calls = p.calls();
  return out;
}

}  // namespace ds
