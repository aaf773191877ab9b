// Constrained decoding on the CUDA engine: the grammar's bans travel as sampling penalty entries (tens of thousands a
// row), so greedy and sampled outputs spell a whole match of the regex and end with the EOS, graphs on and off.
#include <random>

#include <gtest/gtest.h>

#include "runner/batch_engine.h"
#include "runner/engine_test_util.h"

namespace ds {
namespace {

TEST(ConstrainedGpu, OutputsMatchTheRegex) {
  for (bool graphs : {true, false}) {
    BatchEngineOptions o;
    o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v2_lite";
    o.device = "cuda";
    o.page_size = 16;
    o.max_total_tokens = 8192;
    o.verbose = false;
    o.disable_cuda_graph = !graphs;
    const int32_t vocab = 1024;
    std::vector<std::string> bytes(vocab);
    for (int32_t id = 2; id < 600; ++id) bytes[static_cast<size_t>(id)] = std::string(1, static_cast<char>('a' + id % 26));
    auto dfa = ByteDfa::compile("(ab|c){2,4}(x|yz)");
    ASSERT_TRUE(dfa.is_ok());
    auto fsm = std::make_shared<const TokenFsm>(*dfa, std::make_shared<const VocabTrie>(bytes));
    std::mt19937 rng(13);
    std::vector<EngineRequest> reqs;
    for (int i = 0; i < 6; ++i) {
      EngineRequest r;
      r.rid = "c" + std::to_string(i);
      for (int k = 0; k < 9 + 5 * i; ++k) r.input_ids.push_back(static_cast<int32_t>(2 + rng() % 1000));
      r.sampling.max_new_tokens = 24;
      r.sampling.temperature = i % 2 ? 1.0f : 0.0f;
      r.sampling.seed = 90 + i;
      r.grammar = fsm;
      reqs.push_back(r);
    }
    const test::EngineRun run = test::run_engine(o, reqs);
    for (const auto& r : reqs) {
      const auto& toks = run.tokens.at(r.rid);
      ASSERT_FALSE(toks.empty()) << r.rid;
      EXPECT_EQ(toks.back(), 1) << r.rid;
      std::string text;
      for (size_t k = 0; k + 1 < toks.size(); ++k) text += bytes[static_cast<size_t>(toks[k])];
      EXPECT_TRUE(dfa->matches(text)) << r.rid << " graphs " << graphs << ": '" << text << "'";
    }
  }
}

}  // namespace
}  // namespace ds
