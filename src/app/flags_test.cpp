// Tests of the command-line flag parser (flags.h) and the SGLang spellings every model command takes (model_setup.h).
#include "app/flags.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "app/model_setup.h"
#include "core/logging.h"

namespace ds {
namespace {

// argv for Flags::parse (argv[0] is the subcommand).
Status parse(Flags& f, std::vector<std::string> args) {
  args.insert(args.begin(), "cmd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return f.parse(static_cast<int>(argv.size()), argv.data());
}

Flags model_flags() {
  Flags f;
  add_model_flags(f);
  f.add_double("mem-fraction-static", 0, "");
  return f;
}

TEST(Flags, ValuesTypesAndErrorsNameTheFlag) {
  Flags f;
  f.add_int("n", 3, "");
  f.add_double("x", 0.5, "");
  f.add_bool("b", "");
  f.add_string("s", "d", "");
  ASSERT_TRUE(parse(f, {"--n", "7", "--x=0.25", "--b", "--s", "v"}).is_ok());
  EXPECT_EQ(f.get_int("n"), 7);
  EXPECT_EQ(f.get_double("x"), 0.25);
  EXPECT_TRUE(f.get_bool("b"));
  EXPECT_EQ(f.get_string("s"), "v");
  EXPECT_TRUE(f.was_set("n"));
  Flags g;
  g.add_int("n", 3, "");
  const Status bad = parse(g, {"--n", "seven"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("--n"), std::string::npos) << bad.message();
  EXPECT_FALSE(parse(g, {"--m", "1"}).is_ok());
  EXPECT_FALSE(parse(g, {"--n"}).is_ok());
}

// Integer lists as SGLang's argparse (nargs="+") takes them, and with commas; the values end at the next flag.
TEST(Flags, IntListsTakeSpaceOrCommaSeparatedValues) {
  Flags f;
  f.add_int_list("batch-size", "1", "");
  f.add_int_list("input-len", "1024", "");
  f.add_int_list("cuda-graph-bs", "", "");
  f.add_int("n", 0, "");
  EXPECT_EQ(f.get_int_list("batch-size"), (std::vector<int64_t>{1}));
  EXPECT_TRUE(f.get_int_list("cuda-graph-bs").empty());
  ASSERT_TRUE(parse(f, {"--batch-size", "1", "8", "16", "--input-len=256,512", "--n", "3", "--cuda-graph-bs", "1,2",
                        "4"})
                  .is_ok());
  EXPECT_EQ(f.get_int_list("batch-size"), (std::vector<int64_t>{1, 8, 16}));
  EXPECT_EQ(f.get_int_list("input-len"), (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(f.get_int_list("cuda-graph-bs"), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(f.get_int("n"), 3);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--batch-size", "1", "eight"}, {"--batch-size"}, {"--batch-size="},
        {"--batch-size", "1,,2"}, {"--batch-size=1", "8"}}) {
    Flags g;
    g.add_int_list("batch-size", "1", "");
    const Status st = parse(g, bad);
    ASSERT_FALSE(st.is_ok()) << bad.size();
    EXPECT_NE(st.message().find(bad.size() == 2 && bad[1] == "8" ? "'8'" : "--batch-size"), std::string::npos)
        << st.message();
  }
}

// SGLang's spellings parse into dserve's flags: --model, --tp 1, --random-seed, --trust-remote-code.
TEST(Flags, SglangSpellingsAreAliases) {
  Flags f = model_flags();
  ASSERT_TRUE(parse(f, {"--model", "/m", "--tp", "1", "--random-seed", "42", "--trust-remote-code", "--dp-size", "1",
                        "--tensor-parallel-size=1"})
                  .is_ok());
  EXPECT_EQ(f.get_string("model-path"), "/m");
  EXPECT_EQ(f.get_int("seed"), 42);
  EXPECT_EQ(f.get_int("tp-size"), 1);
  EXPECT_TRUE(f.get_bool("trust-remote-code"));
  EXPECT_TRUE(check_parallel_flags(f).is_ok());
  EXPECT_NE(f.usage("x").find("--tp-size, --tensor-parallel-size, --tp"), std::string::npos) << f.usage("x");
}

// A parallel size other than 1 is refused with the flag and the value named (one GPU until multi-GPU serving).
TEST(Flags, ParallelSizesOtherThanOneAreRefused) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--tp", "8"}, {"--dp-size", "2"}, {"--pp-size", "0"}, {"--ep", "-1"}, {"--expert-parallel-size", "4"}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok());
    const Status st = check_parallel_flags(f);
    ASSERT_FALSE(st.is_ok()) << args[0];
    EXPECT_NE(st.message().find(args[1]), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("one GPU"), std::string::npos) << st.message();
  }
}

// The ranks' GPU ids (--base-gpu-id + r x --gpu-id-step): a negative or huge base, a step below 1, refused by name.
TEST(Flags, GpuIdFlagsOutOfRangeAreRefused) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--base-gpu-id", "-1"}, {"--base-gpu-id", "1024"}, {"--gpu-id-step", "0"}, {"--gpu-id-step", "5000"}}) {
    for (bool serve : {false, true}) {
      Flags f = model_flags();
      ASSERT_TRUE(parse(f, args).is_ok()) << args[0];
      const Status st = check_parallel_flags(f, serve);
      ASSERT_FALSE(st.is_ok()) << args[0] << " " << args[1];
      EXPECT_NE(st.message().find(args[0]), std::string::npos) << st.message();
      EXPECT_NE(st.message().find(args[1]), std::string::npos) << st.message();
    }
  }
  Flags f = model_flags();
  ASSERT_TRUE(parse(f, {"--base-gpu-id", "3", "--gpu-id-step", "2"}).is_ok());
  EXPECT_TRUE(check_parallel_flags(f, true).is_ok());
}

// SGLang's feature flags: its attention backend names, --enable-torch-compile and its DeepSeek deployment flags (kernel,
// overlap and balancing choices) are accepted; an unknown backend, DP attention without its size, unbuilt speculative
// forms, deprecated spellings, multi-node and expert placements other than the trivial one are refused by flag.
TEST(Flags, SglangFeatureFlags) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"--attention-backend", "fa3"}, {"--decode-attention-backend", "flashmla", "--prefill-attention-backend",
                                                 "fa4"},
           {"--attention-backend", "flashinfer", "--enable-torch-compile", "--torch-compile-max-bs", "16"},
           // SGLang's DeepSeek-V3 EP deployment line and V3.2's backends: accepted, logged as no effect.
           {"--tp", "8", "--ep", "8", "--moe-a2a-backend", "deepep", "--deepep-mode", "low_latency",
            "--enable-two-batch-overlap", "--tbo-token-distribution-threshold", "0.5", "--enable-eplb",
            "--eplb-rebalance-num-iterations", "500", "--moe-dense-tp-size", "1", "--enable-dp-lm-head",
            "--dist-timeout", "3600", "--moe-runner-backend", "deep_gemm", "--fp8-gemm-backend", "deep_gemm",
            "--init-expert-location", "trivial", "--dist-init-addr", "10.0.0.1:5000", "--nnodes", "1"},
           {"--nsa-prefill-backend", "flashmla_sparse", "--nsa-decode-backend", "fa3", "--dsa-prefill-backend", "x",
            "--enable-nsa-prefill-context-parallel", "--nsa-prefill-cp-mode", "in-seq-split",
            "--triton-attention-num-kv-splits", "16", "--enable-single-batch-overlap"}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok());
    EXPECT_TRUE(check_sglang_feature_flags(f).is_ok()) << (args.empty() ? "none" : args.back());
  }
  for (const auto& [args, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--attention-backend", "flash"}, "'flash'"},
           {{"--prefill-attention-backend", "FA3"}, "--prefill-attention-backend"},
           {{"--enable-dp-attention"}, "--enable-dp-attention"},
           {{"--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"}, "not built"},
           {{"--speculative-algorithm", "STANDALONE"}, "NGRAM"},
           {{"--speculative-algorithm", "MEDUSA"}, "'MEDUSA'"},
           {{"--speculative-eagle-topk", "1"}, "need --speculative-algorithm"},
           {{"--enable-torch-compile", "--torch-compile-max-bs", "0"}, "--torch-compile-max-bs"},
           {{"--enable-ep-moe"}, "--ep-size"},
           {{"--enable-deepep-moe"}, "--moe-a2a-backend deepep"},
           {{"--tp", "8", "--moe-a2a-backend", "deepep"}, "--ep-size = --tp-size"},
           {{"--deepep-mode", "fast"}, "--deepep-mode"},
           {{"--tbo-token-distribution-threshold", "2"}, "--tbo-token-distribution-threshold"},
           {{"--triton-attention-num-kv-splits", "0"}, "--triton-attention-num-kv-splits"},
           {{"--moe-dense-tp-size", "2"}, "only 1"},
           {{"--ep-num-redundant-experts", "32"}, "redundant experts"},
           {{"--init-expert-location", "/tmp/loc.json"}, "only trivial"},
           {{"--expert-distribution-recorder-mode", "per_token"}, "not supported"},
           {{"--expert-distribution-recorder-buffer-size", "1000"}, "needs --expert-distribution-recorder-mode"},
           {{"--nnodes", "2", "--node-rank", "1"}, "multi-node"},
           {{"--node-rank", "1"}, "--node-rank"}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok()) << args[0];
    const Status st = check_sglang_feature_flags(f);
    ASSERT_FALSE(st.is_ok()) << args[0];
    EXPECT_NE(st.message().find(named), std::string::npos) << st.message();
  }
}

// --speculative-*: SGLang's DeepSeek defaults (3 steps, topk 1), NEXTN = EAGLE, chains only, no other draft
// checkpoint; nothing without an algorithm.
TEST(Flags, SpeculativeFlags) {
  const std::string model = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/v3";
  for (const auto& [args, steps] : std::vector<std::pair<std::vector<std::string>, int32_t>>{
           {{}, 0},
           {{"--speculative-algorithm", "NEXTN"}, 3},
           {{"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "2"}, 1},
           {{"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "5", "--speculative-num-draft-tokens", "4"},
            5},
           {{"--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", model + "/"}, 3}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok());
    Result<SpeculativeSettings> r = speculative_from_flags(f, model);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->steps, steps);
    EXPECT_FALSE(r->ngram);
  }
  for (const auto& [args, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "4"}, "--speculative-eagle-topk 4"},
           {{"--speculative-algorithm", "NEXTN", "--speculative-num-steps", "0"}, "--speculative-num-steps"},
           {{"--speculative-algorithm", "NEXTN", "--speculative-num-steps", "17"}, "--speculative-num-steps"},
           {{"--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/tmp"}, "separate draft"},
           {{"--speculative-num-steps", "2"}, "need --speculative-algorithm"},
           {{"--speculative-algorithm", "STANDALONE"}, "not built"},
           {{"--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "1"}, "[2, 17]"},
           {{"--speculative-algorithm", "NGRAM", "--speculative-ngram-min-match-window-size", "4",
             "--speculative-ngram-max-match-window-size", "3"}, "min <= max"},
           {{"--speculative-algorithm", "NGRAM", "--speculative-draft-model-path", model}, "no draft model"},
           {{"--speculative-algorithm", "NEXTN", "--speculative-ngram-max-match-window-size", "3"}, "NGRAM"},
           {{"--speculative-algorithm", "NGRAM", "--speculative-eagle-topk", "2"}, "--speculative-eagle-topk 2"}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok()) << args[0];
    const Result<SpeculativeSettings> r = speculative_from_flags(f, model);
    ASSERT_FALSE(r.is_ok()) << args[0];
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().message();
  }
  // NGRAM: drafts counted by --speculative-num-draft-tokens (else --speculative-num-steps, else 3), its windows.
  for (const auto& [args, steps, lo, hi] : std::vector<std::tuple<std::vector<std::string>, int32_t, int, int>>{
           {{"--speculative-algorithm", "NGRAM"}, 3, 1, 12},
           {{"--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8", "--speculative-num-steps", "2"},
            7, 1, 12},
           {{"--speculative-algorithm", "NGRAM", "--speculative-num-steps", "2",
             "--speculative-ngram-min-match-window-size", "2", "--speculative-ngram-max-match-window-size", "5"},
            2, 2, 5}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, args).is_ok());
    Result<SpeculativeSettings> r = speculative_from_flags(f, model);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_TRUE(r->ngram);
    EXPECT_EQ(r->algorithm, "NGRAM");
    EXPECT_EQ(r->steps, steps);
    EXPECT_EQ(r->ngram_options.min_window, lo);
    EXPECT_EQ(r->ngram_options.max_window, hi);
  }
  // The other model commands decode without drafts and say so.
  Flags f = model_flags();
  ASSERT_TRUE(parse(f, {"--model-path", model, "--device", "cpu", "--speculative-algorithm", "NEXTN"}).is_ok());
  const auto setup = setup_model(f);
  ASSERT_FALSE(setup.is_ok());
  EXPECT_NE(setup.status().message().find("dserve serve"), std::string::npos) << setup.status().message();
}

TEST(Flags, LogLevelTakesSglangsNames) {
  const LogLevel before = log_level();
  for (const auto& [name, level] : std::vector<std::pair<const char*, LogLevel>>{
           {"warning", LogLevel::kWarn}, {"critical", LogLevel::kError}, {"debug", LogLevel::kDebug}}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, {"--log-level", name}).is_ok());
    ASSERT_TRUE(apply_log_level_flag(f).is_ok()) << name;
    EXPECT_EQ(log_level(), level) << name;
  }
  Flags f = model_flags();
  ASSERT_TRUE(parse(f, {"--log-level", "loud"}).is_ok());
  const Status st = apply_log_level_flag(f);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("loud"), std::string::npos);
  set_log_level(before);
}

TEST(Flags, MemFractionMustBeAFractionOrZero) {
  for (const char* ok : {"0", "0.5", "0.95"}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, {"--mem-fraction-static", ok}).is_ok());
    EXPECT_TRUE(check_mem_fraction_flag(f).is_ok()) << ok;
  }
  for (const char* bad : {"1", "2", "-0.1", "nan", "inf"}) {
    Flags f = model_flags();
    ASSERT_TRUE(parse(f, {"--mem-fraction-static", bad}).is_ok()) << bad;
    const Status st = check_mem_fraction_flag(f);
    EXPECT_FALSE(st.is_ok()) << bad;
    EXPECT_NE(st.message().find("--mem-fraction-static"), std::string::npos);
  }
}

}  // namespace
}  // namespace ds
