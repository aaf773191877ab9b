// Tests of the bench-serving datasets: length ranges, random-ids without a tokenizer, and the text
// datasets with the real DeepSeek-V3 tokenizer (token counts checked by re-encoding).
#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "text/tokenizer_test_util.h"

namespace ds::bench {
namespace {

TEST(BenchDataset, SampleLengthsRange) {
  std::mt19937_64 rng(3);
  auto lens = sample_lengths(100, 0.25, 2000, rng);
  EXPECT_EQ(*std::min_element(lens.begin(), lens.end()), 25);
  EXPECT_EQ(*std::max_element(lens.begin(), lens.end()), 100);
  lens = sample_lengths(64, 1.0, 50, rng);
  EXPECT_TRUE(std::all_of(lens.begin(), lens.end(), [](int64_t l) { return l == 64; }));
  lens = sample_lengths(5, 0.0, 500, rng);
  EXPECT_EQ(*std::min_element(lens.begin(), lens.end()), 1);  // never a 0-token request
}

TEST(BenchDataset, RandomIdsWithoutTokenizer) {
  DatasetOptions o;
  o.name = "random-ids";
  o.num_prompts = 20;
  o.random_input_len = 12;
  o.random_output_len = 6;
  o.random_range_ratio = 0.5;
  o.random_ids_vocab_size = 50;
  std::mt19937_64 rng(1);
  auto d = make_dataset(o, nullptr, rng);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  ASSERT_EQ(d->rows.size(), 20u);
  int64_t total_in = 0;
  for (const auto& r : d->rows) {
    EXPECT_TRUE(r.use_ids);
    EXPECT_EQ(static_cast<int64_t>(r.ids.size()), r.prompt_len);
    EXPECT_GE(r.prompt_len, 6);
    EXPECT_LE(r.prompt_len, 12);
    EXPECT_GE(r.output_len, 3);
    EXPECT_LE(r.output_len, 6);
    for (int32_t id : r.ids) EXPECT_TRUE(id >= 0 && id < 50);
    total_in += r.prompt_len;
  }
  EXPECT_EQ(d->notes.at(0), "#Input tokens: " + std::to_string(total_in));
  std::mt19937_64 rng2(1);
  auto again = make_dataset(o, nullptr, rng2);
  EXPECT_EQ(again->rows[7].ids, d->rows[7].ids);  // the seed decides everything
  for (double bad : {-0.1, 1.5, std::nan("")}) {  // NaN passed the old range check (every comparison false)
    DatasetOptions b = o;
    b.random_range_ratio = bad;
    const auto r = make_dataset(b, nullptr, rng);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--random-range-ratio"), std::string::npos);
  }

  o.random_ids_vocab_size = 0;
  EXPECT_FALSE(make_dataset(o, nullptr, rng).is_ok());  // no tokenizer, no vocabulary size
  o.name = "random";
  EXPECT_FALSE(make_dataset(o, nullptr, rng).is_ok());
  o.name = "nope";
  EXPECT_FALSE(make_dataset(o, nullptr, rng).is_ok());
}

TEST(BenchDataset, RandomTextWithTokenizer) {
  const Tokenizer* tok = ds::testing::v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  DatasetOptions o;
  o.name = "random";
  o.num_prompts = 8;
  o.random_input_len = 40;
  o.random_output_len = 10;
  o.random_range_ratio = 1.0;
  std::mt19937_64 rng(5);
  auto d = make_dataset(o, tok, rng);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  for (const auto& r : d->rows) {
    EXPECT_FALSE(r.use_ids);
    EXPECT_EQ(r.prompt_len, 40);
    EXPECT_EQ(r.output_len, 10);
    EXPECT_EQ(r.text, tok->decode(r.ids, false));
    for (int32_t id : r.ids) EXPECT_FALSE(tok->is_added(id));  // no BOS/EOS inside prompts
  }
  o.tokenize_prompt = true;
  auto ids = make_dataset(o, tok, rng);
  EXPECT_TRUE(ids->rows[0].use_ids);
  o.need_text = true;  // chat backends always send text
  EXPECT_FALSE(make_dataset(o, tok, rng)->rows[0].use_ids);
}

TEST(BenchDataset, GeneratedSharedPrefix) {
  const Tokenizer* tok = ds::testing::v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  DatasetOptions o;
  o.name = "generated-shared-prefix";
  o.gsp_num_groups = 3;
  o.gsp_prompts_per_group = 4;
  o.gsp_system_prompt_len = 64;
  o.gsp_question_len = 8;
  o.gsp_output_len = 5;
  std::mt19937_64 rng(2);
  auto d = make_dataset(o, tok, rng);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  ASSERT_EQ(d->rows.size(), 12u);
  for (const auto& r : d->rows) {
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>(tok->encode(r.text, true)->size()));
    EXPECT_EQ(r.output_len, 5);
  }
  // Prompts of one group share their long system prompt; prompts of different groups share (almost)
  // nothing. Pairs sharing more than half their text: 3 groups x C(4, 2).
  int sharing = 0;
  for (size_t i = 0; i < d->rows.size(); ++i)
    for (size_t j = i + 1; j < d->rows.size(); ++j) {
      const std::string &a = d->rows[i].text, &b = d->rows[j].text;
      const size_t common = std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin();
      if (common * 2 > std::min(a.size(), b.size())) ++sharing;
    }
  EXPECT_EQ(sharing, 18);
}

TEST(BenchDataset, ShareGpt) {
  const Tokenizer* tok = ds::testing::v3_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string path = (std::filesystem::temp_directory_path() / "ds_bench_sharegpt_test.json").string();
  {
    std::ofstream f(path);
    f << R"([
      {"id": "a", "conversations": [{"from": "human", "value": "What is the capital of France?"},
                                    {"from": "gpt", "value": "The capital of France is Paris, a city on the Seine."}]},
      {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
      {"id": "c", "conversation": [{"from": "human", "value": "Tell me a long story about a dragon."},
                                   {"from": "gpt", "value": "Once upon a time a dragon guarded a mountain of gold."}]},
      {"id": "d", "conversations": [{"from": "human", "value": "Hi there, how are you today?"},
                                    {"from": "gpt", "value": "ok"}]}
    ])";
  }
  DatasetOptions o;
  o.name = "sharegpt";
  o.path = path;
  o.num_prompts = 10;
  std::mt19937_64 rng(1);
  auto d = make_dataset(o, tok, rng);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  // "b" has one turn; "d"'s reply is BOS + "ok" = 2 tokens, kept (SGLang prunes below 2).
  std::set<std::string> prompts;
  for (const auto& r : d->rows) {
    prompts.insert(r.text);
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>(tok->encode(r.text, true)->size()));
    EXPECT_GE(r.output_len, 2);
  }
  EXPECT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts.count("only one turn"), 0u);
  for (const auto& r : d->rows) {
    if (r.text == "What is the capital of France?") {
      EXPECT_EQ(r.output_len,
                static_cast<int64_t>(tok->encode("The capital of France is Paris, a city on the Seine.", true)->size()));
    }
  }

  o.sharegpt_output_len = 7;
  d = make_dataset(o, tok, rng);
  for (const auto& r : d->rows) EXPECT_EQ(r.output_len, 7);
  o.sharegpt_context_len = 15;  // every prompt here is 8-11 tokens: prompt + 7 > 15 drops the longer ones
  d = make_dataset(o, tok, rng);
  ASSERT_TRUE(d.is_ok());
  for (const auto& r : d->rows) EXPECT_LE(r.prompt_len + r.output_len, 15);
  o.num_prompts = 1;
  o.sharegpt_context_len.reset();
  EXPECT_EQ(make_dataset(o, tok, rng)->rows.size(), 1u);
  o.sharegpt_output_len = 3;
  EXPECT_FALSE(make_dataset(o, tok, rng).is_ok());  // SGLang: output_len too small
  o.sharegpt_output_len.reset();
  o.path = path + ".missing";
  EXPECT_FALSE(make_dataset(o, tok, rng).is_ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds::bench
