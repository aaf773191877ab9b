// CUDA-vs-CPU consistency of Ops::sample (kernels/sampling.cu vs the host reference in ops/sampling.cpp):
// same logits, penalties and uniforms must give the same tokens. Logits live in a NaN-poisoned buffer
// (padding rows between the sampled ones, padding columns past the vocabulary) that must not leak in.
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "kernels/sampling.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/ops.h"

namespace ds {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int64_t vocab = 0, ld = 0, rows = 0;  // logits buffer [rows, ld]; columns >= vocab are NaN padding
  std::vector<float> logits;            // host values (already bf16-representable when bf16)
  SampleBatch batch;
};

// Row b of the batch reads buffer row 2b + 1; even rows and padding columns are NaN.
Case make_case(int64_t vocab, int B, uint32_t seed, float scale, bool bf16) {
  Case c;
  c.vocab = vocab;
  c.ld = vocab + 37;
  c.rows = 2 * B + 1;
  c.logits.assign(c.rows * c.ld, kNaN);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  for (int b = 0; b < B; ++b)
    for (int64_t i = 0; i < vocab; ++i) {
      float v = nd(rng);
      if (bf16) v = round_bf16(v);
      c.logits[(2 * b + 1) * c.ld + i] = v;
    }
  c.batch.vocab = vocab;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int b = 0; b < B; ++b) {
    SampleRow r;
    r.logits_row = 2 * b + 1;
    r.uniform = u(rng);
    c.batch.rows.push_back(r);
  }
  return c;
}

// Random penalties on row b: ids spread over the vocabulary, some with output counts, some seen, a few banned.
void add_penalties(Case& c, int b, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, c.vocab - 1);
  std::set<int64_t> ids;
  while (static_cast<int>(ids.size()) < std::min<int64_t>(n, c.vocab)) ids.insert(id(rng));
  SampleRow& r = c.batch.rows[b];
  r.penalty_begin = static_cast<int32_t>(c.batch.penalties.size());
  int k = 0;
  for (int64_t t : ids) {
    SamplePenalty p;
    p.id = static_cast<int32_t>(t);
    p.output_count = k % 3;
    p.seen = k % 2 == 0;
    p.banned = k % 7 == 3;
    p.bias = k % 5 == 1 ? static_cast<float>(k % 11) - 5.0f : 0.0f;  // logit_bias
    c.batch.penalties.push_back(p);
    ++k;
  }
  r.penalty_end = static_cast<int32_t>(c.batch.penalties.size());
}

// The case's logits as a host f32 tensor and on the device (bf16 or f32).
Tensor host_logits(const Case& c) {
  Tensor host = Tensor::empty({c.rows, c.ld}, DType::kF32);
  std::copy(c.logits.begin(), c.logits.end(), host.f32());
  return host;
}
Tensor device_logits(const Tensor& host, bool bf16) {
  if (!bf16) return cuda_upload(host);
  Tensor h = Tensor::empty({host.dim(0), host.dim(1)}, DType::kBF16);
  for (int64_t i = 0; i < host.numel(); ++i) h.data_as<uint16_t>()[i] = f32_to_bf16(host.f32()[i]);
  return cuda_upload(h);
}

void run_case(const char* name, const Case& c, bool bf16, Ops& cpu, Ops& gpu) {
  Tensor host = host_logits(c);
  Tensor dev = device_logits(host, bf16);
  const SampleResult want = cpu.sample(host, c.batch);
  const SampleResult got = gpu.sample(dev, c.batch);
  const size_t B = c.batch.rows.size();
  ASSERT_EQ(got.tokens.size(), B);
  int mismatches = 0;
  double worst_lp = 0;
  for (size_t b = 0; b < B; ++b) {
    const SampleRow& r = c.batch.rows[b];
    EXPECT_EQ(got.bad_id[b], want.bad_id[b]) << name << " row " << b;
    if (want.bad_id[b] >= 0) continue;
    if (got.tokens[b] != want.tokens[b]) ++mismatches;
    EXPECT_EQ(got.tokens[b], want.tokens[b])
        << name << " row " << b << " T=" << r.temperature << " top_k=" << r.top_k << " top_p=" << r.top_p
        << " min_p=" << r.min_p << " u=" << r.uniform;
    EXPECT_GE(got.tokens[b], 0);
    EXPECT_LT(got.tokens[b], c.vocab);
    if (r.want_logprob) {
      ASSERT_TRUE(std::isfinite(got.logprobs[b])) << name << " row " << b;
      worst_lp = std::max(worst_lp, static_cast<double>(std::fabs(got.logprobs[b] - want.logprobs[b])));
      EXPECT_NEAR(got.logprobs[b], want.logprobs[b], 2e-4) << name << " row " << b;
    }
    ASSERT_EQ(got.top[b].size(), want.top[b].size()) << name << " row " << b;
    for (size_t i = 0; i < want.top[b].size(); ++i) {
      EXPECT_EQ(got.top[b][i].second, want.top[b][i].second) << name << " row " << b << " top " << i;
      EXPECT_NEAR(got.top[b][i].first, want.top[b][i].first, 2e-4) << name << " row " << b << " top " << i;
    }
  }
  // Requested ids' logprobs (token_ids_logprob): NaN exactly on non-finite rows.
  ASSERT_EQ(got.id_logprobs.size(), want.id_logprobs.size()) << name;
  for (size_t e = 0; e < want.id_logprobs.size(); ++e) {
    if (std::isnan(want.id_logprobs[e])) {
      EXPECT_TRUE(std::isnan(got.id_logprobs[e])) << name << " id entry " << e;
      continue;
    }
    worst_lp = std::max(worst_lp, static_cast<double>(std::fabs(got.id_logprobs[e] - want.id_logprobs[e])));
    EXPECT_NEAR(got.id_logprobs[e], want.id_logprobs[e], 2e-4) << name << " id entry " << e;
  }
  std::printf("SAMPLE %-28s rows %zu vocab %lld ids %zu mismatches %d worst |logprob diff| %.3g\n", name, B,
              static_cast<long long>(c.vocab), want.id_logprobs.size(), mismatches, worst_lp);
}

class SampleGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    init_cuda_device(0);
    set_cuda_alloc_poison(true);
    cpu_ = make_cpu_ops();
    gpu_ = make_cuda_ops(0);
  }
  void TearDown() override { set_cuda_alloc_poison(false); }
  std::unique_ptr<Ops> cpu_, gpu_;
};

// Every filter on both vocabulary sizes and dtypes.
void mixed_params(Case& c) {
  const int B = static_cast<int>(c.batch.rows.size());
  for (int b = 0; b < B; ++b) {
    SampleRow& r = c.batch.rows[b];
    switch (b % 10) {
      case 0: r.temperature = 0.0f; break;                                   // greedy
      case 1: r.temperature = 0.7f; break;                                   // full-vocab draw
      case 2: r.temperature = 1.0f; r.top_k = 1; break;                      // top_k = 1
      case 3: r.temperature = 1.3f; r.top_p = 1e-6f; break;                  // top_p tiny
      case 4: r.temperature = 1.0f; r.min_p = 0.05f; break;
      case 5: r.temperature = 0.9f; r.top_k = 40; r.top_p = 0.9f; break;
      case 6: r.temperature = 2.0f; r.top_p = 0.5f; r.min_p = 0.01f; break;
      case 7: r.temperature = 0.0f; r.frequency_penalty = 0.5f; r.presence_penalty = 0.3f;
              r.repetition_penalty = 1.3f; break;                             // greedy with penalties
      case 8: r.temperature = 0.8f; r.top_k = 200; r.frequency_penalty = 1.1f; r.presence_penalty = -0.2f;
              r.repetition_penalty = 1.15f; break;
      case 9: r.temperature = 0.5f; r.top_k = c.vocab + 5; r.want_logprob = true; r.top_logprobs = 5; break;
    }
    if (b % 3 == 0) r.want_logprob = true;
    if (b % 4 == 1) r.top_logprobs = 3;
  }
  for (int b = 0; b < B; ++b)
    if (b % 10 >= 7 || b % 5 == 1) add_penalties(c, b, 1 + (b * 37) % 60, 100 + b);
  // token_ids_logprob on some rows (alone on a greedy row too: b = 20), ids spread over the vocabulary with a repeat.
  for (int b = 0; b < B; ++b) {
    SampleRow& r = c.batch.rows[b];
    r.ids_begin = r.ids_end = static_cast<int32_t>(c.batch.logprob_ids.size());
    if (b % 3 != 2 && b % 7 != 0) continue;
    for (int64_t id : {int64_t{0}, c.vocab - 1, (b * 7919) % c.vocab, c.vocab / 2, int64_t{0}})
      c.batch.logprob_ids.push_back(static_cast<int32_t>(id));
    r.ids_end = static_cast<int32_t>(c.batch.logprob_ids.size());
  }
}

TEST_F(SampleGpu, LargeVocabF32) {
  Case c = make_case(129280, 24, 11, 3.0f, false);
  mixed_params(c);
  run_case("v129280_f32", c, false, *cpu_, *gpu_);
}

TEST_F(SampleGpu, LargeVocabBf16) {
  Case c = make_case(129280, 20, 12, 2.0f, true);
  mixed_params(c);
  run_case("v129280_bf16", c, true, *cpu_, *gpu_);
}

TEST_F(SampleGpu, SmallVocab) {
  for (int64_t v : {1, 2, 37, 1000, 1025}) {
    Case c = make_case(v, 30, 13 + static_cast<uint32_t>(v), 1.5f, false);
    mixed_params(c);
    const std::string name = std::string("v").append(std::to_string(v));
    run_case(name.c_str(), c, false, *cpu_, *gpu_);
  }
}

// Many uniforms over the same distribution: every draw position of the sorted prefix is exercised, and
// more than one sort chunk (16 rows) runs.
TEST_F(SampleGpu, ManyUniformsOneRow) {
  Case c = make_case(5000, 48, 14, 1.0f, false);
  for (int b = 1; b < 48; ++b)
    std::copy(c.logits.begin() + 1 * c.ld, c.logits.begin() + 2 * c.ld, c.logits.begin() + (2 * b + 1) * c.ld);
  for (int b = 0; b < 48; ++b) {
    c.batch.rows[b].temperature = b < 24 ? 1.0f : 0.6f;
    c.batch.rows[b].top_p = b % 2 ? 0.95f : 1.0f;
    c.batch.rows[b].uniform = (b + 0.37) / 48.0;
  }
  run_case("same_row_48_uniforms", c, false, *cpu_, *gpu_);
}

// Ties: the greedy / top_k = 1 / top_p tiny choice is the lowest id of the tied maximum; ties elsewhere
// keep (value desc, id asc) order on both backends.
TEST_F(SampleGpu, Ties) {
  Case c = make_case(3000, 8, 15, 1.0f, true);
  for (int b = 0; b < 8; ++b) {
    float* row = c.logits.data() + (2 * b + 1) * c.ld;
    const float mx = 20.0f + b;
    row[2900 - b] = mx;
    row[17 + b] = mx;  // the lower id wins
    row[1500] = mx;
    SampleRow& r = c.batch.rows[b];
    r.temperature = b % 2 ? 1.0f : 0.0f;
    if (b % 4 == 1) r.top_k = 1;
    if (b % 4 == 3) r.top_p = 1e-7f;
  }
  run_case("ties", c, true, *cpu_, *gpu_);
  // The reference picks the lowest tied id (independent of the op under test).
  Tensor host = host_logits(c);
  const SampleResult cpu = cpu_->sample(host, c.batch);
  for (int b = 0; b < 8; ++b)
    if (b % 2 == 0 || b % 4 == 1 || b % 4 == 3) {
      EXPECT_EQ(cpu.tokens[b], 17 + b) << b;
    }
}

// Non-finite logits: the row reports its first non-finite column; the other rows are unaffected.
TEST_F(SampleGpu, NonFiniteRows) {
  Case c = make_case(129280, 6, 16, 2.0f, false);
  mixed_params(c);
  c.logits[3 * c.ld + 77777] = kNaN;                                     // row 1
  c.logits[3 * c.ld + 99999] = std::numeric_limits<float>::infinity();
  c.logits[7 * c.ld + 5] = -std::numeric_limits<float>::infinity();     // row 3
  run_case("non_finite", c, false, *cpu_, *gpu_);
  Tensor dev = cuda_upload(host_logits(c));
  const SampleResult got = gpu_->sample(dev, c.batch);
  EXPECT_EQ(got.bad_id[1], 77777);
  EXPECT_EQ(got.bad_id[3], 5);
  EXPECT_EQ(got.bad_id[0], -1);
  EXPECT_EQ(got.bad_id[2], -1);
}

// Penalties flip choices: a banned argmax is never returned, a presence penalty moves greedy off it.
TEST_F(SampleGpu, PenaltiesChangeTheChoice) {
  Case c = make_case(129280, 4, 17, 1.0f, false);
  for (int b = 0; b < 4; ++b) {
    float* row = c.logits.data() + (2 * b + 1) * c.ld;
    row[4242] = 50.0f;
    row[4243] = 49.0f;
    SampleRow& r = c.batch.rows[b];
    r.temperature = b < 2 ? 0.0f : 0.01f;
    r.presence_penalty = 2.0f;
    r.penalty_begin = static_cast<int32_t>(c.batch.penalties.size());
    SamplePenalty p;
    p.id = 4242;
    if (b % 2 == 0) p.output_count = 1; else p.banned = 1;
    c.batch.penalties.push_back(p);
    r.penalty_end = r.penalty_begin + 1;
  }
  run_case("penalty_flip", c, false, *cpu_, *gpu_);
  Tensor h = host_logits(c);
  const SampleResult got = gpu_->sample(cuda_upload(h), c.batch);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(got.tokens[b], 4243) << b;
}

// Greedy-only batches (no penalties, logprobs or top logprobs) take the one-launch path: the same tokens and
// non-finite reports as the CPU, ties to the lowest id across the chunk boundaries, rows up to the launch's limit
// (64) and past it (the general path), store entries written, and back-to-back launches (the per-row arrival
// counters must be back at zero for the second). A batch with one logprob row goes the general way: the greedy rows'
// tokens must agree with the one-launch path's.
TEST_F(SampleGpu, GreedyOnlyBatches) {
  for (const auto& [vocab, B, bf16] : std::vector<std::tuple<int64_t, int, bool>>{
           {129280, 1, false}, {129280, 7, true}, {1, 3, false}, {37, 5, false}, {1025, 64, true}, {5000, 65, false}}) {
    Case c = make_case(vocab, B, 40 + static_cast<uint32_t>(B), 2.0f, bf16);
    const int chunks = kernels::sample_greedy_chunks(vocab);
    const int64_t per = (vocab + chunks - 1) / chunks;  // the kernel's chunk: put ties on both sides of a boundary
    for (int b = 0; b < B; ++b) {
      float* row = c.logits.data() + (2 * b + 1) * c.ld;
      if (b % 3 == 1 && vocab > 2 * per) {
        row[per + b % 5] = 40.0f;  // the lower id, in chunk 1
        row[vocab - 1 - b % 7] = 40.0f;
      }
      if (b % 4 == 2) row[(b * 977) % vocab] = b % 8 == 2 ? kNaN : std::numeric_limits<float>::infinity();
      if (b % 5 == 4) row[vocab - 1] = 60.0f;  // the maximum in the last column
    }
    const std::string name = "greedy_v" + std::to_string(vocab) + "_b" + std::to_string(B);
    run_case(name.c_str(), c, bf16, *cpu_, *gpu_);  // first launch
    run_case(name.c_str(), c, bf16, *cpu_, *gpu_);  // second: the counters were reset
    // Store entries and logprobs (NaN: not wanted) on the greedy path; the general path's tokens for comparison.
    Tensor host = host_logits(c);
    Tensor dev = device_logits(host, bf16);
    SampleBatch stored = c.batch;
    for (int b = 0; b < B; ++b) stored.rows[b].store_index = B - 1 - b;
    Tensor store_d = cuda_upload(Tensor::zeros({B}, DType::kI32));
    const SampleResult fast = gpu_->sample_async(dev, stored, store_d)->wait();
    SampleBatch general = c.batch;
    general.rows[0].want_logprob = true;
    const SampleResult slow = gpu_->sample(dev, general);
    Tensor store_back = cuda_download(store_d);
    // The kernel itself, launched directly twice (so the test cannot pass on the general path alone): the CPU's
    // tokens and non-finite reports, and the arrival counters back at zero.
    const SampleResult want = cpu_->sample(host, c.batch);
    if (B <= kernels::kSampleGreedyMaxRows) {
      kernels::SampleGreedyParams g{};
      g.logits = dev.data();
      g.type = bf16 ? kernels::ElemType::kBF16 : kernels::ElemType::kF32;
      g.ld = c.ld;
      g.vocab = vocab;
      g.num_rows = B;
      for (int b = 0; b < B; ++b) {
        g.logits_row[b] = c.batch.rows[b].logits_row;
        g.store_index[b] = -1;
      }
      Tensor part = cuda_upload(Tensor::zeros({B * chunks * 5}, DType::kI32));
      Tensor arrivals = cuda_upload(Tensor::zeros({kernels::kSampleGreedyMaxRows}, DType::kI32));
      Tensor outs = cuda_upload(Tensor::zeros({4 * B}, DType::kI32));
      g.part = static_cast<kernels::SampleScanPart*>(part.data());
      g.arrivals = static_cast<uint32_t*>(arrivals.data());
      g.out = kernels::sample_outputs(outs.data_as<int32_t>(), B);
      for (int rep = 0; rep < 2; ++rep) {
        ASSERT_EQ(kernels::launch_sample_greedy(g, cuda_stream()), cudaSuccess);
        Tensor back = cuda_download(outs), arr = cuda_download(arrivals);
        for (int b = 0; b < B; ++b) {
          EXPECT_EQ(back.data_as<int32_t>()[B + b], want.bad_id[b]) << name << " kernel row " << b;
          if (want.bad_id[b] < 0) {
            EXPECT_EQ(back.data_as<int32_t>()[b], want.tokens[b]) << name << " kernel row " << b;
          }
        }
        for (int i = 0; i < kernels::kSampleGreedyMaxRows; ++i) EXPECT_EQ(arr.data_as<int32_t>()[i], 0) << name << " " << i;
        ASSERT_EQ(cudaMemsetAsync(outs.data(), 0xff, outs.nbytes(), cuda_stream()), cudaSuccess);
      }
    }
    for (int b = 0; b < B; ++b) {
      EXPECT_EQ(fast.tokens[b], slow.tokens[b]) << name << " row " << b;
      EXPECT_EQ(fast.bad_id[b], slow.bad_id[b]) << name << " row " << b;
      if (fast.bad_id[b] >= 0) {
        EXPECT_TRUE(std::isnan(fast.bad_value[b]) == std::isnan(slow.bad_value[b])) << name << " row " << b;
        EXPECT_EQ(fast.tokens[b], 0) << name << " row " << b;
      }
      EXPECT_TRUE(std::isnan(fast.logprobs[b])) << name << " row " << b;
      EXPECT_EQ(store_back.data_as<int32_t>()[B - 1 - b], fast.tokens[b]) << name << " row " << b;
      if (b % 3 == 1 && vocab > 2 * per && fast.bad_id[b] < 0 && b % 5 != 4) {
        EXPECT_EQ(fast.tokens[b], per + b % 5) << name << " row " << b;
      }
      if (b % 5 == 4 && fast.bad_id[b] < 0) {
        EXPECT_EQ(fast.tokens[b], vocab - 1) << name << " row " << b;
      }
    }
  }
}

// Overlap scheduling on the GPU: two samplings launched back to back before either is waited for (the
// second over logits the first's store entries selected, as a decode after a step in flight would), both
// write their rows' tokens into the device token store; resolve_tokens_ feeds them to placeholder ids; the
// results equal the CPU backend doing the same steps one at a time.
// Ops::greedy_to_store_ (bench-one-batch's in-graph greedy): every row of a [R, ld] buffer, columns past the
// vocabulary NaN (must not count), ties on both sides of a chunk boundary (the first maximum), non-finite rows (0),
// vocabularies from one chunk to more than kSampleGreedyMaxChunks of 1024 columns, more rows than the by-value
// launch takes; launched twice (the arrival counters reset) and from a graph replayed twice.
TEST_F(SampleGpu, GreedyToStoreMatchesCpu) {
  for (const auto& [vocab, R, bf16] : std::vector<std::tuple<int64_t, int, bool>>{
           {102400, 1, false}, {102400, 8, true}, {129280, 3, false}, {300000, 2, false}, {37, 5, false},
           {1, 2, true}, {5000, 70, false}}) {
    const int64_t ld = vocab + 29;
    const int chunks = kernels::sample_greedy_chunks(vocab);
    const int64_t per = (vocab + chunks - 1) / chunks;
    std::mt19937 rng(static_cast<uint32_t>(vocab + R));
    std::normal_distribution<float> nd(0.0f, 2.0f);
    Tensor host = Tensor::empty({R, ld}, DType::kF32);
    for (int r = 0; r < R; ++r) {
      float* row = host.f32() + r * ld;
      for (int64_t i = 0; i < ld; ++i) row[i] = i < vocab ? (bf16 ? round_bf16(nd(rng)) : nd(rng)) : kNaN;
      if (r % 3 == 1 && vocab > 2 * per) {
        row[per + r % 5] = 40.0f;  // the lower id, in chunk 1
        row[vocab - 1 - r % 7] = 40.0f;
      }
      if (r % 4 == 2) row[(r * 977) % vocab] = r % 8 == 2 ? kNaN : -std::numeric_limits<float>::infinity();
      if (r % 5 == 4) row[vocab - 1] = 60.0f;
    }
    Tensor want = Tensor::zeros({R}, DType::kI32);
    cpu_->greedy_to_store_(host, vocab, want);
    Tensor dev = device_logits(host, bf16);
    Tensor filled = Tensor::zeros({R}, DType::kI32);
    for (int r = 0; r < R; ++r) filled.data_as<int32_t>()[r] = -7;
    Tensor store = cuda_upload(filled);
    const std::string name = "greedy_to_store v" + std::to_string(vocab) + " R" + std::to_string(R);
    auto check = [&](const char* how) {
      Tensor got = cuda_download(store);
      for (int r = 0; r < R; ++r)
        EXPECT_EQ(got.data_as<int32_t>()[r], want.data_as<int32_t>()[r]) << name << " " << how << " row " << r;
      ASSERT_EQ(cudaMemsetAsync(store.data(), 0xff, store.nbytes(), cuda_stream()), cudaSuccess);
    };
    for (int rep = 0; rep < 2; ++rep) {
      gpu_->greedy_to_store_(dev, vocab, store);
      check("eager");
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(cuda_stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
    gpu_->greedy_to_store_(dev, vocab, store);
    ASSERT_EQ(cudaStreamEndCapture(cuda_stream(), &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 2; ++rep) {
      ASSERT_EQ(cudaGraphLaunch(exec, cuda_stream()), cudaSuccess);
      check("graph");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    // The CPU oracle's own rules, so a wrong reference cannot pass both: ties to the lower id, non-finite rows 0.
    for (int r = 0; r < R; ++r) {
      if (r % 4 == 2) {
        EXPECT_EQ(want.data_as<int32_t>()[r], 0) << name << " row " << r;
      } else if (r % 5 == 4) {
        EXPECT_EQ(want.data_as<int32_t>()[r], vocab - 1) << name << " row " << r;
      } else if (r % 3 == 1 && vocab > 2 * per) {
        EXPECT_EQ(want.data_as<int32_t>()[r], per + r % 5) << name << " row " << r;
      }
    }
  }
}

// A batch of greedy rows without logprobs (the one-launch greedy path) but for one row's token_ids_logprob: that
// batch takes the general path, and the ids' logprobs come back.
TEST_F(SampleGpu, IdsOnAGreedyBatch) {
  Case c = make_case(129280, 4, 19, 2.0f, false);
  c.batch.logprob_ids = {5, 129279, 4242};
  c.batch.rows[1].ids_begin = 0;
  c.batch.rows[1].ids_end = 3;
  run_case("greedy_with_ids", c, false, *cpu_, *gpu_);
}

TEST_F(SampleGpu, AsyncStoreFeedsPlaceholders) {
  Case c = make_case(129280, 12, 18, 2.0f, false);
  mixed_params(c);
  for (auto& r : c.batch.rows) r.top_logprobs = 0;  // also the copy-back without top logprobs
  for (size_t b = 0; b < c.batch.rows.size(); ++b) c.batch.rows[b].store_index = static_cast<int32_t>(2 * b + 1);
  Tensor host = host_logits(c);
  Tensor dev = cuda_upload(host);
  const int64_t S = 2 * static_cast<int64_t>(c.batch.rows.size()) + 3;
  Tensor store_h = Tensor::zeros({S}, DType::kI32);
  Tensor store_d = cuda_upload(store_h);
  // ids of the next step: every stored row as a placeholder, with real ids between them
  const int64_t B = static_cast<int64_t>(c.batch.rows.size());
  Tensor ids_h = Tensor::empty({2 * B}, DType::kI32);
  for (int64_t b = 0; b < B; ++b) {
    ids_h.data_as<int32_t>()[2 * b] = -(c.batch.rows[b].store_index + 1);
    ids_h.data_as<int32_t>()[2 * b + 1] = static_cast<int32_t>(1000 + b);
  }
  Tensor ids_d = cuda_upload(ids_h);
  auto first = gpu_->sample_async(dev, c.batch, store_d);
  gpu_->resolve_tokens_(ids_d, store_d);
  // A second step whose rows store over the same entries: the resolved ids must be the first step's.
  SampleBatch second = c.batch;
  for (auto& r : second.rows) r.uniform = 1.0 - r.uniform;
  auto later = gpu_->sample_async(dev, second, store_d);
  const SampleResult got2 = later->wait();
  const SampleResult got1 = first->wait();
  const SampleResult want1 = cpu_->sample_async(host, c.batch, store_h)->wait();
  cpu_->resolve_tokens_(ids_h, store_h);
  const SampleResult want2 = cpu_->sample_async(host, second, store_h)->wait();
  Tensor ids_back = cuda_download(ids_d), store_back = cuda_download(store_d);
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(got1.tokens[b], want1.tokens[b]) << b;
    EXPECT_EQ(got2.tokens[b], want2.tokens[b]) << b;
    EXPECT_EQ(ids_back.data_as<int32_t>()[2 * b], want1.tokens[b]) << b;
    EXPECT_EQ(ids_back.data_as<int32_t>()[2 * b + 1], 1000 + b) << b;
    EXPECT_EQ(store_back.data_as<int32_t>()[2 * b + 1], want2.tokens[b]) << b;
    EXPECT_EQ(store_back.data_as<int32_t>()[2 * b], 0) << b;  // rows no sampling stored to stay as they were
    if (c.batch.rows[b].want_logprob) {
      EXPECT_NEAR(got1.logprobs[b], want1.logprobs[b], 2e-4) << b;
    }
  }
  ASSERT_EQ(got1.id_logprobs.size(), want1.id_logprobs.size());
  ASSERT_FALSE(want1.id_logprobs.empty());
  for (size_t e = 0; e < want1.id_logprobs.size(); ++e) EXPECT_NEAR(got1.id_logprobs[e], want1.id_logprobs[e], 2e-4) << e;
}

}  // namespace
}  // namespace ds
