// Hostile tokenizer.json limits (RELIABILITY.md): token ids that would size dense tables to gigabytes are
// refused with a message naming the entry (found by fuzz_tokenizer_json: an id of 2e9 ran ASan out of memory).
#include <string>

#include <gtest/gtest.h>

#include "text/tokenizer.h"

namespace ds {
namespace {

std::string tokenizer_json(const std::string& big_vocab_id, const std::string& added_id) {
  return R"({"version": "1.0", "added_tokens": [{"id": )" + added_id +
         R"(, "content": "<s>", "special": true}], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 1, "b": 2, "ab": )" + big_vocab_id + R"(}, "merges": ["a b"]}})";
}

TEST(TokenizerLimits, SmallIdsLoad) {
  auto t = Tokenizer::from_json_text(tokenizer_json("3", "0"), "");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
}

TEST(TokenizerLimits, HugeVocabIdRefused) {
  for (const char* id : {"2000000000", "2097152", "99999999999"}) {
    auto t = Tokenizer::from_json_text(tokenizer_json(id, "0"), "");
    ASSERT_FALSE(t.is_ok()) << id;
    EXPECT_NE(t.status().message().find("'ab'"), std::string::npos) << t.status().message();
  }
}

TEST(TokenizerLimits, HugeAddedTokenIdRefused) {
  for (const char* id : {"2000000000", "-1", "1e3"}) {
    auto t = Tokenizer::from_json_text(tokenizer_json("3", id), "");
    ASSERT_FALSE(t.is_ok()) << id;
    EXPECT_NE(t.status().message().find("added token"), std::string::npos) << t.status().message();
  }
}

}  // namespace
}  // namespace ds
