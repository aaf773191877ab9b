// UTF-8 helper tests: lossy decoding follows the Unicode "maximal subpart" practice (the example
// of the Unicode Standard, section 3.9, Table 3-8), and incomplete tails are found.
#include "text/unicode.h"

#include <gtest/gtest.h>

#include "text/byte_level.h"

namespace ds {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Unicode, LossyMatchesUnicodeTable3_8) {
  std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  std::string want = "a" + kFFFD + kFFFD + kFFFD + "b" + kFFFD + "c" + kFFFD + kFFFD + "d";
  EXPECT_EQ(utf8_lossy(in), want);
}

TEST(Unicode, LossyEdgeCases) {
  EXPECT_EQ(utf8_lossy("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
  EXPECT_EQ(utf8_lossy("\xE4\xB8"), kFFFD);                      // truncated: one replacement
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // surrogate: each byte
  EXPECT_EQ(utf8_lossy("\xC0\x80"), kFFFD + kFFFD);              // overlong lead
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Unicode, IncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail("ab"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE4"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE4\xB8"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE4\xB8\xAD"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xE0\x80"), 0u);  // can never complete (overlong)
  EXPECT_EQ(utf8_incomplete_tail("\xFF"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\x80"), 0u);
}

TEST(Unicode, Validation) {
  EXPECT_TRUE(is_valid_utf8("héllo 中文 😀"));
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);
}

// GPT-2 alphabet: printable bytes stand for themselves, space is U+0120 'Ġ', newline U+010A 'Ċ'.
TEST(ByteLevel, Alphabet) {
  EXPECT_EQ(byte_to_unicode()['a'], static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_to_unicode()[' '], 0x120u);
  EXPECT_EQ(byte_to_unicode()['\n'], 0x10Au);
  EXPECT_EQ(byte_to_unicode()[0xAD], 0x143u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode()[b]), b);
  std::string out;
  byte_level_decode_append("\xC4\xA0hi", &out);  // "Ġhi"
  EXPECT_EQ(out, " hi");
  out.clear();
  byte_level_decode_append("<\xEF\xBD\x9C>", &out);  // '｜' is not in the alphabet: kept as is
  EXPECT_EQ(out, "<\xEF\xBD\x9C>");
}

}  // namespace
}  // namespace ds
