// The GPT-2 "byte-level" alphabet used by ByteLevel pre-tokenizers and decoders: every byte maps to a
// printable Unicode character (printable Latin-1 bytes map to themselves, the others to U+0100...).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds {

// byte -> code point of its stand-in character.
const std::array<uint32_t, 256>& byte_to_unicode();
// byte -> UTF-8 of its stand-in character.
const std::array<std::string, 256>& byte_to_utf8();
// Code point -> byte, or -1 when the character is not part of the alphabet.
int unicode_to_byte(uint32_t cp);

// Appends the stand-in characters of every byte of `bytes`.
void byte_level_encode_append(std::string_view bytes, std::string* out);
// Maps a token back to bytes as the ByteLevel decoder does: when every character of `token` is in
// the alphabet, the bytes they stand for; otherwise the token's own UTF-8 bytes unchanged.
void byte_level_decode_append(std::string_view token, std::string* out);

}  // namespace ds
