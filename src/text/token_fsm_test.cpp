// TokenFsm's allowed sets against a brute-force walk of every token's bytes, over random vocabularies and the states
// random texts reach; tokens without bytes are never allowed.
#include "text/token_fsm.h"

#include <random>

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(TokenFsm, AllowedSetsEqualABruteForceWalk) {
  std::mt19937 rng(3);
  const char* patterns[] = {"(ab)+c", "[a-c]*", "a{2,4}(b|cc)?", "(a|bc)*b", "\\{\"x\": [0-9]+\\}"};
  for (int trial = 0; trial < 20; ++trial) {
    const std::string alphabet = trial % 5 == 4 ? "{}\"x: 0123456789ab" : "abc";
    std::vector<std::string> bytes;
    for (int i = 0; i < 300; ++i) {
      std::string t;
      const int len = static_cast<int>(rng() % 4);  // some empty: never allowed
      for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
      bytes.push_back(t);
    }
    auto vocab = std::make_shared<const VocabTrie>(bytes);
    const char* p = patterns[trial % 5];
    auto dfa = ByteDfa::compile(p);
    ASSERT_TRUE(dfa.is_ok());
    TokenFsm fsm(*dfa, vocab);
    // States along a random path of allowed tokens.
    int s = fsm.start();
    for (int step = 0; step < 12 && s != ByteDfa::kDead; ++step) {
      const auto& bits = fsm.allowed(s);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->num_ids(); ++id) {
        const bool want = !bytes[id].empty() && dfa->walk(s, bytes[id]) != ByteDfa::kDead;
        ASSERT_EQ(TokenFsm::test(bits, id), want) << p << " step " << step << " token '" << bytes[id] << "'";
        if (want) allowed.push_back(id);
        EXPECT_EQ(fsm.advance(s, id), want ? dfa->walk(s, bytes[id]) : ByteDfa::kDead);
      }
      if (allowed.empty()) break;  // a random vocabulary need not spell every continuation
      s = fsm.advance(s, allowed[rng() % allowed.size()]);
    }
  }
}

TEST(TokenFsm, CompleteWhenNothingCanFollow) {
  auto vocab = std::make_shared<const VocabTrie>(std::vector<std::string>{"y", "e", "s", "yes", "no", ""});
  auto dfa = ByteDfa::compile("yes|no");
  ASSERT_TRUE(dfa.is_ok());
  TokenFsm fsm(*dfa, vocab);
  const int s = fsm.advance(fsm.start(), 3);  // "yes"
  EXPECT_TRUE(fsm.accepting(s));
  EXPECT_TRUE(fsm.complete(s));
  const int y = fsm.advance(fsm.start(), 0);
  EXPECT_FALSE(fsm.accepting(y));
  EXPECT_FALSE(fsm.complete(y));
  EXPECT_TRUE(TokenFsm::test(fsm.allowed(y), 1));   // "e"
  EXPECT_FALSE(TokenFsm::test(fsm.allowed(y), 2));  // "s"
  EXPECT_FALSE(TokenFsm::test(fsm.allowed(fsm.start()), 5));  // no bytes
  EXPECT_EQ(fsm.advance(fsm.start(), 2), ByteDfa::kDead);
}

}  // namespace
}  // namespace ds
