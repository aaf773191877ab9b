// Streaming detokenizer tests: token-by-token output concatenated equals the Rust crate's full
// decode for every golden sequence, no push ever returns a split character, and stop strings are
// found across token boundaries.
#include "text/detokenizer.h"

#include <gtest/gtest.h>

#include "text/tokenizer_test_util.h"
#include "text/unicode.h"

namespace ds {
namespace {

using testing::golden;
using testing::ids_of;
using testing::v3_tokenizer;

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, DetokenizerOptions opt,
                   bool* all_valid = nullptr) {
  Detokenizer d(tok, std::move(opt));
  std::string out;
  for (int32_t id : ids) {
    std::string piece = d.push(id);
    if (all_valid && !is_valid_utf8(piece)) *all_valid = false;
    out += piece;
  }
  out += d.finish();
  EXPECT_EQ(out, d.text());
  return out;
}

TEST(Detokenizer, StreamingEqualsGoldenDecode) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  size_t n = 0, bad = 0;
  bool valid = true;
  for (const auto& d : golden()["decode"]) {
    auto ids = ids_of(d["ids"]);
    for (bool skip : {false, true}) {
      DetokenizerOptions opt;
      opt.skip_special_tokens = skip;
      std::string got = stream(*tok, ids, opt, &valid);
      if (got != d[skip ? "text_skip" : "text"].get<std::string>()) {
        if (++bad <= 5) ADD_FAILURE() << "mismatch for ids " << d["ids"].dump() << " skip=" << skip;
      }
      ++n;
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << n;
  EXPECT_TRUE(valid) << "a push() returned ill-formed UTF-8";
  // The encoded golden strings stream back to their text too.
  for (const auto& e : golden()["encode"]) {
    DetokenizerOptions keep;
    keep.skip_special_tokens = false;
    if (stream(*tok, ids_of(e["ids_special"]), keep, &valid) != "<｜begin▁of▁sentence｜>" + e["text"].get<std::string>())
      ++bad;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(valid);
}

// A 4-byte emoji fed as four single-byte tokens: nothing appears until the last byte.
TEST(Detokenizer, HoldsBackIncompleteCharacters) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  // Byte tokens: the vocabulary entry whose decoded bytes are exactly one byte.
  std::vector<int32_t> byte_id(256, -1);
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    const std::string& b = tok->token_bytes(id);
    if (b.size() == 1 && !tok->is_added(id) && byte_id[static_cast<unsigned char>(b[0])] < 0)
      byte_id[static_cast<unsigned char>(b[0])] = id;
  }
  const std::string emoji = "\xF0\x9F\x98\x80";
  Detokenizer d(*tok, {});
  EXPECT_EQ(d.push(byte_id['a']), "a");
  EXPECT_EQ(d.push(byte_id[0xF0]), "");
  EXPECT_EQ(d.push(byte_id[0x9F]), "");
  EXPECT_EQ(d.push(byte_id[0x98]), "");
  EXPECT_EQ(d.push(byte_id[0x80]), emoji);
  // An unfinished character at the end becomes U+FFFD.
  EXPECT_EQ(d.push(byte_id[0xE4]), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  // An ill-formed byte is replaced at once, not held.
  Detokenizer e(*tok, {});
  EXPECT_EQ(e.push(byte_id[0xFF]), "\xEF\xBF\xBD");
}

TEST(Detokenizer, StopStringAcrossTokens) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "The answer is 42. Observation: the model stops here and never says this.";
  auto ids = tok->encode(text, false);
  ASSERT_TRUE(ids.is_ok());
  DetokenizerOptions opt;
  opt.stop = {"never", "Observation:"};
  Detokenizer d(*tok, opt);
  std::string out;
  size_t fed = 0;
  for (int32_t id : *ids) {
    if (d.stopped()) break;
    out += d.push(id);
    ++fed;
    // Nothing that could begin "Observation:" is released early.
    EXPECT_EQ(out.find("Obs"), std::string::npos);
  }
  ASSERT_TRUE(d.stopped());
  EXPECT_EQ(d.stop_index(), 1);  // the earliest match, although listed second
  EXPECT_EQ(d.stop_string(), "Observation:");
  EXPECT_EQ(out, "The answer is 42. ");
  EXPECT_LT(fed, ids->size());
  EXPECT_EQ(d.push((*ids)[fed]), "");  // stopped: no more text
  EXPECT_EQ(d.finish(), "");
  // The stop string must really span tokens for this test to mean something.
  bool single = false;
  for (int32_t id : *ids)
    if (tok->token_bytes(id).find("Observation:") != std::string::npos) single = true;
  EXPECT_FALSE(single);
}

TEST(Detokenizer, HeldPrefixIsReleasedWhenNoStopMatches) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "abc STO STOP? no: STO";
  auto ids = tok->encode(text, false);
  ASSERT_TRUE(ids.is_ok());
  DetokenizerOptions opt;
  opt.stop = {"STOPPED"};
  Detokenizer d(*tok, opt);
  std::string out;
  for (int32_t id : *ids) out += d.push(id);
  EXPECT_EQ(out, "abc STO STOP? no: ");  // the final "STO" could still become "STOPPED"
  out += d.finish();
  EXPECT_FALSE(d.stopped());
  EXPECT_EQ(out, text);
}

TEST(Detokenizer, SpecialTokenOptions) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto ids = tok->encode("<｜User｜>hi<｜Assistant｜>there<｜end▁of▁sentence｜>", true);
  ASSERT_TRUE(ids.is_ok());
  DetokenizerOptions keep;
  keep.skip_special_tokens = false;
  EXPECT_EQ(stream(*tok, *ids, keep), "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>there<｜end▁of▁sentence｜>");
  // <｜User｜> and <｜Assistant｜> are added but not special: skipping keeps them.
  EXPECT_EQ(stream(*tok, *ids, {}), "<｜User｜>hi<｜Assistant｜>there");
  DetokenizerOptions spaced;
  spaced.spaces_between_special_tokens = true;
  EXPECT_EQ(stream(*tok, *ids, spaced), "<｜User｜> hi <｜Assistant｜> there");
}

}  // namespace
}  // namespace ds
