// libFuzzer target: arbitrary bytes as an `ebnf` grammar (text/ebnf_regex.*): either refused with a message that
// names the grammar as its source, or turned into a regex that ByteDfa compiles or refuses with a message (e.g. too
// many states). What the regex admits is checked by the unit tests (ebnf_regex_test.cpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "text/ebnf_regex.h"
#include "text/regex_dfa.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view g(reinterpret_cast<const char*>(data), size);
  auto re = ds::ebnf_to_regex(g, 4, 1 << 16);
  if (!re.is_ok()) {
    if (re.status().message().find("ebnf") == std::string::npos) {
      std::fprintf(stderr, "fuzz_ebnf: an error without its source: %s\n", re.status().message().c_str());
      std::abort();
    }
    return 0;
  }
  auto dfa = ds::ByteDfa::compile(*re, 2000);
  if (!dfa.is_ok() && dfa.status().message().empty()) {
    std::fprintf(stderr, "fuzz_ebnf: the regex of an accepted grammar was refused without a message\n");
    std::abort();
  }
  return 0;
}
