// libFuzzer target: building a tokenizer from an arbitrary tokenizer.json (cycles in merges, huge merges,
// bad regexes, missing fields), then encoding a fixed text with whatever loads.
#include <cstdint>
#include <string>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = ds::Tokenizer::from_json_text(json, "", "fuzz");
  if (!tok.is_ok()) return 0;
  auto ids = tok->encode("Hello world 12345 \xe4\xbd\xa0\xe5\xa5\xbd  \n\t!", true);
  if (ids.is_ok()) (void)tok->decode(*ids, true);
  return 0;
}
