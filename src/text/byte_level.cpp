// GPT-2 byte <-> unicode alphabet (see byte_level.h).
#include "text/byte_level.h"

#include "text/unicode.h"

namespace ds {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 324> from_cp{};  // every stand-in is below U+0144
  Tables() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : 256 + extra++;
    }
    for (int b = 0; b < 256; ++b) {
      append_utf8(&to_utf8[b], to_cp[b]);
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<uint32_t, 256>& byte_to_unicode() { return tables().to_cp; }
const std::array<std::string, 256>& byte_to_utf8() { return tables().to_utf8; }

int unicode_to_byte(uint32_t cp) {
  const auto& t = tables();
  return cp < t.from_cp.size() ? t.from_cp[cp] : -1;
}

void byte_level_encode_append(std::string_view bytes, std::string* out) {
  const auto& t = tables().to_utf8;
  for (unsigned char b : bytes) out->append(t[b]);
}

void byte_level_decode_append(std::string_view token, std::string* out) {
  size_t start = out->size();
  size_t i = 0;
  while (i < token.size()) {
    uint32_t cp = 0;
    int len = utf8_sequence_length(token, i, &cp);
    int b = len ? unicode_to_byte(cp) : -1;
    if (b < 0) {  // not all characters are in the alphabet: keep the token as it is
      out->resize(start);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(b));
    i += len;
  }
}

}  // namespace ds
