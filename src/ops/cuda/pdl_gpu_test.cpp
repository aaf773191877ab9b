// Programmatic dependent launch (kernels/pdl.cuh): with DSERVE_PDL on (the default) the second kernel of a
// stream starts while the first still runs and its pdl_wait still orders it after the first, eagerly and
// inside a CUDA graph; with DSERVE_PDL=0 the launch is plain stream order. A three-kernel chain checks the same
// ordering one launch further and reports whether the third starts before the second (itself started early) ends;
// a join of two streams checks that the kernel after it waits for both.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "kernels/basic.h"
#include "kernels/mla_decode.h"
#include "kernels/moe.h"
#include "kernels/pdl_probe.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

// The probe's launches on stream s (idle on entry), eagerly or captured into a graph that is then launched once.
void run_launches(bool graph, cudaStream_t s, const std::function<cudaError_t()>& launch) {
  if (!graph) {
    EXPECT_EQ(launch(), cudaSuccess);
    return;
  }
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(launch(), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

struct ProbeTimes {
  uint64_t first_end, second_start, second_after_wait;
};

ProbeTimes run_probe(bool graph) {
  init_cuda_device(0);
  cudaStream_t s = cuda_stream();
  uint64_t* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, 3 * sizeof(uint64_t)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0, 3 * sizeof(uint64_t), s), cudaSuccess);
  constexpr int64_t kSpinNs = 200 * 1000;  // far longer than a launch: the order of the stamps is unambiguous
  // Warm-up: with lazy module loading the first launch of a kernel may wait for the work in flight.
  EXPECT_EQ(kernels::launch_pdl_probe(d, 1000, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  run_launches(graph, s, [&] { return kernels::launch_pdl_probe(d, kSpinNs, s); });
  uint64_t h[3] = {0, 0, 0};
  EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(d);
  return {h[0], h[1], h[2]};
}

// compute-sanitizer and profilers attach through injection libraries and serialise kernels: no early start.
bool tool_attached() {
  for (const char* v : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"})
    if (const char* e = std::getenv(v); e && *e) return true;
  return false;
}

void check(const ProbeTimes& t) {
  ASSERT_GT(t.first_end, 0u);
  ASSERT_GT(t.second_start, 0u);
  EXPECT_GE(t.second_after_wait, t.first_end) << "pdl_wait returned before the first kernel finished";
  if (tool_attached()) return;
  if (kernels::pdl_enabled())
    EXPECT_LT(t.second_start, t.first_end) << "the second kernel did not start early: PDL is not in effect";
  else
    EXPECT_GE(t.second_start, t.first_end);
}

// launch_pdl_chain_probe's stamps (pdl_probe.h), eagerly or as a captured graph.
struct ChainTimes {
  uint64_t a_end, b_start, b_end, c_start, c_after_wait;
};

ChainTimes run_chain(bool graph, int b_ctas, int64_t spin_ns) {
  init_cuda_device(0);
  cudaStream_t s = cuda_stream();
  uint64_t* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, 5 * sizeof(uint64_t)), cudaSuccess);
  const uint64_t init[5] = {0, UINT64_MAX, 0, 0, 0};
  auto reset = [&] { EXPECT_EQ(cudaMemcpyAsync(d, init, sizeof(init), cudaMemcpyHostToDevice, s), cudaSuccess); };
  reset();
  EXPECT_EQ(kernels::launch_pdl_chain_probe(d, b_ctas, 1000, s), cudaSuccess);  // warm-up (lazy loading)
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  reset();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  run_launches(graph, s, [&] { return kernels::launch_pdl_chain_probe(d, b_ctas, spin_ns, s); });
  uint64_t h[5] = {0, 0, 0, 0, 0};
  EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(d);
  return {h[0], h[1], h[2], h[3], h[4]};
}

TEST(Pdl, EagerSecondKernelStartsEarlyAndWaits) { check(run_probe(false)); }
TEST(Pdl, GraphSecondKernelStartsEarlyAndWaits) { check(run_probe(true)); }

// Every wait orders its kernel after the one before, one launch further along a chain, for a one-CTA and a
// 228-CTA middle kernel (the q / kv_a pair's grid at batch 1); whether the third kernel started before the second
// ended (the second having started early itself, as every weight-streaming kernel of a decode step does) is
// printed, not asserted: it is the measurement this case exists for (PDLCHAIN lines).
TEST(Pdl, ChainedKernelsWaitInOrder) {
  constexpr int64_t kSpinNs = 200 * 1000;
  for (bool graph : {false, true}) {
    for (int b_ctas : {1, 228}) {
      const ChainTimes t = run_chain(graph, b_ctas, kSpinNs);
      const std::string what = std::string(graph ? "graph" : "eager") + ", " + std::to_string(b_ctas) + " CTAs";
      ASSERT_GT(t.a_end, 0u) << what;
      ASSERT_NE(t.b_start, UINT64_MAX) << what;
      ASSERT_GT(t.c_start, 0u) << what;
      EXPECT_GE(t.b_end, t.a_end + kSpinNs) << what << ": the middle kernel's wait returned before the first ended";
      EXPECT_GE(t.c_after_wait, t.b_end) << what << ": the last kernel's wait returned before the middle one ended";
      if (!tool_attached() && kernels::pdl_enabled()) {
        EXPECT_LT(t.b_start, t.a_end) << what << ": the middle kernel did not start early";
      }
      std::printf("PDLCHAIN %s: middle started %.1f us before the first ended, last started %.1f us before the middle "
                  "ended (negative: after)\n",
                  what.c_str(), (static_cast<double>(t.a_end) - static_cast<double>(t.b_start)) / 1e3,
                  (static_cast<double>(t.b_end) - static_cast<double>(t.c_start)) / 1e3);
    }
  }
}

// Two streams joined as CudaOps::side_begin / side_join do (fork event, side work, join event), the kernel after
// the join launched with PDL: stamps d[0] = side kernel's end, d[1] = the main stream's previous kernel's end,
// d[2] / d[3] = the joined kernel's start / time after its wait. fence: pdl_fence before it (a plain launch).
struct JoinTimes {
  uint64_t side_end, main_end, joined_start, joined_after_wait;
};

JoinTimes run_join(bool graph, bool fence, int64_t side_spin_ns, int64_t main_spin_ns) {
  init_cuda_device(0);
  cudaStream_t s = cuda_main_stream(), side = cuda_side_stream();
  cudaEvent_t fork = nullptr, done = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  uint64_t* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, 4 * sizeof(uint64_t)), cudaSuccess);
  auto launches = [&](int64_t side_ns, int64_t main_ns) {
    if (cudaError_t e = cudaEventRecord(fork, s); e != cudaSuccess) return e;
    if (cudaError_t e = cudaStreamWaitEvent(side, fork, 0); e != cudaSuccess) return e;
    kernels::pdl_fence(side);  // as side_begin: the side stream's first kernel follows the fork, not its own past
    if (cudaError_t e = kernels::launch_pdl_spin(d + 0, side_ns, side); e != cudaSuccess) return e;
    if (cudaError_t e = cudaEventRecord(done, side); e != cudaSuccess) return e;
    if (cudaError_t e = kernels::launch_pdl_spin(d + 1, main_ns, s); e != cudaSuccess) return e;
    if (cudaError_t e = cudaStreamWaitEvent(s, done, 0); e != cudaSuccess) return e;
    if (fence) kernels::pdl_fence(s);
    return kernels::launch_pdl_stamp(d + 2, s);
  };
  EXPECT_EQ(cudaMemsetAsync(d, 0, 4 * sizeof(uint64_t), s), cudaSuccess);
  EXPECT_EQ(launches(1000, 1000), cudaSuccess);  // warm-up (lazy loading)
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0, 4 * sizeof(uint64_t), s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  run_launches(graph, s, [&] { return launches(side_spin_ns, main_spin_ns); });
  EXPECT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  uint64_t h[4] = {0, 0, 0, 0};
  EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(d);
  cudaEventDestroy(fork);
  cudaEventDestroy(done);
  return {h[0], h[1], h[2], h[3]};
}

// A PDL launch right after a stream waits on an event: its wait must order it after the waited-for stream's work
// too, fenced (a plain launch) or not, eagerly and in a graph; DSERVE_PDL_JOIN_FENCE=0 relies on the unfenced case.
// Printed (PDLJOIN lines): whether the unfenced kernel starts before its own stream's previous kernel ends when the
// other stream is done first (the early start the fence gives up).
TEST(Pdl, JoinedStreamWaitsForBoth) {
  constexpr int64_t kLong = 200 * 1000, kShort = 20 * 1000;
  for (bool graph : {false, true}) {
    for (bool fence : {true, false}) {
      for (bool side_long : {true, false}) {
        const JoinTimes t = run_join(graph, fence, side_long ? kLong : kShort, side_long ? kShort : kLong);
        const std::string what = std::string(graph ? "graph" : "eager") + (fence ? ", fenced" : ", unfenced") +
                                 (side_long ? ", side stream longer" : ", main stream longer");
        ASSERT_GT(t.side_end, 0u) << what;
        ASSERT_GT(t.main_end, 0u) << what;
        ASSERT_GT(t.joined_start, 0u) << what;
        EXPECT_GE(t.joined_after_wait, t.side_end) << what << ": the joined kernel passed its wait before the side "
                                                             "stream's kernel ended";
        EXPECT_GE(t.joined_after_wait, t.main_end) << what << ": the joined kernel passed its wait before its own "
                                                             "stream's previous kernel ended";
        std::printf("PDLJOIN %s: joined kernel started %.1f us before the main stream's kernel ended, %.1f us before "
                    "the side stream's (negative: after)\n",
                    what.c_str(), (static_cast<double>(t.main_end) - static_cast<double>(t.joined_start)) / 1e3,
                    (static_cast<double>(t.side_end) - static_cast<double>(t.joined_start)) / 1e3);
      }
    }
  }
}

// The bf16 decode graph's start stall (BENCHMARKS.md, sessions 46-48): its second kernel starts ~10 us after the first
// ends once the graph forks a side branch anywhere, where a graph without one starts it in ~1.5 us. A synthetic graph
// of one-CTA PDL kernels as the runner makes them (our main / side streams, CudaOps::side_begin's fork, an event join,
// the runner's instantiation flags, uploaded, replayed): spin (2 us, its end stamped) -> stamp (start before its wait,
// time after it) -> 40 spins, with a side branch of one 5 us spin forked after main kernel `fork_at` (or none) and
// joined before the last stamp. Asserted: every wait orders its kernel. Printed (PDLHEAD lines), not asserted: the
// median gap from the first kernel's end to the second's start over 20 replays, per fork position: whether the
// stall reproduces outside the model.
double graph_head_gap_us(int fork_at, int main_kernels = 40, int side_kernels = 1) {
  init_cuda_device(0);
  cudaStream_t s = cuda_main_stream(), side = cuda_side_stream();
  cudaEvent_t fork = nullptr, done = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  uint64_t* d = nullptr;  // [0] first end, [1] / [2] second start / after wait, [3] side end, [4] / [5] last stamp
  EXPECT_EQ(cudaMalloc(&d, 8 * sizeof(uint64_t)), cudaSuccess);
  const int spins = main_kernels;
  const bool forks = fork_at >= 0 && fork_at < spins;
  auto launches = [&]() -> cudaError_t {
    if (cudaError_t e = kernels::launch_pdl_spin(d + 0, 2000, s); e != cudaSuccess) return e;
    if (cudaError_t e = kernels::launch_pdl_stamp(d + 1, s); e != cudaSuccess) return e;
    for (int i = 0; i < spins; ++i) {
      if (i == fork_at) {
        if (cudaError_t e = cudaEventRecord(fork, s); e != cudaSuccess) return e;
        if (cudaError_t e = cudaStreamWaitEvent(side, fork, 0); e != cudaSuccess) return e;
        for (int k = 0; k < side_kernels; ++k)
          if (cudaError_t e = kernels::launch_pdl_spin(d + 3, side_kernels == 1 ? 5000 : 500, side); e != cudaSuccess)
            return e;
        if (cudaError_t e = cudaEventRecord(done, side); e != cudaSuccess) return e;
      }
      if (cudaError_t e = kernels::launch_pdl_spin(d + 6, spins > 100 ? 300 : 2000, s); e != cudaSuccess) return e;
    }
    if (forks)
      if (cudaError_t e = cudaStreamWaitEvent(s, done, 0); e != cudaSuccess) return e;
    return kernels::launch_pdl_stamp(d + 4, s);
  };
  EXPECT_EQ(launches(), cudaSuccess);  // warm-up (lazy loading)
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(launches(), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, g, cuda_graph_instantiate_flags()), cudaSuccess);
  EXPECT_EQ(cudaGraphUpload(exec, s), cudaSuccess);
  std::vector<double> gaps;
  for (int r = 0; r < 20; ++r) {
    EXPECT_EQ(cudaMemsetAsync(d, 0, 8 * sizeof(uint64_t), s), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    uint64_t h[8] = {};
    EXPECT_EQ(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_GT(h[0], 0u);
    EXPECT_GE(h[2], h[0]) << "the second kernel passed its wait before the first ended";
    EXPECT_GE(h[5], h[4]);
    if (forks) {
      EXPECT_GE(h[5], h[3]) << "the last kernel passed the join before the side";
    }
    gaps.push_back((static_cast<double>(h[1]) - static_cast<double>(h[0])) / 1e3);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaFree(d);
  cudaEventDestroy(fork);
  cudaEventDestroy(done);
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

TEST(Pdl, GraphHeadWithASideBranch) {
  // Session 49: 40 main kernels never stalled; the model's graph has ~1,400 nodes (~100 on the side stream).
  struct Case {
    int fork_at, main_kernels, side_kernels;
  };
  for (const Case c : {Case{-1, 40, 1}, Case{0, 40, 1}, Case{20, 40, 1}, Case{20, 40, 100}, Case{-1, 400, 1},
                       Case{20, 400, 1}, Case{-1, 1400, 1}, Case{20, 1400, 1}, Case{20, 1400, 100}, Case{1000, 1400, 1}}) {
    const double gap = graph_head_gap_us(c.fork_at, c.main_kernels, c.side_kernels);
    std::printf("PDLHEAD %d main kernels, fork %s, %d side kernels: second kernel started %.2f us after the first ended "
                "(median of 20 replays)\n",
                c.main_kernels + 3,
                c.fork_at < 0 ? "none" : ("after the first " + std::to_string(c.fork_at + 2) + " main kernels").c_str(),
                c.side_kernels, gap);
  }
}

// A plain launcher (launch_plain) reports its own launch's result, not an error an earlier runtime call of this thread
// left unread (a <<<>>> launch followed by cudaGetLastError() returned that one, which made an unrelated failure look
// like the launcher's); an invalid launch is still reported, and the fill ran.
TEST(Pdl, PlainLaunchersReportTheirOwnErrors) {
  cudaStream_t s = cuda_stream();
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 256 * sizeof(float)), cudaSuccess);
  ASSERT_NE(cudaFree(reinterpret_cast<void*>(0x10)), cudaSuccess);  // a non-sticky error, left unread
  EXPECT_EQ(kernels::launch_fill_f32(buf, 256, 2.5f, s), cudaSuccess);
  (void)cudaGetLastError();
  float host[256] = {};
  ASSERT_EQ(cudaMemcpyAsync(host, buf, sizeof(host), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  int wrong = 0;
  for (float v : host) wrong += v != 2.5f;
  EXPECT_EQ(wrong, 0);
  // A launch the device refuses (70,000 tokens: a grid y past 65,535) is reported by its launcher.
  kernels::MlaDecodeParams p{};
  p.num_tokens = 70000;
  p.num_heads = 1;
  p.head_dim = 576;
  p.v_dim = 512;
  p.page_size = 64;
  p.cache_format = 0;  // bf16 rows
  EXPECT_NE(kernels::launch_mla_decode_reference(p, s), cudaSuccess);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
}

// CudaOps' flag join (MoeCombineParams::addend_ready): the MoE combine on the main stream reads an addend that a
// side-stream kernel writes late (after a 200 us spin), with no edge from the side stream, only the ready pair set by
// launch_moe_addend_signal; eagerly and in a graph replayed twice (the last consumer CTA resets the pair between
// replays). The sums must hold the late addend, not the stale one, and the pair must be 0 again afterwards. 3 tokens x
// 2048 columns: the combine runs 6 CTAs, so the reset waits for every one of them.
TEST(Pdl, FlagJoinedAddendWaitsForItsSignal) {
  init_cuda_device(0);
  cudaStream_t s = cuda_main_stream(), side = cuda_side_stream();
  constexpr int kT = 3, kK = 2, kDim = 2048, kRows = kT * kK;
  std::vector<uint16_t> y(kRows * kDim);  // bf16 bits of small integers (exact sums)
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kDim; ++c)
      y[r * kDim + c] = static_cast<uint16_t>(f32_to_bits(static_cast<float>((r + c) % 4)) >> 16);
  std::vector<int32_t> row_of(kRows);
  for (int i = 0; i < kRows; ++i) row_of[i] = (i * 5) % kRows;  // a permutation
  std::vector<float> wts(kRows, 1.0f), late(kT * kDim), stale(kT * kDim, -10000.0f);
  for (int i = 0; i < kT * kDim; ++i) late[i] = 100.0f + static_cast<float>(i % 8);
  void *dy, *drow, *dw, *dout, *dadd, *dlate, *dstale;
  uint32_t* ready = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, y.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drow, kRows * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, kRows * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, kT * kDim * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dadd, kT * kDim * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dlate, kT * kDim * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dstale, kT * kDim * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ready, 2 * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dy, y.data(), y.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(drow, row_of.data(), kRows * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dw, wts.data(), kRows * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dlate, late.data(), kT * kDim * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dstale, stale.data(), kT * kDim * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(ready, 0, 2 * sizeof(uint32_t)), cudaSuccess);
  kernels::MoeCombineParams p{dy, static_cast<const int32_t*>(drow), static_cast<const float*>(dw), dout, kT, kDim, kK};
  p.addend = dadd;
  p.addend_f32 = true;
  p.addend_ready = ready;
  cudaEvent_t fork = nullptr, done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  // Fork, the late writer and its signal on the side stream, the consumer on the main one, then (for the capture)
  // the join after the consumer.
  auto step = [&]() -> cudaError_t {
    if (cudaError_t e = cudaEventRecord(fork, s); e != cudaSuccess) return e;
    if (cudaError_t e = cudaStreamWaitEvent(side, fork, 0); e != cudaSuccess) return e;
    if (cudaError_t e = kernels::launch_pdl_delayed_copy(dadd, dlate, kT * kDim * 4, 200 * 1000, side);
        e != cudaSuccess)
      return e;
    if (cudaError_t e = kernels::launch_moe_addend_signal(ready, side); e != cudaSuccess) return e;
    if (cudaError_t e = kernels::launch_moe_combine(p, s); e != cudaSuccess) return e;
    if (cudaError_t e = cudaEventRecord(done, side); e != cudaSuccess) return e;
    return cudaStreamWaitEvent(s, done, 0);
  };
  auto check = [&](const std::string& what) {
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess) << what;
    std::vector<uint16_t> out(kT * kDim);
    uint32_t pair[2] = {7, 7};
    ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pair, ready, sizeof(pair), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(pair[0], 0u) << what << ": ready word left set";
    EXPECT_EQ(pair[1], 0u) << what << ": arrivals left counted";
    int wrong = 0;
    for (int t = 0; t < kT; ++t)
      for (int c = 0; c < kDim; ++c) {
        float want = late[t * kDim + c];
        for (int k = 0; k < kK; ++k) want += static_cast<float>((row_of[t * kK + k] + c) % 4);
        const float got = bits_to_f32(static_cast<uint32_t>(out[t * kDim + c]) << 16);
        wrong += got != want;
      }
    EXPECT_EQ(wrong, 0) << what << ": sums without the late addend";
  };
  // Warm-up launches of every kernel (lazy loading), then the measured forms, the addend stale before each.
  ASSERT_EQ(cudaMemcpyAsync(dadd, dlate, kT * kDim * 4, cudaMemcpyDeviceToDevice, s), cudaSuccess);
  ASSERT_EQ(step(), cudaSuccess);
  check("warm-up");
  ASSERT_EQ(cudaMemcpyAsync(dadd, dstale, kT * kDim * 4, cudaMemcpyDeviceToDevice, s), cudaSuccess);
  ASSERT_EQ(step(), cudaSuccess);
  check("eager");
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(step(), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaMemcpyAsync(dadd, dstale, kT * kDim * 4, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    check("graph replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(fork);
  cudaEventDestroy(done);
  for (void* q : {dy, drow, dw, dout, dadd, dlate, dstale, static_cast<void*>(ready)}) cudaFree(q);
}

}  // namespace
}  // namespace ds
