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
    const test::LetterGrammar g = test::letter_grammar(1024);  // the fixture's vocabulary
    std::mt19937 rng(13);
    std::vector<EngineRequest> reqs;
    for (int i = 0; i < 6; ++i) {
      EngineRequest r;
      r.rid = "c" + std::to_string(i);
      for (int k = 0; k < 9 + 5 * i; ++k) r.input_ids.push_back(static_cast<int32_t>(2 + rng() % 1000));
      r.sampling.max_new_tokens = 24;
      r.sampling.temperature = i % 2 ? 1.0f : 0.0f;
      r.sampling.seed = 90 + i;
      r.grammar = g.fsm;
      reqs.push_back(r);
    }
    const test::EngineRun run = test::run_engine(o, reqs);
    for (const auto& r : reqs) {
      const auto& toks = run.tokens.at(r.rid);
      ASSERT_FALSE(toks.empty()) << r.rid;
      EXPECT_EQ(toks.back(), 1) << r.rid;
      const std::string text = g.text_before_eos(toks);
      EXPECT_TRUE(g.dfa.matches(text)) << r.rid << " graphs " << graphs << ": '" << text << "'";
      EXPECT_EQ(text.size() + 1, toks.size()) << r.rid << ": a token that spells nothing";
    }
  }
}

}  // namespace
}  // namespace ds
