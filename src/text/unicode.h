// UTF-8 helpers for the tokenizer and detokenizer: encoding code points, validation, Rust-compatible
// lossy decoding (one U+FFFD per maximal ill-formed subpart, as String::from_utf8_lossy) and finding
// an incomplete-but-still-valid trailing sequence that a streaming decoder must hold back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Appends the UTF-8 encoding of code point `cp` (must be a scalar value <= 0x10FFFF).
void append_utf8(std::string* out, uint32_t cp);

// Length (1-4) of the well-formed UTF-8 sequence starting at s[i], or 0 when it is ill-formed or
// truncated. `cp` receives the code point when non-null.
int utf8_sequence_length(std::string_view s, size_t i, uint32_t* cp = nullptr);

// Byte offset of the first ill-formed byte, or npos when `s` is well-formed UTF-8.
size_t find_invalid_utf8(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

// Decodes bytes to valid UTF-8, replacing each maximal ill-formed subpart by U+FFFD exactly like
// Rust's String::from_utf8_lossy (the decoder that Hugging Face tokenizers uses).
std::string utf8_lossy(std::string_view bytes);
void append_utf8_lossy(std::string* out, std::string_view bytes);

// Number of trailing bytes of `s` that form a proper prefix of a well-formed sequence (so more bytes
// could still complete it); 0 when `s` ends at a character boundary or with an ill-formed tail.
size_t utf8_incomplete_tail(std::string_view s);

// Rust's char::is_whitespace (Unicode White_Space property).
bool is_unicode_whitespace(uint32_t cp);

}  // namespace ds
