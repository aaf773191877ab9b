// Python-compatible JSON serialisation (see chat_json.h).
#include "text/chat_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/json_depth.h"

namespace ds {

void py_json_append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);  // non-ASCII bytes stay as they are (ensure_ascii=False)
        }
    }
  }
  out.push_back('"');
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form, e.g. "-1.2345e+16", then laid out by Python's rule.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  DS_CHECK(res.ec == std::errc(), "to_chars failed");
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  DS_CHECK(e_pos != std::string_view::npos, "no exponent in ", sci);
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits.push_back(c);
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out.push_back('.');
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  out += ebuf;
  return out;
}

static void dump(const OrderedJson& v, std::string& out) {
  switch (v.type()) {
    case OrderedJson::value_t::null: out += "null"; break;
    case OrderedJson::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case OrderedJson::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case OrderedJson::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case OrderedJson::value_t::number_float: out += py_float_repr(v.get<double>()); break;
    case OrderedJson::value_t::string: py_json_append_string(out, v.get_ref<const std::string&>()); break;
    case OrderedJson::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        dump(e, out);
      }
      out.push_back(']');
      break;
    }
    case OrderedJson::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        py_json_append_string(out, it.key());
        out += ": ";
        dump(it.value(), out);
      }
      out.push_back('}');
      break;
    }
    default: out += "null"; break;  // binary / discarded never come from parsed request JSON
  }
}

std::string py_json_dumps(const OrderedJson& value) {
  std::string out;
  dump(value, out);
  return out;
}

Result<OrderedJson> parse_json_text(std::string_view text, std::string_view what) {
  if (json_nests_deeper(text)) return error(what, " nests arrays and objects deeper than ", kMaxJsonDepth, " levels");
  OrderedJson v = OrderedJson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return error(what, " is not valid JSON");
  return v;
}

}  // namespace ds
