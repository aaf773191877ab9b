// Command-line flag parsing shared by every subcommand: --name value, --name=value, booleans, and integer lists
// written as SGLang's (argparse nargs="+") are, `--batch-size 1 8 16`, or with commas, `--batch-size 1,8,16`.
// Unknown flags, missing values and malformed numbers are user errors with a message naming the flag.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/parse.h"  // parse_int_list, for the flags that take lists
#include "core/status.h"

namespace ds {

class Flags {
 public:
  // Declare before parse(). `help` is shown by usage().
  void add_string(const std::string& name, std::string default_value, std::string help);
  void add_int(const std::string& name, int64_t default_value, std::string help);
  void add_double(const std::string& name, double default_value, std::string help);
  void add_bool(const std::string& name, std::string help);  // default false; --name or --name=true|false
  // Integers: the values after --name up to the next --flag, each one or several comma-separated ("1 8", "1,8",
  // "--name=1,8"). default_value: the same text ("" for none).
  void add_int_list(const std::string& name, std::string default_value, std::string help);
  // --alias means --target (declared before): SGLang's spellings, e.g. --tp for --tp-size, --model for --model-path.
  void add_alias(const std::string& alias, const std::string& target);

  Status parse(int argc, char** argv);  // argv[0] is the subcommand name

  std::string get_string(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::vector<int64_t> get_int_list(const std::string& name) const;  // empty when neither given nor defaulted
  bool was_set(const std::string& name) const;

  std::string usage(const std::string& command) const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kIntList };
  struct Spec {
    Kind kind;
    std::string value;
    std::string help;
    bool set = false;
  };
  const Spec& spec(const std::string& name, Kind kind) const;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> aliases_;  // alias -> declared name
  std::vector<std::string> order_;
};

}  // namespace ds
