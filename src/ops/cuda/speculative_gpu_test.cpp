// MTP speculative decoding on CUDA against the CPU backend: the batch engine with drafts (verify steps in the
// absorbed form, replayed from verify graphs where every sequence feeds all its drafts, else eager; the MTP
// drafter) gives the CPU engine's greedy tokens up to the first near-tie, with and without CUDA graphs, and with
// oracle drafts (mostly accepted) the CUDA engine's own undrafted tokens. The engine refuses CUDA speculative
// decoding until this case has passed on the device (DSERVE_SPECULATIVE_CUDA=1 here).
#include <cstdlib>
#include <functional>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "runner/batch_engine.h"
#include "runner/engine_test_util.h"

namespace ds {
namespace {

using Outcome = test::EngineRun;

using DraftHook = std::function<void(const std::string&, int32_t, std::vector<int32_t>&)>;

Outcome run(const std::string& fx, const std::string& device, int steps, const std::vector<EngineRequest>& reqs,
            DraftHook hook = nullptr, bool graphs = true, bool ngram = false) {
  BatchEngineOptions o;
  o.model_path = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + fx;
  o.device = device;
  o.chunked_prefill_size = 48;
  o.page_size = 16;
  o.max_total_tokens = 8192;
  o.verbose = false;
  o.disable_overlap_schedule = true;
  o.speculative_num_steps = steps;
  o.test_draft_hook = std::move(hook);
  o.disable_cuda_graph = !graphs;
  o.speculative_ngram = ngram;
  Outcome out = test::run_engine(o, reqs);
  EXPECT_EQ(out.stats.used_tokens, out.stats.cached_tokens) << "pool idle after the last event";
  return out;
}

// Tokens before the first one whose top-2 margin (in `lps`) is under `margin`: a bf16 backend may flip it.
size_t trusted(const std::vector<TokenLogprob>& lps, double margin) {
  for (size_t i = 0; i < lps.size(); ++i)
    if (lps[i].top.size() < 2 || lps[i].top[0].first - lps[i].top[1].first < margin) return i;
  return lps.size();
}

class SpeculativeGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeGpu, DraftedTokensMatchTheCpuEngine) {
  setenv("DSERVE_SPECULATIVE_CUDA", "1", 1);
  std::mt19937 rng(17);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.rid = "g";
    r.rid += std::to_string(i);
    for (int k = 0; k < 6 + 19 * i; ++k) r.input_ids.push_back(static_cast<int32_t>(2 + rng() % 1000));
    r.sampling.max_new_tokens = 16;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.return_logprob = true;
    r.top_logprobs_num = 2;
    reqs.push_back(r);
  }
  const Outcome cpu = run(GetParam(), "cpu", 0, reqs);
  const Outcome gpu_plain = run(GetParam(), "cuda", 0, reqs);
  const Outcome gpu_spec = run(GetParam(), "cuda", 3, reqs);
  const Outcome gpu_spec_eager = run(GetParam(), "cuda", 3, reqs, nullptr, /*graphs=*/false);
  const Outcome gpu_ngram = run(GetParam(), "cuda", 3, reqs, nullptr, /*graphs=*/true, /*ngram=*/true);
  EXPECT_GT(gpu_ngram.stats.num_graph_steps, 0u);
  EXPECT_GT(gpu_plain.stats.num_graph_steps, 0u);
  EXPECT_GT(gpu_spec.stats.spec_verify_steps, 0u);
  EXPECT_GT(gpu_spec.stats.num_graph_steps, 0u) << "no verify step replayed a graph";
  EXPECT_EQ(gpu_spec_eager.stats.num_graph_steps, 0u);
  for (const Outcome* spec : {&gpu_spec, &gpu_spec_eager, &gpu_ngram}) {
    size_t compared = 0;
    for (const auto& r : reqs) {
      const size_t n = trusted(cpu.lps.at(r.rid), 0.1);
      const auto& want = cpu.tokens.at(r.rid);
      const auto& got = spec->tokens.at(r.rid);
      ASSERT_EQ(got.size(), want.size()) << r.rid;
      EXPECT_TRUE(std::equal(want.begin(), want.begin() + n, got.begin()))
          << r.rid << " first " << n << " tokens, run " << (spec == &gpu_spec ? "graphs" : spec == &gpu_ngram ? "ngram" : "eager");
      compared += n;
    }
    EXPECT_GT(compared, reqs.size() * 4);
  }
  // Oracle drafts: the CUDA engine's undrafted tokens, every fifth made wrong.
  int corrupt = 0;
  DraftHook oracle = [&](const std::string& rid, int32_t num_output, std::vector<int32_t>& drafts) {
    const auto& want = gpu_plain.tokens.at(rid);
    for (size_t j = 0; j < drafts.size(); ++j) {
      const size_t at = static_cast<size_t>(num_output) + j;
      drafts[j] = at < want.size() ? want[at] : 5;
      if (++corrupt % 5 == 0) drafts[j] = (drafts[j] + 1) % 1024;
    }
  };
  const Outcome gpu_oracle = run(GetParam(), "cuda", 3, reqs, oracle);
  EXPECT_GT(gpu_oracle.stats.spec_accepted_tokens, gpu_oracle.stats.spec_draft_tokens / 3);
  EXPECT_GT(gpu_oracle.stats.num_graph_steps, gpu_oracle.stats.spec_verify_steps / 4);
  for (const auto& r : reqs) {
    const size_t n = trusted(gpu_plain.lps.at(r.rid), 0.1);
    const auto& want = gpu_plain.tokens.at(r.rid);
    const auto& got = gpu_oracle.tokens.at(r.rid);
    ASSERT_EQ(got.size(), want.size()) << r.rid;
    EXPECT_TRUE(std::equal(want.begin(), want.begin() + n, got.begin())) << r.rid << " first " << n << " tokens";
    const auto& lg = gpu_oracle.lps.at(r.rid);
    const auto& lw = gpu_plain.lps.at(r.rid);
    for (size_t k = 0; k < n; ++k) EXPECT_NEAR(lg[k].logprob, lw[k].logprob, 0.1) << r.rid << " " << k;
  }
  std::printf("%s: drafts accepted %llu of %llu (MTP), %llu of %llu (oracle); graph steps %llu of %llu verify steps "
              "(MTP), %llu of %llu (oracle)\n",
              GetParam().c_str(), (unsigned long long)gpu_spec.stats.spec_accepted_tokens,
              (unsigned long long)gpu_spec.stats.spec_draft_tokens,
              (unsigned long long)gpu_oracle.stats.spec_accepted_tokens,
              (unsigned long long)gpu_oracle.stats.spec_draft_tokens, (unsigned long long)gpu_spec.stats.num_graph_steps,
              (unsigned long long)gpu_spec.stats.spec_verify_steps,
              (unsigned long long)gpu_oracle.stats.num_graph_steps,
              (unsigned long long)gpu_oracle.stats.spec_verify_steps);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeGpu, ::testing::Values("v3", "v3_fp8"));

}  // namespace
}  // namespace ds
