// The schema walk: each keyword to its regex piece (see json_schema_regex.h).
#include "text/json_schema_regex.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

namespace ds {
namespace {

using Json = nlohmann::ordered_json;

const std::string kWs = "[ ]?";
const std::string kChar = R"(([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}))";
const std::string kString = "\"" + kChar + "*\"";
const std::string kInteger = "-?(0|[1-9][0-9]*)";
const std::string kNumber = "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?";
const std::string kBoolean = "(true|false)";
const std::string kNull = "null";

std::string any_value(int depth) {
  std::string scalar = "(" + kString + "|" + kNumber + "|" + kBoolean + "|" + kNull + ")";
  if (depth <= 0) return scalar;
  const std::string inner = any_value(depth - 1);
  const std::string array = "\\[" + kWs + "(" + inner + "(" + kWs + "," + kWs + inner + ")*)?" + kWs + "\\]";
  const std::string member = kString + kWs + ":" + kWs + inner;
  const std::string object = "\\{" + kWs + "(" + member + "(" + kWs + "," + kWs + member + ")*)?" + kWs + "\\}";
  return "(" + scalar + "|" + array + "|" + object + ")";
}

std::string repeat_bounds(int64_t lo, int64_t hi) {  // hi < 0: unbounded
  if (hi < 0) return "{" + std::to_string(lo) + ",}";
  if (lo == hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

// Equal-length digit strings lo <= hi (leading zeros allowed): a regex of the strings of that length between them.
std::string digits_between(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo[0] == hi[0]) return std::string(1, lo[0]) + digits_between(lo.substr(1), hi.substr(1));
  const size_t m = lo.size() - 1;
  const auto cls = [](char a, char b) { return a == b ? std::string(1, a) : "[" + std::string(1, a) + "-" + b + "]"; };
  const std::string any = m ? "[0-9]{" + std::to_string(m) + "}" : "";
  if (lo.substr(1) == std::string(m, '0') && hi.substr(1) == std::string(m, '9')) return cls(lo[0], hi[0]) + any;
  std::string out = "(" + std::string(1, lo[0]) + digits_between(lo.substr(1), std::string(m, '9'));
  if (lo[0] + 1 <= hi[0] - 1) out += "|" + cls(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)) + any;
  return out + "|" + std::string(1, hi[0]) + digits_between(std::string(m, '0'), hi.substr(1)) + ")";
}

// Decimal numerals (no sign, no leading zeros) of the integers in [a, b], 0 <= a, b < 0 meaning unbounded.
std::string naturals_between(int64_t a, int64_t b) {
  const std::string sa = std::to_string(a);
  const size_t da = sa.size(), db = b < 0 ? da : std::to_string(b).size();
  std::string out;
  int64_t first = a;
  for (size_t d = da; d <= db; ++d) {
    int64_t ten = 1;
    for (size_t i = 0; i < d; ++i) ten *= 10;
    const int64_t last = (b >= 0 && d == db) ? b : ten - 1;
    if (!out.empty()) out += '|';  // (appending, not `"|" + ...`: GCC 12's -Wrestrict misfires on that)
    out += digits_between(std::to_string(first), std::to_string(last));
    first = ten;
  }
  if (b < 0) out += "|[1-9][0-9]{" + std::to_string(da) + ",}";  // every longer numeral
  return "(" + out + ")";
}

// An integer's regex within [lo, hi] (std::nullopt: unbounded on that side).
std::string integers_between(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives: magnitudes [max(1, -hi), -lo]
    const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
    alts.push_back("-" + naturals_between(mag_lo, lo ? -*lo : -1));
  }
  if (!hi || *hi >= 0) alts.push_back(naturals_between(lo && *lo > 0 ? *lo : 0, hi ? *hi : -1));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
  return out + ")";
}

// ---- number bounds: decimal numerals (no exponent) compared with decimal bounds digit by digit ----

// A set of fraction digit strings (what follows the '.', the empty string standing for no fraction: value 0): a
// regex of its non-empty members ("" when none) and whether the empty string belongs.
struct Fractions {
  std::string nonempty;
  bool empty = false;
};

std::string digit_class(char a, char b) {  // [a-b]; a <= b
  return a == b ? std::string(1, a) : "[" + std::string(1, a) + "-" + std::string(1, b) + "]";
}

// Non-empty strings: `head` followed by a member of f (f's empty member leaves `head` alone).
std::string then(const std::string& head, const Fractions& f) {
  if (f.nonempty.empty()) return f.empty ? head : "";
  return head + "(" + f.nonempty + ")" + (f.empty ? "?" : "");
}

std::string either(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts)
    if (!a.empty()) out += (out.empty() ? "" : "|") + a;
  return out.empty() ? out : "(" + out + ")";
}

bool all_zero(std::string_view d) { return d.find_first_not_of('0') == std::string_view::npos; }

// Fraction strings f with a < f < b / a <= f <= b (per strictness) as decimal fractions 0.f, a and b digit strings
// (shorter ones padded with zeros); `hi_open`: no upper bound (b ignored).
Fractions fractions_between(std::string_view a, bool a_strict, std::string_view b, bool b_strict, bool hi_open) {
  Fractions out;
  // The empty string (value 0): 0 >= a only when a is 0, 0 <= b always.
  out.empty = all_zero(a) && !a_strict && (hi_open || !all_zero(b) || !b_strict);
  if (!hi_open && a.empty() && b.empty()) {  // [0, 0]: all-zero strings, unless either side is strict
    if (!a_strict && !b_strict) out.nonempty = "0+";
    return out;
  }
  if (hi_open && a.empty()) {  // everything (>= 0), or every string with a non-zero digit (> 0)
    out.nonempty = a_strict ? "[0-9]*[1-9][0-9]*" : "[0-9]+";
    return out;
  }
  const char x = a.empty() ? '0' : a[0];
  const std::string_view ar = a.empty() ? a : a.substr(1);
  if (hi_open) {  // first digit above x: anything after; equal to x: the rest above a's rest
    std::vector<std::string> alts;
    if (x < '9') alts.push_back(digit_class(static_cast<char>(x + 1), '9') + "[0-9]*");
    alts.push_back(then(std::string(1, x), fractions_between(ar, a_strict, {}, false, true)));
    out.nonempty = either(alts);
    return out;
  }
  const char y = b.empty() ? '0' : b[0];
  const std::string_view br = b.empty() ? b : b.substr(1);
  std::vector<std::string> alts;
  if (x == y) {
    alts.push_back(then(std::string(1, x), fractions_between(ar, a_strict, br, b_strict, false)));
  } else {  // x < y
    alts.push_back(then(std::string(1, x), fractions_between(ar, a_strict, {}, false, true)));
    if (x + 1 <= y - 1) alts.push_back(digit_class(static_cast<char>(x + 1), static_cast<char>(y - 1)) + "[0-9]*");
    alts.push_back(then(std::string(1, y), fractions_between({}, false, br, b_strict, false)));
  }
  out.nonempty = either(alts);
  return out;
}

// A non-negative decimal bound: integer part and fraction digits (no trailing zeros), strict or not.
struct Magnitude {
  int64_t ip = 0;
  std::string frac;
  bool strict = false;
};

// Unsigned decimal numerals I(.F)? with lo <= I.F <= hi (per strictness; hi unset: unbounded); "" when none.
std::string magnitudes_between(const Magnitude& lo, const std::optional<Magnitude>& hi) {
  const auto with = [](const std::string& numeral, const Fractions& f) -> std::string {
    if (f.nonempty.empty()) return f.empty ? numeral : "";
    return numeral + "(\\.(" + f.nonempty + "))" + (f.empty ? "?" : "");
  };
  std::vector<std::string> alts;
  if (hi && hi->ip == lo.ip) {
    alts.push_back(with(std::to_string(lo.ip), fractions_between(lo.frac, lo.strict, hi->frac, hi->strict, false)));
  } else {
    alts.push_back(with(std::to_string(lo.ip), fractions_between(lo.frac, lo.strict, {}, false, true)));
    if (!hi) {
      alts.push_back(naturals_between(lo.ip + 1, -1) + "(\\.[0-9]+)?");
    } else {
      if (lo.ip + 1 <= hi->ip - 1) alts.push_back(naturals_between(lo.ip + 1, hi->ip - 1) + "(\\.[0-9]+)?");
      alts.push_back(with(std::to_string(hi->ip), fractions_between({}, false, hi->frac, hi->strict, false)));
    }
  }
  return either(alts);
}

// A JSON number bound as a sign and a Magnitude: its shortest round-trip decimal, spelled out without an exponent.
Result<std::pair<bool, Magnitude>> decimal_bound(double x, bool strict) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  if (ec != std::errc()) return error("unrepresentable bound");
  std::string_view t(buf, static_cast<size_t>(end - buf));
  const bool neg = !t.empty() && t[0] == '-';
  if (neg) t.remove_prefix(1);
  int exp = 0;
  if (const size_t e = t.find_first_of("eE"); e != std::string_view::npos) {
    exp = std::stoi(std::string(t.substr(e + 1)));
    t = t.substr(0, e);
  }
  std::string digits;
  int point = 0;  // digits before the decimal point
  bool seen_point = false;
  for (char c : t) {
    if (c == '.') {
      seen_point = true;
      continue;
    }
    digits += c;
    if (!seen_point) ++point;
  }
  point += exp;
  if (point > 18 || static_cast<int>(digits.size()) - point > 30) return error("too many digits");
  std::string ip = point > 0 ? digits.substr(0, std::min<size_t>(digits.size(), static_cast<size_t>(point))) : "";
  while (static_cast<int>(ip.size()) < point) ip += '0';
  std::string frac;
  if (point < 0) frac = std::string(static_cast<size_t>(-point), '0') + digits;
  else if (static_cast<size_t>(point) < digits.size()) frac = digits.substr(static_cast<size_t>(point));
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  Magnitude m;
  m.ip = ip.empty() ? 0 : std::stoll(ip);
  m.frac = frac;
  m.strict = strict;
  return std::make_pair(neg && (m.ip != 0 || !m.frac.empty()), m);
}

// Signed decimal bounds compared: a < b.
bool less_than(const std::pair<bool, Magnitude>& a, const std::pair<bool, Magnitude>& b) {
  const auto mag_less = [](const Magnitude& x, const Magnitude& y) {
    if (x.ip != y.ip) return x.ip < y.ip;
    std::string fx = x.frac, fy = y.frac;
    fx.resize(std::max(fx.size(), fy.size()), '0');
    fy.resize(fx.size(), '0');
    return fx < fy;
  };
  if (a.first != b.first) return a.first;  // negative < non-negative
  return a.first ? mag_less(b.second, a.second) : mag_less(a.second, b.second);
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  Result<std::string> value(const Json& s, const std::string& at, int depth) {
    if (depth > 16) return error("json_schema: nested deeper than 16 levels (a recursive $ref?) at ", at);
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value(2);
      return error("json_schema: 'false' admits nothing at ", at);
    }
    if (!s.is_object()) return error("json_schema: a schema must be an object at ", at);
    if (s.contains("$ref")) return ref(s["$ref"], at, depth);
    if (s.contains("const")) return regex_escape(s["const"].dump());
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return error("json_schema: 'enum' must be a non-empty list at ", at);
      std::string out = "(";
      for (size_t i = 0; i < e.size(); ++i) {
        if (i) out += '|';
        out += regex_escape(e[i].dump());
      }
      return out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return alternatives(s[key], at + "/" + key, depth);
    if (s.contains("allOf")) {
      const Json& a = s["allOf"];
      if (!a.is_array() || a.size() != 1)
        return error("json_schema: 'allOf' of ", a.is_array() ? a.size() : 0, " schemas is not supported (one only) at ", at);
      return value(a[0], at + "/allOf/0", depth + 1);
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return object(s, at, depth);
      if (s.contains("items")) return array(s, at, depth);
      return any_value(2);
    }
    const Json& t = s["type"];
    if (t.is_array()) {
      std::string out = "(";
      for (size_t i = 0; i < t.size(); ++i) {
        Json one = s;
        one["type"] = t[i];
        DS_ASSIGN_OR_RETURN(std::string r, value(one, at, depth));
        out += (i ? "|" : "") + r;
      }
      return out + ")";
    }
    if (!t.is_string()) return error("json_schema: 'type' must be a string or a list at ", at);
    const std::string type = t.get<std::string>();
    if (type == "string") return string(s, at);
    if (type == "integer") return integer(s, at);
    if (type == "number") return number(s, at);
    if (type == "boolean") return kBoolean;
    if (type == "null") return kNull;
    if (type == "array") return array(s, at, depth);
    if (type == "object") return object(s, at, depth);
    return error("json_schema: unknown type '", type, "' at ", at);
  }

 private:
  Result<std::string> ref(const Json& r, const std::string& at, int depth) {
    if (!r.is_string()) return error("json_schema: '$ref' must be a string at ", at);
    const std::string p = r.get<std::string>();
    if (p != "#" && p.rfind("#/", 0) != 0) return error("json_schema: only local '$ref's (#/...) are supported, got '", p, "' at ", at);
    const Json* node = &root_;
    try {
      node = &root_.at(Json::json_pointer(p.substr(1)));
    } catch (const std::exception&) {
      return error("json_schema: '$ref' ", p, " points at nothing, at ", at);
    }
    return value(*node, p.substr(1), depth + 1);
  }

  Result<std::string> alternatives(const Json& list, const std::string& at, int depth) {
    if (!list.is_array() || list.empty()) return error("json_schema: expected a non-empty list at ", at);
    std::string out = "(";
    for (size_t i = 0; i < list.size(); ++i) {
      DS_ASSIGN_OR_RETURN(std::string r, value(list[i], at + "/" + std::to_string(i), depth + 1));
      out += (i ? "|" : "") + r;
    }
    return out + ")";
  }

  static Result<int64_t> count(const Json& s, const char* key, int64_t fallback, const std::string& at) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
      return error("json_schema: '", key, "' must be an integer in [0, 10000] at ", at);
    return v.get<int64_t>();
  }

  // Calls bound(key, upper, exclusive) for each of minimum / maximum / exclusiveMinimum / exclusiveMaximum present:
  // draft 6's numeric exclusives, or draft 4's booleans making minimum / maximum exclusive.
  template <typename Bound>
  static Status for_each_bound(const Json& s, const Bound& bound) {
    const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean();
    const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean();
    if (s.contains("minimum"))
      DS_RETURN_IF_ERROR(bound("minimum", false, draft4_min && s["exclusiveMinimum"].get<bool>()));
    if (s.contains("maximum"))
      DS_RETURN_IF_ERROR(bound("maximum", true, draft4_max && s["exclusiveMaximum"].get<bool>()));
    if (s.contains("exclusiveMinimum") && !draft4_min) DS_RETURN_IF_ERROR(bound("exclusiveMinimum", false, true));
    if (s.contains("exclusiveMaximum") && !draft4_max) DS_RETURN_IF_ERROR(bound("exclusiveMaximum", true, true));
    return Status::ok();
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum (numbers, or draft 4's boolean exclusives) bound the
  // integers exactly; beyond +-1e17 they are refused rather than ignored.
  Result<std::string> integer(const Json& s, const std::string& at) {
    std::optional<int64_t> lo, hi;
    constexpr double kLimit = 1e17;
    const auto bound = [&](const char* key, bool upper, bool exclusive) -> Status {
      const Json& v = s[key];
      if (!v.is_number()) return error("json_schema: '", key, "' must be a number at ", at);
      const double x = v.get<double>();
      if (!(std::fabs(x) <= kLimit)) return error("json_schema: '", key, "' beyond +-1e17 is not supported at ", at);
      double b = upper ? std::floor(x) : std::ceil(x);
      if (exclusive && b == x) b += upper ? -1 : 1;
      const int64_t n = static_cast<int64_t>(b);
      if (upper) hi = hi ? std::min(*hi, n) : n;
      else lo = lo ? std::max(*lo, n) : n;
      return Status::ok();
    };
    DS_RETURN_IF_ERROR(for_each_bound(s, bound));
    if (!lo && !hi) return kInteger;
    if (lo && hi && *lo > *hi) return error("json_schema: no integer lies in [", *lo, ", ", *hi, "] at ", at);
    return integers_between(lo, hi);
  }

  // The same keywords bound numbers exactly: with any bound the numerals are plain decimals (no exponent), compared
  // with each bound's shortest decimal digit by digit. Bounds past +-1e17 or with more than 30 fraction digits are
  // refused rather than ignored.
  Result<std::string> number(const Json& s, const std::string& at) {
    using Bound = std::pair<bool, Magnitude>;  // (negative, magnitude)
    std::optional<Bound> lo, hi;
    const auto bound = [&](const char* key, bool upper, bool exclusive) -> Status {
      const Json& v = s[key];
      if (!v.is_number()) return error("json_schema: '", key, "' must be a number at ", at);
      const double x = v.get<double>();
      if (!(std::fabs(x) <= 1e17)) return error("json_schema: '", key, "' beyond +-1e17 is not supported at ", at);
      auto b = decimal_bound(x, exclusive);
      if (!b) return error("json_schema: '", key, "' has too many digits (", b.status().message(), ") at ", at);
      std::optional<Bound>& slot = upper ? hi : lo;
      // The tighter of two bounds on one side (equal values: the strict one).
      const bool tighter = !slot || (upper ? less_than(*b, *slot) : less_than(*slot, *b)) ||
                           (!less_than(*b, *slot) && !less_than(*slot, *b) && exclusive);
      if (tighter) slot = *b;
      return Status::ok();
    };
    DS_RETURN_IF_ERROR(for_each_bound(s, bound));
    if (!lo && !hi) return kNumber;
    if (lo && hi && (less_than(*hi, *lo) || (!less_than(*lo, *hi) && (lo->second.strict || hi->second.strict))))
      return error("json_schema: no number lies within the bounds at ", at);
    std::vector<std::string> alts;
    // Non-negative numerals: from max(lo, 0) up to hi, when hi is not negative.
    if (!hi || !hi->first) {
      Magnitude from;  // 0 inclusive
      if (lo && !lo->first) from = lo->second;
      alts.push_back(magnitudes_between(from, hi ? std::optional<Magnitude>(hi->second) : std::nullopt));
    }
    // Negative numerals -m: m from max(-hi, 0 exclusive) up to -lo, when lo is negative or absent.
    if (!lo || lo->first) {
      Magnitude from;
      from.strict = true;  // m > 0: no "-0"
      if (hi && hi->first) from = hi->second;
      const std::string neg =
          magnitudes_between(from, lo ? std::optional<Magnitude>(lo->second) : std::nullopt);
      if (!neg.empty()) alts.push_back("-" + neg);
    }
    const std::string out = either(alts);
    if (out.empty()) return error("json_schema: no number lies within the bounds at ", at);
    return out;
  }

  Result<std::string> string(const Json& s, const std::string& at) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return error("json_schema: 'pattern' must be a string at ", at);
      std::string p = s["pattern"].get<std::string>();
      if (!p.empty() && p.front() == '^') p.erase(0, 1);
      if (!p.empty() && p.back() == '$' && (p.size() < 2 || p[p.size() - 2] != '\\')) p.pop_back();
      return "\"(" + p + ")\"";
    }
    if (s.contains("format")) {
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
      const std::string time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?";
      if (f == "date") return "\"" + date + "\"";
      if (f == "time") return "\"" + time + "\"";
      if (f == "date-time") return "\"" + date + "T" + time + "\"";
      if (f == "uuid") return std::string("\"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\"");
      if (f == "email") return std::string("\"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}\"");
      // Other formats constrain nothing beyond a string (as JSON Schema makes formats annotations).
    }
    DS_ASSIGN_OR_RETURN(int64_t lo, count(s, "minLength", 0, at));
    DS_ASSIGN_OR_RETURN(int64_t hi, count(s, "maxLength", -1, at));
    if (hi >= 0 && hi < lo) return error("json_schema: maxLength < minLength at ", at);
    if (lo == 0 && hi < 0) return kString;
    return "\"" + kChar + repeat_bounds(lo, hi) + "\"";
  }

  Result<std::string> array(const Json& s, const std::string& at, int depth) {
    DS_ASSIGN_OR_RETURN(int64_t lo, count(s, "minItems", 0, at));
    DS_ASSIGN_OR_RETURN(int64_t hi, count(s, "maxItems", -1, at));
    if (hi >= 0 && hi < lo) return error("json_schema: maxItems < minItems at ", at);
    const std::string sep = kWs + "," + kWs;
    if (s.contains("prefixItems")) {  // a tuple: exactly those items
      const Json& p = s["prefixItems"];
      if (!p.is_array()) return error("json_schema: 'prefixItems' must be a list at ", at);
      std::string out = "\\[" + kWs;
      for (size_t i = 0; i < p.size(); ++i) {
        DS_ASSIGN_OR_RETURN(std::string r, value(p[i], at + "/prefixItems/" + std::to_string(i), depth + 1));
        out += (i ? sep : "") + r;
      }
      return out + kWs + "\\]";
    }
    std::string item = any_value(1);
    if (s.contains("items")) {
      DS_ASSIGN_OR_RETURN(item, value(s["items"], at + "/items", depth + 1));
    }
    if (hi == 0) return "\\[" + kWs + "\\]";
    // [ item (, item){lo-1, hi-1} ], the whole list optional when lo is 0.
    const std::string rest = "(" + sep + item + ")" + repeat_bounds(lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    const std::string some = item + rest;
    return "\\[" + kWs + (lo == 0 ? "(" + some + ")?" : some) + kWs + "\\]";
  }

  Result<std::string> object(const Json& s, const std::string& at, int depth) {
    if (!s.contains("properties")) return "\\{" + kWs + "(" + member_any() + "(" + kWs + "," + kWs + member_any() + ")*)?" + kWs + "\\}";
    const Json& props = s["properties"];
    if (!props.is_object()) return error("json_schema: 'properties' must be an object at ", at);
    std::vector<std::string> names, parts;
    std::vector<bool> required;
    const Json req = s.value("required", Json::array());
    if (!req.is_array()) return error("json_schema: 'required' must be a list at ", at);
    for (auto it = props.begin(); it != props.end(); ++it) {
      DS_ASSIGN_OR_RETURN(std::string v, value(it.value(), at + "/properties/" + it.key(), depth + 1));
      names.push_back(it.key());
      parts.push_back(regex_escape(Json(it.key()).dump()) + kWs + ":" + kWs + v);
      bool r = false;
      for (const Json& q : req) r = r || (q.is_string() && q.get<std::string>() == it.key());
      required.push_back(r);
    }
    for (const Json& q : req)
      if (!q.is_string() || !props.contains(q.get<std::string>()))
        return error("json_schema: required property ", q.dump(), " is not among the properties at ", at);
    const std::string sep = kWs + "," + kWs;
    // The first property present is one up to the first required; every later one follows a comma.
    size_t first_required = names.size();
    for (size_t i = 0; i < names.size(); ++i)
      if (required[i]) {
        first_required = i;
        break;
      }
    std::string body = "(";
    for (size_t first = 0; first < names.size() && first <= first_required; ++first) {
      std::string alt = parts[first];
      for (size_t j = first + 1; j < names.size(); ++j)
        alt += required[j] ? sep + parts[j] : "(" + sep + parts[j] + ")?";
      body += (first ? "|" : "") + alt;
    }
    body += ")";
    if (first_required == names.size()) body += "?";  // nothing required: {} too
    if (names.empty()) body = "";
    return "\\{" + kWs + body + kWs + "\\}";
  }

  static std::string member_any() { return kString + kWs + ":" + kWs + any_value(1); }

  const Json& root_;
};

}  // namespace

std::string regex_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\.^$|?*+()[]{}-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Result<std::string> json_schema_to_regex(const nlohmann::ordered_json& schema) {
  Converter c(schema);
  return c.value(schema, "#", 0);
}

}  // namespace ds
