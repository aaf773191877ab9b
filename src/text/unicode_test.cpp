// UTF-8 helper tests: lossy decoding follows the Unicode "maximal subpart" practice (the example
// of the Unicode Standard, section 3.9, Table 3-8), and incomplete tails are found.
#include "text/unicode.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/pretokenizer.h"

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

// Every code point: our regex classes (PCRE2 plus unicode_classes.cpp) match exactly the code points
// that the Rust tokenizers crate's regex engine matches (tests/data/tokenizer_unicode_classes.json,
// made by scripts/make_tokenizer_golden.py --unicode-classes). On failure the message lists the
// ranges to add or remove.
TEST(UnicodeClasses, MatchRustTokenizersForEveryCodePoint) {
  const char* src = std::getenv("DSERVE_SOURCE_DIR");
  std::ifstream f(std::string(src ? src : DSERVE_SOURCE_DIR) + "/tests/data/tokenizer_unicode_classes.json");
  ASSERT_TRUE(f) << "tests/data/tokenizer_unicode_classes.json missing";
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  struct Cls {
    const char* key;
    const char* pattern;
  } classes[] = {{"L", "\\p{L}"}, {"M", "\\p{M}"}, {"N", "\\p{N}"}, {"P", "\\p{P}"}, {"S", "\\p{S}"},
                 {"s", "\\s"}, {"L", "[^\\p{L}]"}, {"S", "[a\\p{S}]"}};
  for (size_t c = 0; c < std::size(classes); ++c) {
    const Cls& cls = classes[c];
    const bool negated = cls.pattern[1] == '^';
    const bool with_a = cls.pattern[1] == 'a';
    auto re = Regex::compile(cls.pattern);
    ASSERT_TRUE(re.is_ok()) << re.status().message();
    std::vector<bool> want(0x110000, false);
    for (const auto& r : j[cls.key])
      for (uint32_t cp = r[0].get<uint32_t>(); cp <= r[1].get<uint32_t>(); ++cp) want[cp] = true;
    if (with_a) want['a'] = true;
    std::string text;
    std::vector<uint32_t> cps;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      cps.push_back(cp);
    }
    std::string bad;
    int nbad = 0;
    std::vector<std::pair<uint32_t, uint32_t>> m;
    for (uint32_t cp : cps) {
      text.clear();
      append_utf8(&text, cp);
      m.clear();
      ASSERT_TRUE(re.value()->find_all(text, &m).is_ok());
      bool got = !m.empty();
      if (got != (want[cp] != negated)) {
        if (++nbad <= 20) bad += " U+" + std::to_string(cp) + (got ? "(extra)" : "(missing)");
      }
    }
    EXPECT_EQ(nbad, 0) << cls.pattern << ":" << bad;
  }
}

}  // namespace
}  // namespace ds
