// Flag parsing (see flags.h).
#include "app/flags.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace ds {

void Flags::add_string(const std::string& name, std::string def, std::string help) {
  specs_[name] = Spec{Kind::kString, std::move(def), std::move(help)};
  order_.push_back(name);
}
void Flags::add_int(const std::string& name, int64_t def, std::string help) {
  specs_[name] = Spec{Kind::kInt, std::to_string(def), std::move(help)};
  order_.push_back(name);
}
void Flags::add_double(const std::string& name, double def, std::string help) {
  std::ostringstream os;
  os << def;
  specs_[name] = Spec{Kind::kDouble, os.str(), std::move(help)};
  order_.push_back(name);
}
void Flags::add_bool(const std::string& name, std::string help) {
  specs_[name] = Spec{Kind::kBool, "false", std::move(help)};
  order_.push_back(name);
}

void Flags::add_int_list(const std::string& name, std::string def, std::string help) {
  specs_[name] = Spec{Kind::kIntList, std::move(def), std::move(help)};
  order_.push_back(name);
}

void Flags::add_alias(const std::string& alias, const std::string& target) {
  DS_CHECK(specs_.count(target) && !specs_.count(alias), "alias --", alias, " of --", target);
  aliases_[alias] = target;
}

static bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end) return false;
  *out = v;
  return true;
}

Status Flags::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return error("unexpected argument '", arg, "' (flags start with --)");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (auto a = aliases_.find(name); a != aliases_.end()) name = a->second;
    auto it = specs_.find(name);
    if (it == specs_.end()) return error("unknown flag --", name);
    Spec& s = it->second;
    if (s.kind == Kind::kBool) {
      if (!has_value) value = "true";
      if (value != "true" && value != "false") return error("flag --", name, " takes true or false, got '", value, "'");
    } else if (!has_value) {
      if (i + 1 >= argc) return error("flag --", name, " needs a value");
      value = argv[++i];
      // A list takes every value up to the next flag, as argparse's nargs="+".
      while (s.kind == Kind::kIntList && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        value += std::string(",") + argv[++i];
    }
    if (s.kind == Kind::kIntList) {
      if (Result<std::vector<int64_t>> v = parse_int_list(value, "flag --" + name); !v) return v.status();
    } else if (s.kind == Kind::kInt) {
      int64_t v;
      if (!parse_int64(value, &v)) return error("flag --", name, " needs an integer, got '", value, "'");
    } else if (s.kind == Kind::kDouble) {
      double v;
      if (!parse_double(value, &v)) return error("flag --", name, " needs a number, got '", value, "'");
    }
    s.value = value;
    s.set = true;
  }
  return Status::ok();
}

const Flags::Spec& Flags::spec(const std::string& name, Kind kind) const {
  auto it = specs_.find(name);
  DS_CHECK(it != specs_.end(), "flag --", name, " was never declared");
  DS_CHECK(it->second.kind == kind, "flag --", name, " read with the wrong type");
  return it->second;
}

std::string Flags::get_string(const std::string& name) const { return spec(name, Kind::kString).value; }
int64_t Flags::get_int(const std::string& name) const {
  int64_t v = 0;
  DS_CHECK(parse_int64(spec(name, Kind::kInt).value, &v));
  return v;
}
double Flags::get_double(const std::string& name) const {
  double v = 0;
  DS_CHECK(parse_double(spec(name, Kind::kDouble).value, &v));
  return v;
}
bool Flags::get_bool(const std::string& name) const { return spec(name, Kind::kBool).value == "true"; }
std::vector<int64_t> Flags::get_int_list(const std::string& name) const {
  const std::string& v = spec(name, Kind::kIntList).value;
  if (v.empty()) return {};
  Result<std::vector<int64_t>> out = parse_int_list(v, "--" + name);
  DS_CHECK(out.is_ok(), out.status().message());  // checked by parse(), or a declared default
  return *out;
}
bool Flags::was_set(const std::string& name) const {
  auto it = specs_.find(name);
  DS_CHECK(it != specs_.end(), "flag --", name, " was never declared");
  return it->second.set;
}

std::string Flags::usage(const std::string& command) const {
  std::ostringstream os;
  os << "usage: dserve " << command << " [flags]\n";
  for (const auto& name : order_) {
    const Spec& s = specs_.at(name);
    os << "  --" << name;
    for (const auto& [alias, target] : aliases_)
      if (target == name) os << ", --" << alias;
    if (s.kind != Kind::kBool)
      os << " <" << (s.kind == Kind::kString ? "str" : s.kind == Kind::kIntList ? "num ..." : "num") << ">";
    os << "\t" << s.help;
    if (s.kind != Kind::kBool && !s.value.empty()) os << " (default: " << s.value << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace ds
