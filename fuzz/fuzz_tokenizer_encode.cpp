// libFuzzer target: the DeepSeek-V3 tokenizer on arbitrary bytes (invalid UTF-8, special-token strings,
// huge words), then decode of the ids and of arbitrary id sequences. Needs the tokenizer fetched by
// scripts/fetch_test_tokenizer.sh (DSERVE_FUZZ_TOKENIZER points at its directory).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "text/tokenizer.h"

static const ds::Tokenizer* tokenizer() {
  static ds::Tokenizer* tok = [] {
    const char* dir = std::getenv("DSERVE_FUZZ_TOKENIZER");
    auto t = ds::Tokenizer::load(dir ? dir : "tests/data/downloads/deepseek_v3_tokenizer");
    if (!t.is_ok()) {
      std::fprintf(stderr, "fuzz_tokenizer_encode: %s\n", t.status().message().c_str());
      std::abort();
    }
    return new ds::Tokenizer(std::move(t.value()));
  }();
  return tok;
}

// The 128K-entry tokenizer loads once here, outside the per-input -timeout: under ASan on a loaded 2-core machine the
// load alone passed 20 s when it ran inside the first input (session 55's seed-55 run).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ds::Tokenizer* tok = tokenizer();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ids = tok->encode(text, size % 2 == 0);
  if (ids.is_ok()) {
    std::string back = tok->decode(*ids, false);
    (void)back;
  }
  // The same bytes as little-endian id sequences, some out of range.
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  for (int32_t& v : raw) v %= tok->vocab_size() + 100;
  std::string s = tok->decode(raw, size % 3 == 0);
  (void)s;
  return 0;
}
