// UTF-8 helpers (see unicode.h). The well-formedness rules are those of Unicode Table 3-7, which is
// also what Rust's from_utf8_lossy follows when it decides how many bytes one U+FFFD replaces.
#include "text/unicode.h"

namespace ds {
namespace {

constexpr const char kReplacement[] = "\xEF\xBF\xBD";

// Expected length of a sequence with lead byte b: 1 for ASCII, 2-4 for valid leads, 0 otherwise.
int lead_width(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

bool is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

// Whether the second byte is allowed after lead byte `lead` (excludes overlongs, surrogates and
// code points above U+10FFFF).
bool second_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return is_cont(b);
  }
}

// Number of bytes of the well-formed prefix of the sequence starting at s[i] (0 if s[i] is not a
// lead byte), and the full width the lead byte announces.
int valid_prefix(std::string_view s, size_t i, int* width) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  int w = lead_width(p[i]);
  *width = w;
  if (w <= 1) return w;
  int k = 1;
  if (i + 1 >= n || !second_ok(p[i], p[i + 1])) return k;
  k = 2;
  while (k < w && i + k < n && is_cont(p[i + k])) ++k;
  return k;
}

}  // namespace

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int utf8_sequence_length(std::string_view s, size_t i, uint32_t* cp) {
  if (i >= s.size()) return 0;
  int width = 0;
  int k = valid_prefix(s, i, &width);
  if (width == 0 || k != width) return 0;
  if (cp) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    uint32_t c = width == 1 ? p[0] : width == 2 ? (p[0] & 0x1F) : width == 3 ? (p[0] & 0x0F) : (p[0] & 0x07);
    for (int j = 1; j < width; ++j) c = (c << 6) | (p[j] & 0x3F);
    *cp = c;
  }
  return width;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    // Fast path over ASCII.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int len = utf8_sequence_length(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void append_utf8_lossy(std::string* out, std::string_view s) {
  size_t i = 0, n = s.size();
  size_t run = 0;  // start of the current run of well-formed bytes
  while (i < n) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int width = 0;
    int k = valid_prefix(s, i, &width);
    if (width != 0 && k == width) {
      i += k;
      continue;
    }
    out->append(s.data() + run, i - run);
    out->append(kReplacement);
    i += (width == 0 ? 1 : k);  // an invalid lead byte alone, else the maximal valid prefix
    run = i;
  }
  out->append(s.data() + run, n - run);
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_utf8_lossy(&out, bytes);
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  size_t n = s.size();
  // A sequence is at most 4 bytes, so an incomplete one starts within the last 3 bytes.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    auto b = static_cast<unsigned char>(s[i]);
    if (is_cont(b)) continue;
    int width = 0;
    int k = valid_prefix(s, i, &width);
    return (width > 1 && static_cast<size_t>(k) == back && k < width) ? back : 0;
  }
  return 0;
}

bool is_unicode_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace ds
