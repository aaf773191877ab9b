// Tokenizer tests: every string of tests/data/tokenizer_golden.json (made by the Rust tokenizers
// crate from the real DeepSeek-V3 tokenizer) must encode and decode exactly; plus small hand-made
// tokenizers for merge formats, split behaviours and added-token rules.
#include "text/tokenizer.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/pretokenizer.h"
#include "text/tokenizer_test_util.h"

namespace ds {
namespace {

using testing::escaped;
using testing::golden;
using testing::ids_of;
using testing::v3_tokenizer;

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

TEST(TokenizerGolden, FileIsPresentAndLarge) {
  const auto& g = golden();
  ASSERT_FALSE(g.is_discarded()) << "tests/data/tokenizer_golden.json missing or invalid";
  EXPECT_GE(g["encode"].size(), 2000u);
  EXPECT_GE(g["decode"].size(), 1000u);
}

TEST(TokenizerGolden, EncodeEveryStringExactly) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const auto& g = golden();
  ASSERT_FALSE(g.is_discarded());
  size_t n = 0, bad = 0, bad_special = 0;
  for (const auto& e : g["encode"]) {
    const std::string text = e["text"].get<std::string>();
    auto ids = tok->encode(text, false);
    ASSERT_TRUE(ids.is_ok()) << ids.status().message();
    auto want = ids_of(e["ids"]);
    if (ids.value() != want) {
      if (++bad <= 10)
        ADD_FAILURE() << "[" << e["cat"].get<std::string>() << "] '" << escaped(text) << "'\n got  " << join(*ids)
                      << "\n want " << join(want);
    }
    auto ids_sp = tok->encode(text, true);
    ASSERT_TRUE(ids_sp.is_ok());
    if (ids_sp.value() != ids_of(e["ids_special"])) ++bad_special;
    ++n;
  }
  EXPECT_EQ(bad, 0u) << "of " << n << " strings";
  EXPECT_EQ(bad_special, 0u) << "of " << n << " strings (add_special_tokens)";
}

TEST(TokenizerGolden, DecodeEveryCaseExactly) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  size_t bad = 0;
  for (const auto& d : golden()["decode"]) {
    auto ids = ids_of(d["ids"]);
    std::string a = tok->decode(ids, false), b = tok->decode(ids, true);
    if (a != d["text"].get<std::string>() || b != d["text_skip"].get<std::string>()) {
      if (++bad <= 10)
        ADD_FAILURE() << "ids " << join(ids) << "\n got  '" << escaped(a) << "' / '" << escaped(b) << "'\n want '"
                      << escaped(d["text"].get<std::string>()) << "' / '"
                      << escaped(d["text_skip"].get<std::string>()) << "'";
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(TokenizerGolden, EncodedIdsDecodeToTheirText) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  size_t bad = 0;
  for (const auto& e : golden()["encode"]) {
    if (tok->decode(ids_of(e["ids"]), false) != e["text"].get<std::string>()) ++bad;
    // With BOS kept (skipping would also drop special-token text inside the string itself).
    if (tok->decode(ids_of(e["ids_special"]), false) != "<｜begin▁of▁sentence｜>" + e["text"].get<std::string>()) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}

// Facts of spec section 7.1.
TEST(TokenizerV3, SpecialTokensAndVocabulary) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 128815);
  EXPECT_EQ(tok->added_tokens().size(), 818u);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(tok->token_to_id("<|EOT|>"), 128805);
  EXPECT_TRUE(tok->is_special(0));
  EXPECT_TRUE(tok->is_special(128799));
  EXPECT_TRUE(tok->is_special(128805));
  EXPECT_FALSE(tok->is_special(128803));
  EXPECT_TRUE(tok->is_added(128803));
  EXPECT_FALSE(tok->is_added(1000));
  auto ids = tok->encode("<｜User｜>hi", true);
  ASSERT_TRUE(ids.is_ok());
  ASSERT_GE(ids->size(), 3u);
  EXPECT_EQ((*ids)[0], 0);  // BOS from add_bos_token
  EXPECT_EQ((*ids)[1], 128803);
  // Digits are split in runs of at most three.
  auto d = tok->encode("12345", false);
  ASSERT_TRUE(d.is_ok());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ(*tok->id_to_token((*d)[0]), "123");
  EXPECT_EQ(*tok->id_to_token((*d)[1]), "45");
}

TEST(TokenizerV3, RejectsInvalidUtf8) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto r = tok->encode("ab\xE4\xB8", false);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos);
}

TEST(TokenizerV3, UnknownIdsAreIgnoredByDecode) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto ids = tok->encode("hello world", false);
  ASSERT_TRUE(ids.is_ok());
  std::vector<int32_t> with_bad = *ids;
  with_bad.insert(with_bad.begin() + 1, 999999);
  with_bad.push_back(-5);
  EXPECT_EQ(tok->decode(with_bad, false), "hello world");
}

// Long inputs must not take quadratic time: ~3 MB with 300 KB runs of one letter, of spaces, of
// digits and of CJK must encode (and round-trip) well within the test timeout.
TEST(TokenizerV3, LongInputsAreNotQuadratic) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::string text = std::string(300000, 'a') + std::string(300000, ' ') + "x" + std::string(300000, '7') + "\n";
  for (int i = 0; i < 100000; ++i) text += "中";
  text += std::string(300000, '\t') + "\r\n";
  for (int i = 0; i < 20000; ++i) text += "The quick brown fox, 12 jumps!\n";
  auto t0 = std::chrono::steady_clock::now();
  auto ids = tok->encode(text, false);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  EXPECT_EQ(tok->decode(*ids, false), text);
  EXPECT_LT(s, 60.0) << "encoding " << text.size() << " bytes took " << s << " s";
}

TEST(TokenizerV3, CacheDoesNotChangeResults) {
  Result<Tokenizer> fresh = Tokenizer::load(testing::v3_tokenizer_dir());
  ASSERT_TRUE(fresh.is_ok());
  Tokenizer nocache = fresh.value();
  nocache.set_cache_capacity(0);
  const Tokenizer* cached = v3_tokenizer();
  ASSERT_NE(cached, nullptr);
  size_t k = 0;
  for (const auto& e : golden()["encode"]) {
    if (k++ % 4) continue;
    std::string text = e["text"].get<std::string>();
    auto a = cached->encode(text, false);
    auto b = nocache.encode(text, false);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(*a, *b) << escaped(text);
  }
}

// One tokenizer shared by several threads (as the server does) gives the golden results.
TEST(TokenizerV3, ConcurrentEncodeMatchesGolden) {
  Result<Tokenizer> fresh = Tokenizer::load(testing::v3_tokenizer_dir());
  ASSERT_TRUE(fresh.is_ok());
  const Tokenizer& tok = fresh.value();
  const auto& entries = golden()["encode"];
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < entries.size(); i += 2) {  // overlapping halves: shared cache entries
        auto ids = tok.encode(entries[i]["text"].get<std::string>(), false);
        if (!ids.is_ok() || *ids != ids_of(entries[i]["ids"])) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- hand-made tokenizers ----------------------------------------------------------------------

std::string mini_tokenizer(const std::string& merges_json, const std::string& pre_tokenizer,
                           const std::string& added = "[]", const std::string& post = "null") {
  return R"({"version":"1.0","added_tokens":)" + added +
         R"(,"normalizer":null,"pre_tokenizer":)" + pre_tokenizer + R"(,"post_processor":)" + post +
         R"(,"decoder":null,"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"-":3,"ab":4,"bc":5,"abc":6,"aa":7," ":8,"<x>":9},"merges":)" +
         merges_json + "}}";
}

std::vector<std::string> tokens(const Tokenizer& t, const std::string& text) {
  auto ids = t.encode(text, false);
  EXPECT_TRUE(ids.is_ok()) << ids.status().message();
  std::vector<std::string> out;
  if (ids.is_ok())
    for (int32_t id : *ids) out.push_back(*t.id_to_token(id));
  return out;
}

TEST(TokenizerMini, MergesInBothSerialisations) {
  for (const char* merges : {R"(["a b", "ab c", "a a"])", R"([["a","b"],["ab","c"],["a","a"]])"}) {
    auto t = Tokenizer::from_json_text(mini_tokenizer(merges, "null"), "");
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(tokens(*t, "abc"), (std::vector<std::string>{"abc"}));
    // "a a" ranks after "a b": in "aab" the pair (a,b) merges first.
    EXPECT_EQ(tokens(*t, "aab"), (std::vector<std::string>{"a", "ab"}));
    EXPECT_EQ(tokens(*t, "aaa"), (std::vector<std::string>{"aa", "a"}));
    EXPECT_EQ(tokens(*t, "bc"), (std::vector<std::string>{"b", "c"}));  // no "b c" merge
  }
}

TEST(TokenizerMini, BadMergeIsAnError) {
  auto t = Tokenizer::from_json_text(mini_tokenizer(R"(["a z"])", "null"), "");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("merges[0]"), std::string::npos);
}

// The example of the Hugging Face documentation for Split ("the-final--countdown" on "-"), on the
// pre-tokenizer directly, with a literal and a regex pattern.
TEST(PreTokenizerMini, SplitBehaviours) {
  struct Case {
    const char* behavior;
    std::vector<std::string> pieces;
  } cases[] = {
      {"Removed", {"the", "final", "countdown"}},
      {"Isolated", {"the", "-", "final", "-", "-", "countdown"}},
      {"MergedWithPrevious", {"the-", "final-", "-", "countdown"}},
      {"MergedWithNext", {"the", "-final", "-", "-countdown"}},
      {"Contiguous", {"the", "-", "final", "--", "countdown"}},
  };
  const std::string text = "the-final--countdown";
  for (const auto& c : cases) {
    for (bool regex : {false, true}) {
      auto j = nlohmann::json::parse(std::string(R"({"type":"Split","pattern":{)") +
                                     (regex ? R"("Regex":"-")" : R"("String":"-")") + R"(},"behavior":")" +
                                     c.behavior + R"(","invert":false})");
      auto pre = PreTokenizer::from_json(j);
      ASSERT_TRUE(pre.is_ok()) << pre.status().message();
      std::vector<Piece> pieces;
      ASSERT_TRUE(pre->split(text, &pieces).is_ok());
      std::vector<std::string> got;
      for (const auto& p : pieces) got.push_back(text.substr(p.begin, p.end - p.begin));
      EXPECT_EQ(got, c.pieces) << c.behavior << (regex ? " (regex)" : " (string)");
    }
  }
}

// The DeepSeek-V3 pre-tokenizer on a few strings whose pieces follow from spec section 7.1.
TEST(PreTokenizerV3, PiecesFollowTheSpec) {
  const Tokenizer* tok = v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::ifstream f(testing::v3_tokenizer_dir() + "/tokenizer.json");
  auto j = nlohmann::json::parse(f);
  auto pre = PreTokenizer::from_json(j["pre_tokenizer"]);
  ASSERT_TRUE(pre.is_ok()) << pre.status().message();
  EXPECT_TRUE(pre->byte_level());
  auto split = [&](const std::string& text) {
    std::vector<Piece> pieces;
    EXPECT_TRUE(pre->split(text, &pieces).is_ok());
    std::vector<std::string> got;
    for (const auto& p : pieces) got.push_back(text.substr(p.begin, p.end - p.begin));
    return got;
  };
  EXPECT_EQ(split("12345"), (std::vector<std::string>{"123", "45"}));
  EXPECT_EQ(split("Hello world"), (std::vector<std::string>{"Hello", " world"}));
  EXPECT_EQ(split("中文abc"), (std::vector<std::string>{"中文", "abc"}));
  EXPECT_EQ(split(".Net"), (std::vector<std::string>{".Net"}));
  EXPECT_EQ(split("a  \nb"), (std::vector<std::string>{"a", "  \n", "b"}));
  EXPECT_EQ(split("x   y"), (std::vector<std::string>{"x", "  ", " y"}));
}

// Isolated vs MergedWithPrevious on a pattern where merging changes BPE results: "a" + "b" pieces
// can only become "ab" when they are in one piece.
TEST(TokenizerMini, SplitInvertAndMerging) {
  auto make = [](const char* behavior, bool invert) {
    std::string pre = std::string(R"({"type":"Split","pattern":{"String":"b"},"behavior":")") + behavior +
                      R"(","invert":)" + (invert ? "true" : "false") + "}";
    return Tokenizer::from_json_text(mini_tokenizer(R"(["a b","ab c"])", pre), "");
  };
  auto iso = make("Isolated", false);
  ASSERT_TRUE(iso.is_ok());
  EXPECT_EQ(tokens(*iso, "abc"), (std::vector<std::string>{"a", "b", "c"}));
  auto prev = make("MergedWithPrevious", false);
  ASSERT_TRUE(prev.is_ok());
  EXPECT_EQ(tokens(*prev, "abc"), (std::vector<std::string>{"ab", "c"}));
  auto next = make("MergedWithNext", false);
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(tokens(*next, "abc"), (std::vector<std::string>{"a", "b", "c"}));  // "bc" has no merge
  // Inverted: the gaps "a" and "c" become the matches; "b" is merged into the match before it.
  auto inv = make("MergedWithNext", true);
  ASSERT_TRUE(inv.is_ok());
  EXPECT_EQ(tokens(*inv, "abc"), (std::vector<std::string>{"ab", "c"}));
  auto removed = make("Removed", true);
  ASSERT_TRUE(removed.is_ok());
  EXPECT_EQ(tokens(*removed, "abc"), (std::vector<std::string>{"b"}));
}

TEST(TokenizerMini, AddedTokensAndTemplate) {
  std::string added = R"([{"id":9,"content":"<x>","special":true,"single_word":false,"lstrip":false,"rstrip":false,"normalized":false}])";
  std::string post = R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"<x>","type_id":0}}],"pair":[],"special_tokens":{"<x>":{"id":"<x>","ids":[9],"tokens":["<x>"]}}})";
  auto t = Tokenizer::from_json_text(mini_tokenizer(R"(["a b"])", "null", added, post), "");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  // "a<x>b": the added token splits the text, so "a" and "b" cannot merge.
  EXPECT_EQ(tokens(*t, "a<x>b"), (std::vector<std::string>{"a", "<x>", "b"}));
  auto ids = t->encode("ab", true);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{9, 4, 9}));
  EXPECT_EQ(t->decode(std::vector<int32_t>{9, 4, 9}, true), "ab");
  EXPECT_EQ(t->decode(std::vector<int32_t>{9, 4, 9}, false), "<x> ab <x>");  // no decoder: joined by spaces
}

TEST(TokenizerMini, AddedTokenStripFlags) {
  std::string added = R"([{"id":9,"content":"<x>","special":true,"single_word":false,"lstrip":true,"rstrip":true,"normalized":false}])";
  auto t = Tokenizer::from_json_text(mini_tokenizer(R"(["a b"])", "null", added), "");
  ASSERT_TRUE(t.is_ok());
  // The spaces around the token are absorbed into it.
  EXPECT_EQ(tokens(*t, "a  <x>  b"), (std::vector<std::string>{"a", "<x>", "b"}));
  std::string sw = R"([{"id":9,"content":"<x>","special":true,"single_word":true,"lstrip":false,"rstrip":false,"normalized":false}])";
  auto w = Tokenizer::from_json_text(mini_tokenizer(R"(["a b"])", "null", sw), "");
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(tokens(*w, "a <x> b"), (std::vector<std::string>{"a", " ", "<x>", " ", "b"}));
  // Glued to a letter it is not a single word, so it is ordinary text ('<' and 'x' are unknown
  // characters without unk token and are dropped, as the Rust crate does).
  EXPECT_EQ(tokens(*w, "a<x>"), (std::vector<std::string>{"a"}));
}

TEST(TokenizerMini, UnsupportedPiecesAreNamed) {
  std::string bad = mini_tokenizer(R"([])", R"({"type":"Metaspace"})");
  auto t = Tokenizer::from_json_text(bad, "");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("Metaspace"), std::string::npos);
  auto missing = Tokenizer::load("/nonexistent/dir");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace ds
