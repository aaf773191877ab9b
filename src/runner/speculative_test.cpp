// MTP speculative decoding on the CPU backend with the fixtures: whatever the drafts, a client sees what decoding
// without them gives (greedy and seeded tokens, logprobs, stops, min_new_tokens, penalties); the drafts are fed,
// verified and rolled back, and the pool ends idle.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "runner/batch_engine.h"
#include "runner/engine_test_util.h"

namespace ds {
namespace {

std::string fixture(const std::string& name) { return std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name; }

std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
  std::uniform_int_distribution<int> d(2, 1023);
  std::vector<int32_t> p(len);
  for (auto& t : p) t = d(rng);
  return p;
}

using Outcome = test::EngineRun;

using DraftHook = std::function<void(const std::string&, int32_t, std::vector<int32_t>&)>;

Outcome run(const std::string& fx, int steps, const std::vector<EngineRequest>& reqs, int32_t chunk = 48,
        int64_t max_total_tokens = 0, int32_t page_size = 64, DraftHook hook = nullptr, bool ngram = false) {
  BatchEngineOptions o;
  o.test_draft_hook = std::move(hook);
  o.model_path = fixture(fx);
  o.chunked_prefill_size = chunk;
  o.max_total_tokens = max_total_tokens;
  o.page_size = page_size;
  o.verbose = false;
  o.disable_overlap_schedule = true;
  o.speculative_num_steps = steps;
  o.speculative_ngram = ngram;
  o.ngram = NgramOptions{1, 6};
  o.enable_return_hidden_states = true;  // (requests that ask: HiddenStatesWithDrafts)
  o.enable_return_routed_experts = true;
  Outcome out = test::run_engine(o, reqs);
  EXPECT_EQ(out.stats.used_tokens, out.stats.cached_tokens) << "pool idle after the last event";
  return out;
}

// Drafts that are `base`'s own tokens (5 past its end), every `every`-th one turned into another id: most are
// accepted, some rejected.
DraftHook oracle_drafts(const Outcome& base, int every) {
  auto corrupt = std::make_shared<int>(0);
  return [&base, every, corrupt](const std::string& rid, int32_t num_output, std::vector<int32_t>& drafts) {
    const auto& want = base.tokens.at(rid);
    for (size_t j = 0; j < drafts.size(); ++j) {
      const size_t at = static_cast<size_t>(num_output) + j;
      drafts[j] = at < want.size() ? want[at] : 5;
      if (++*corrupt % every == 0) drafts[j] = (drafts[j] + 1) % 1024;
    }
  };
}

std::vector<EngineRequest> mixed_requests(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.rid = "s";
    r.rid += std::to_string(i);
    r.input_ids = random_prompt(rng, 6 + 17 * i % 90);
    r.sampling.max_new_tokens = 5 + 4 * i % 19;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    if (i % 3 == 1) {  // seeded sampling
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 100 + i;
    }
    if (i % 4 == 2) {  // EOS banned for 4 tokens, then allowed
      r.sampling.min_new_tokens = 4;
      r.sampling.ignore_eos = false;
    }
    if (i == 5) r.sampling.frequency_penalty = 0.7f;
    if (i == 6) r.sampling.repetition_penalty = 1.3f;
    r.return_logprob = i % 2 == 0;
    r.top_logprobs_num = i % 4 == 0 ? 2 : 0;
    reqs.push_back(r);
  }
  return reqs;
}

void expect_same(const Outcome& spec, const Outcome& base, const std::vector<EngineRequest>& reqs) {
  for (const auto& r : reqs) {
    SCOPED_TRACE(r.rid);
    EXPECT_EQ(spec.tokens.at(r.rid), base.tokens.at(r.rid));
    EXPECT_EQ(spec.final_event.at(r.rid).reason.kind, base.final_event.at(r.rid).reason.kind);
    EXPECT_EQ(spec.final_event.at(r.rid).completion_tokens, base.final_event.at(r.rid).completion_tokens);
    const auto& a = spec.lps.count(r.rid) ? spec.lps.at(r.rid) : std::vector<TokenLogprob>{};
    const auto& b = base.lps.count(r.rid) ? base.lps.at(r.rid) : std::vector<TokenLogprob>{};
    ASSERT_EQ(a.size(), r.return_logprob ? spec.tokens.at(r.rid).size() : 0u);
    ASSERT_EQ(a.size(), b.size());
    // Verification rows run in a bigger batch than one-token decodes: logprobs agree to float rounding.
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].id, b[k].id) << k;
      EXPECT_NEAR(a[k].logprob, b[k].logprob, 1e-4) << k;
      ASSERT_EQ(a[k].top.size(), b[k].top.size()) << k;
      for (size_t j = 0; j < a[k].top.size(); ++j) EXPECT_EQ(a[k].top[j].second, b[k].top[j].second) << k;
    }
  }
}

// Greedy, seeded sampling, min_new_tokens with EOS, penalties and logprobs, with 1 and 3 draft steps: the same
// tokens and logprobs as without drafts, every decode step a verification, and drafts fed.
class SpeculativeFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeFixture, SameResultsAsWithoutDrafts) {
  const auto reqs = mixed_requests(31, 10);
  const Outcome base = run(GetParam(), 0, reqs);
  EXPECT_EQ(base.stats.spec_verify_steps, 0u);
  for (int steps : {1, 3}) {
    SCOPED_TRACE("steps " + std::to_string(steps));
    const Outcome spec = run(GetParam(), steps, reqs);
    expect_same(spec, base, reqs);
    EXPECT_EQ(spec.stats.speculative_num_steps, steps);
    EXPECT_GT(spec.stats.spec_draft_tokens, 0u);
    uint64_t completion = 0, verify = 0, accepted = 0;
    for (const auto& r : reqs) {
      const EngineEvent& e = spec.final_event.at(r.rid);
      completion += static_cast<uint64_t>(e.completion_tokens);
      verify += static_cast<uint64_t>(e.spec_verify_ct);
      accepted += static_cast<uint64_t>(e.spec_accepted_drafts);
      // The prefill samples the first token; each decode step (a verification) one more plus its accepted drafts.
      if (e.reason.kind == FinishReason::Kind::kLength) {
        EXPECT_EQ(e.completion_tokens, 1 + e.spec_verify_ct + e.spec_accepted_drafts);
      }
    }
    EXPECT_EQ(verify, spec.stats.spec_verify_steps);
    EXPECT_EQ(accepted, spec.stats.spec_accepted_tokens);
    // Every verify step feeds all its drafts, near max_new_tokens too (the shape of a verify graph): the pool is
    // ample and nothing runs into the context's end.
    EXPECT_EQ(spec.stats.spec_draft_tokens, static_cast<uint64_t>(steps) * spec.stats.spec_verify_steps);
    std::printf("steps %d: %llu completion tokens, %llu verify steps, %llu of %llu drafts accepted\n", steps,
                (unsigned long long)completion, (unsigned long long)verify, (unsigned long long)accepted,
                (unsigned long long)spec.stats.spec_draft_tokens);
  }
}

// v3_fp8: the same checkpoint in block-FP8 (the MTP layer's linears too).
INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeFixture, ::testing::Values("v3", "v3_fp8"));

// V3.2 (DSA: the MTP layer attends through its own indexer and index-key cache): the v32 fixture's config with one
// MTP layer, dummy weights (the fixture has no MTP tensors): drafted decoding gives undrafted decoding's results.
TEST(Speculative, SparseAttentionModelWithMtpLayer) {
  std::ifstream in(fixture("v32") + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string cfg = text.str();
  const std::string key = "\"num_nextn_predict_layers\": 0";
  const size_t at = cfg.find(key);
  ASSERT_NE(at, std::string::npos);
  cfg.replace(at, key.size(), "\"num_nextn_predict_layers\": 1");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ds_v32_mtp_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                             "_" + std::to_string(reinterpret_cast<uintptr_t>(&cfg)) + ".json"))
                               .string();
  {
    std::ofstream out(path);
    out << cfg;
  }
  auto go = [&](int steps) {
    BatchEngineOptions o;
    o.model_path = path;
    o.load_format = "dummy";
    o.seed = 5;
    o.chunked_prefill_size = 48;
    o.page_size = 16;
    o.max_total_tokens = 8192;
    o.verbose = false;
    o.disable_overlap_schedule = true;
    o.speculative_num_steps = steps;
    return test::run_engine(o, mixed_requests(41, 6));
  };
  const Outcome base = go(0);
  const Outcome spec = go(2);
  std::filesystem::remove(path);
  expect_same(spec, base, mixed_requests(41, 6));
  EXPECT_GT(spec.stats.spec_verify_steps, 0u);
  EXPECT_GT(spec.stats.spec_draft_tokens, 0u);
}

// NGRAM drafts (from each request's own tokens; no MTP layer needed: v2_lite has none): the same results as without
// drafts, and requests whose prompts repeat a phrase (which the tiny models' greedy continuations tend to loop back
// into) get some accepted.
class NgramFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(NgramFixture, SameResultsAsWithoutDrafts) {
  auto reqs = mixed_requests(37, 8);
  std::mt19937 rng(8);
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.rid = "rep" + std::to_string(i);
    const std::vector<int32_t> phrase = random_prompt(rng, 3 + i);
    for (int k = 0; k < 5; ++k) r.input_ids.insert(r.input_ids.end(), phrase.begin(), phrase.end());
    r.sampling.max_new_tokens = 24;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.return_logprob = true;
    reqs.push_back(r);
  }
  const Outcome base = run(GetParam(), 0, reqs);
  for (int steps : {2, 5}) {
    SCOPED_TRACE("steps " + std::to_string(steps));
    const Outcome spec = run(GetParam(), steps, reqs, 48, 0, 16, nullptr, /*ngram=*/true);
    expect_same(spec, base, reqs);
    EXPECT_GT(spec.stats.spec_verify_steps, 0u);
    EXPECT_GT(spec.stats.spec_draft_tokens, 0u);
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
    std::printf("%s ngram steps %d: %llu verify steps, %llu of %llu drafts accepted\n", GetParam().c_str(), steps,
                (unsigned long long)spec.stats.spec_verify_steps, (unsigned long long)spec.stats.spec_accepted_tokens,
                (unsigned long long)spec.stats.spec_draft_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NgramFixture, ::testing::Values("v2_lite", "v3"));

// Drafts that are the undrafted run's own tokens (a perfect MTP layer), with every fifth draft made wrong: accepted
// drafts carry the target KV of their positions into the next steps, rejected ones are rolled back, and seeded
// sampling still draws one uniform per token. Small pages and a small pool: rollbacks cross page boundaries and
// requests are retracted and re-admitted (their drafts dropped) on the way.
TEST(Speculative, AcceptedDraftsContinueExactly) {
  auto reqs = mixed_requests(47, 10);
  for (auto& r : reqs) r.sampling.max_new_tokens += 12;
  const Outcome base = run("v3", 0, reqs, 48, 0, 4);
  for (int steps : {2, 4}) {
    for (bool small_pool : {false, true}) {
      SCOPED_TRACE("steps " + std::to_string(steps) + (small_pool ? ", small pool" : ""));
      const Outcome spec = run("v3", steps, reqs, 48, small_pool ? 160 : 0, 4, oracle_drafts(base, 5));
      expect_same(spec, base, reqs);
      EXPECT_GT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens / 3);
      EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
      if (small_pool) {
        EXPECT_GT(spec.stats.num_retractions, 0u);
      }
      std::printf("steps %d%s: %llu verify steps, %llu of %llu drafts accepted, %llu retractions\n", steps,
                  small_pool ? " (small pool)" : "", (unsigned long long)spec.stats.spec_verify_steps,
                  (unsigned long long)spec.stats.spec_accepted_tokens,
                  (unsigned long long)spec.stats.spec_draft_tokens, (unsigned long long)spec.stats.num_retractions);
    }
  }
}

// return_hidden_states and return_routed_experts with drafts: a verification step computes rows for its drafts too,
// and only those of accepted drafts are final; a retracted request recomputes rows it already reported. Every request
// then gets the rows an undrafted run gives (the prompt's, one a fed output token), to float rounding, once each, and
// the same routed experts.
TEST(Speculative, HiddenStatesWithDrafts) {
  auto reqs = mixed_requests(53, 8);
  for (auto& r : reqs) {
    r.sampling.max_new_tokens += 10;
    r.return_hidden_states = true;
    r.return_routed_experts = true;
  }
  const Outcome base = run("v3", 0, reqs, 48, 0, 4);
  const Outcome spec = run("v3", 3, reqs, 48, 160, 4, oracle_drafts(base, 4));
  expect_same(spec, base, reqs);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0u);
  EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
  EXPECT_GT(spec.stats.num_retractions, 0u);
  for (const auto& r : reqs) {
    SCOPED_TRACE(r.rid);
    const auto& a = spec.hidden.at(r.rid);
    const auto& b = base.hidden.at(r.rid);
    EXPECT_EQ(spec.hidden_prompt_events.at(r.rid), 1);
    ASSERT_EQ(b.size(), r.input_ids.size() + base.tokens.at(r.rid).size() - 1);
    test::expect_same_hidden_rows(a, b, 1e-4);
    const auto& ra = spec.final_event.at(r.rid).routed_experts;
    const auto& rb = base.final_event.at(r.rid).routed_experts;
    EXPECT_EQ(rb.size(), b.size() * 3 * 4);  // the v3 fixture: 3 layers, top-4
    EXPECT_EQ(ra, rb);
  }
}

// Constrained decoding with drafts (the letter grammar of engine_test_util.h): each verification row is constrained by
// the grammar's state after the output and the drafts before it. Greedy and seeded requests give the tokens and
// logprobs of undrafted constrained decoding, every output matches the grammar; with the MTP layer's own drafts
// (which the grammar mostly refuses) and with drafts that are the undrafted run's tokens, every fourth one turned
// into a letter the grammar refuses at that point or into the end of sequence.
TEST(Speculative, ConstrainedDecodingWithDrafts) {
  const int32_t vocab = 1024;  // the v3 fixture's
  const test::LetterGrammar g = test::letter_grammar(vocab);
  std::mt19937 rng(71);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.rid = "g" + std::to_string(i);
    r.input_ids = random_prompt(rng, 8 + 11 * i);
    r.sampling.max_new_tokens = 16;
    r.sampling.temperature = 0;
    if (i % 2) r.sampling.temperature = 0.9f, r.sampling.seed = 300 + i;
    r.return_logprob = i % 3 == 0;
    r.grammar = g.fsm;
    reqs.push_back(r);
  }
  const Outcome base = run("v3", 0, reqs);
  for (const auto& r : reqs) {
    const auto& toks = base.tokens.at(r.rid);
    ASSERT_FALSE(toks.empty()) << r.rid;
    EXPECT_TRUE(g.dfa.matches(g.text_before_eos(toks))) << r.rid << ": '" << g.text_before_eos(toks) << "'";
  }
  for (int steps : {1, 3}) {
    SCOPED_TRACE("steps " + std::to_string(steps));
    const Outcome own = run("v3", steps, reqs);
    expect_same(own, base, reqs);
    EXPECT_GT(own.stats.spec_draft_tokens, 0u);
    int n = 0;
    DraftHook oracle = [&](const std::string& rid, int32_t num_output, std::vector<int32_t>& drafts) {
      const auto& want = base.tokens.at(rid);
      for (size_t j = 0; j < drafts.size(); ++j) {
        const size_t at = static_cast<size_t>(num_output) + j;
        drafts[j] = at < want.size() ? want[at] : 1;
        // Every fourth: the EOS, or the id spelling 'q' (in no word of the grammar).
        if (++n % 4 == 0) drafts[j] = n % 8 == 0 ? 1 : 'q' - 'a';
      }
    };
    const Outcome oracled = run("v3", steps, reqs, 48, 0, 64, oracle);
    expect_same(oracled, base, reqs);
    EXPECT_GT(oracled.stats.spec_accepted_tokens, 0u);
    EXPECT_LT(oracled.stats.spec_accepted_tokens, oracled.stats.spec_draft_tokens);
    std::printf("steps %d: own drafts %llu of %llu accepted; oracle drafts %llu of %llu\n", steps,
                (unsigned long long)own.stats.spec_accepted_tokens, (unsigned long long)own.stats.spec_draft_tokens,
                (unsigned long long)oracled.stats.spec_accepted_tokens,
                (unsigned long long)oracled.stats.spec_draft_tokens);
  }
}

}  // namespace
}  // namespace ds
