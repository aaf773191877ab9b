// MTP / NGRAM speculative decoding on CUDA: the batch engine with drafts (verify steps in the absorbed form, replayed
// from verify graphs where every sequence feeds all its drafts, else eager; the MTP drafter, eager or graphed) gives
// the undrafted CUDA engine's greedy tokens up to the first near-tie; graph and eager verification give the same
// bits; oracle drafts (mostly accepted) give the drafted run's own tokens and logprobs from any verify row.
#include <cmath>
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
  // The reference: the CUDA engine without drafts (drafting must not change what it samples; the CPU engine differs
  // from it by the backend's numerics, W8A8 on the FP8 fixture, which the fixture tests bound).
  // (Session 59, H100: every drafted run gave the plain run's tokens wherever its margin was clear.)
  const Outcome gpu_plain = run(GetParam(), "cuda", 0, reqs);
  const Outcome gpu_spec = run(GetParam(), "cuda", 3, reqs);
  const Outcome gpu_spec_eager = run(GetParam(), "cuda", 3, reqs, nullptr, /*graphs=*/false);
  const Outcome gpu_ngram = run(GetParam(), "cuda", 3, reqs, nullptr, /*graphs=*/true, /*ngram=*/true);
  EXPECT_GT(gpu_ngram.stats.num_graph_steps, 0u);
  EXPECT_GT(gpu_plain.stats.num_graph_steps, 0u);
  EXPECT_GT(gpu_spec.stats.spec_verify_steps, 0u);
  EXPECT_GT(gpu_spec.stats.num_graph_steps, 0u) << "no verify step replayed a graph";
  EXPECT_EQ(gpu_spec_eager.stats.num_graph_steps, 0u);
  // (spec_verify_steps counts sequences' verify steps, num_graph_steps batch steps.)
  EXPECT_GE(gpu_spec.stats.num_graph_steps * reqs.size(), gpu_spec.stats.spec_verify_steps / 2);
  // Tokens equal the reference's wherever its top-2 margin is clear; logprobs within lp_tol where given (printed:
  // the largest difference). The drafted runs' logprobs are not held to the plain run's: its steps mix prompt chunks
  // into decodes (the MHA form) where verify steps run the absorbed form, 0.5 apart at some positions of these random
  // fixtures; verify rows are held to each other instead (oracle vs MTP eager, below).
  auto compare = [&](const Outcome& ref, const Outcome& got_run, const std::string& name, double lp_tol) {
    size_t compared = 0;
    double worst = 0;
    std::string at;
    for (const auto& r : reqs) {
      const size_t n = trusted(ref.lps.at(r.rid), 0.1);
      const auto& want = ref.tokens.at(r.rid);
      const auto& got = got_run.tokens.at(r.rid);
      ASSERT_EQ(got.size(), want.size()) << r.rid;
      EXPECT_TRUE(std::equal(want.begin(), want.begin() + n, got.begin())) << r.rid << " first " << n << " tokens, run " << name;
      const auto& lg = got_run.lps.at(r.rid);
      const auto& lw = ref.lps.at(r.rid);
      for (size_t k = 0; k < n && k < lg.size(); ++k) {
        const double d = std::fabs(lg[k].logprob - lw[k].logprob);
        if (d > worst) worst = d, at = r.rid + " " + std::to_string(k);
        if (lp_tol > 0) EXPECT_NEAR(lg[k].logprob, lw[k].logprob, lp_tol) << name << " " << r.rid << " " << k;
      }
      compared += n;
    }
    EXPECT_GT(compared, reqs.size() * 4) << name;
    std::printf("SPECLP %s %s: %zu tokens compared, largest logprob difference %.4f at %s\n", GetParam().c_str(),
                name.c_str(), compared, worst, at.c_str());
  };
  compare(gpu_plain, gpu_spec, "mtp graphs", 0);
  compare(gpu_plain, gpu_spec_eager, "mtp eager", 0);
  compare(gpu_plain, gpu_ngram, "ngram", 0);
  // Separate engine runs may batch the requests differently (the loop steps while they are being submitted); alone
  // on the GPU the runs below gave the same bits (session 59), with other processes on it the FP8 fixture's
  // batch-dependent W8A8 paths moved a logprob by up to 0.45 (tokens equal): its tolerance is wider.
  const double lp_tol = GetParam() == "v3_fp8" ? 0.5 : 0.05;
  compare(gpu_spec_eager, gpu_spec, "mtp graphs vs mtp eager", lp_tol);
  // Oracle drafts: the MTP eager run's own tokens (mostly accepted), every fifth made wrong; the accepted rows' tokens
  // and logprobs are its own.
  auto oracle_run = [&](bool graphs) {
    int corrupt = 0;
    DraftHook oracle = [&](const std::string& rid, int32_t num_output, std::vector<int32_t>& drafts) {
      const auto& want = gpu_spec_eager.tokens.at(rid);
      for (size_t j = 0; j < drafts.size(); ++j) {
        const size_t at = static_cast<size_t>(num_output) + j;
        drafts[j] = at < want.size() ? want[at] : 5;
        if (++corrupt % 5 == 0) drafts[j] = (drafts[j] + 1) % 1024;
      }
    };
    return run(GetParam(), "cuda", 3, reqs, oracle, graphs);
  };
  const Outcome gpu_oracle = oracle_run(true);
  const Outcome gpu_oracle_eager = oracle_run(false);
  for (const Outcome* o : {&gpu_oracle, &gpu_oracle_eager}) {
    const bool g = o == &gpu_oracle;
    std::printf("SPECLP %s oracle %s: drafts accepted %llu of %llu; graph steps %llu, verify steps %llu\n",
                GetParam().c_str(), g ? "graphs" : "eager", (unsigned long long)o->stats.spec_accepted_tokens,
                (unsigned long long)o->stats.spec_draft_tokens, (unsigned long long)o->stats.num_graph_steps,
                (unsigned long long)o->stats.spec_verify_steps);
    EXPECT_GT(o->stats.spec_accepted_tokens, o->stats.spec_draft_tokens / 3) << (g ? "graphs" : "eager");
    compare(gpu_spec_eager, *o, g ? "oracle graphs" : "oracle eager", lp_tol);
  }
  EXPECT_GE(gpu_oracle.stats.num_graph_steps * reqs.size(), gpu_oracle.stats.spec_verify_steps / 2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeGpu, ::testing::Values("v3", "v3_fp8"));

}  // namespace
}  // namespace ds
