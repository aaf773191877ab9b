// libFuzzer target: arbitrary bytes as an `ebnf` grammar (text/ebnf_regex.*) and, when they parse as JSON, as a
// `structural_tag` spec (text/structural_tag.*): either refused with a message that names the constraint, or an
// automaton (ByteDfa compiles the grammar's regex or refuses it by name, e.g. too many states). What the automata
// admit is checked by the unit tests.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/ebnf_regex.h"
#include "text/regex_dfa.h"
#include "text/structural_tag.h"

namespace {

void require_named(const ds::Status& st, const char* source) {
  if (st.message().find(source) != std::string::npos) return;
  std::fprintf(stderr, "fuzz_constraint: an error without its source (%s): %s\n", source, st.message().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view g(reinterpret_cast<const char*>(data), size);
  auto re = ds::ebnf_to_regex(g, 4, 1 << 16);
  if (!re.is_ok()) {
    require_named(re.status(), "ebnf");
  } else {
    auto dfa = ds::ByteDfa::compile(*re, 2000);
    if (!dfa.is_ok()) require_named(dfa.status(), "regex");
  }
  const auto spec = nlohmann::ordered_json::parse(g.begin(), g.end(), nullptr, /*allow_exceptions=*/false);
  if (!spec.is_discarded()) {
    auto dfa = ds::structural_tag_dfa(spec, 2000);
    if (!dfa.is_ok()) require_named(dfa.status(), "structural_tag");
  }
  return 0;
}
