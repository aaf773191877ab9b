// Helpers for the CUDA-vs-CPU consistency tests: random bf16-representable inputs (never zeros), device
// copies in bf16/f32, read-back to fp32, and error metrics suited to bf16 outputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/fp8_gemm.h"  // launch_fp8_quant_act
#include "kernels/moe.h"
#include "kernels/moe_fp8.h"  // make_moe_wgmma_maps
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/graph_timing.h"
#include "ops/cuda/kernel_cases.h"
#include "ops/ops.h"

namespace ds::test {

// Input generators shared with dserve_kernel_bench (ops/cuda/kernel_cases.h).
using kcases::i32_tensor;
using kcases::randn;
using kcases::to_device;

// Sets (value non-null) or unsets an environment variable for a scope and puts back what was there when the scope
// ends, also when an ASSERT leaves the test early: the decode-path A/B switches are read per launch, per call or
// when a backend is made, and one leaked into the next test would run it on another path.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) {
    if (value) setenv(name_.c_str(), value, 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Fixture of the CUDA-vs-CPU suites: one CUDA backend (allocations poisoned with NaN) and one CPU backend,
// made once for the whole test binary and never destroyed (tensors in static objects may outlive them).
class CudaVsCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_) return;
    init_cuda_device(0);
    set_cuda_alloc_poison(true);
    // Op by op against the CPU's default (dequantized) FP8 semantics; the native W8A8 path has its own suites
    // (fp8_gemm_gpu_test, moe_fp8_gpu_test, fp8_fixture_gpu_test) with the CPU under DSERVE_FP8_NATIVE=1.
    setenv("DSERVE_FP8_NATIVE", "0", 1);
    cuda_ = make_cuda_ops(0).release();
    unsetenv("DSERVE_FP8_NATIVE");
    cpu_ = make_cpu_ops().release();
  }
  static Ops& gpu() { return *cuda_; }
  static Ops& cpu() { return *cpu_; }

 private:
  static inline Ops* cuda_ = nullptr;
  static inline Ops* cpu_ = nullptr;
};

// Microseconds per call of `launch` (kernel launches on s; capturable), 20 calls a graph: ds::graph_time_us.
template <typename F>
inline double graph_time_us(F launch, cudaStream_t s) {
  return ds::graph_time_us([&](int) { launch(); }, 20, s);
}

// Routed rows of top-k expert ids as the grouped MoE kernels see them: rows grouped by expert in expert order
// (offsets), their counts, the experts with rows (ascending), the total and the busiest expert's rows.
struct ExpertRouting {
  std::vector<int32_t> counts, offsets, active;
  int64_t total = 0;
  int max_rows = 0;
};
inline ExpertRouting expert_routing(const std::vector<int32_t>& ids, int experts) {
  ExpertRouting r;
  r.counts.assign(experts, 0);
  r.offsets.assign(experts, 0);
  for (int32_t id : ids) ++r.counts[id];
  for (int e = 0; e < experts; ++e) {
    r.offsets[e] = static_cast<int32_t>(r.total);
    r.total += r.counts[e];
    if (r.counts[e] > 0) r.active.push_back(e);
    r.max_rows = std::max(r.max_rows, r.counts[e]);
  }
  return r;
}
// Device copies of counts, offsets, active and [number of active].
struct DeviceRouting {
  Tensor counts, offsets, active, num_active;
};
inline DeviceRouting upload_routing(const ExpertRouting& r) {
  const int64_t E = static_cast<int64_t>(r.counts.size()), n = static_cast<int64_t>(r.active.size());
  return {cuda_upload(i32_tensor(r.counts, {E})), cuda_upload(i32_tensor(r.offsets, {E})),
          cuda_upload(i32_tensor(r.active, {n})), cuda_upload(i32_tensor({static_cast<int32_t>(n)}, {1}))};
}
// A grouped MoE kernel's routing arrays (MoeGroupedGemmParams, MoeFp8GemmParams) from their device copies.
template <typename Params>
inline void set_routing(Params& p, const DeviceRouting& rd) {
  p.counts = rd.counts.data_as<int32_t>();
  p.offsets = rd.offsets.data_as<int32_t>();
  p.active = rd.active.data_as<int32_t>();
  p.num_active = rd.num_active.data_as<int32_t>();
}
// The small-M MoE kernels' decode shapes called directly (moe_gemm_gpu_test, moe_fp8_gpu_test): V2-Lite's and V3's
// expert products over a few experts, some active (ascending).
struct MoeDecodeShape {
  const char* name;
  int64_t N, K;
  bool silu;
  int experts;
  std::vector<int> active;
};
inline std::vector<MoeDecodeShape> moe_decode_shapes() {
  return {
      {"v2-lite gate_up", 1408, 2048, true, 16, {1, 3, 4, 8, 11, 15}},
      {"v2-lite down", 2048, 1408, false, 16, {1, 3, 4, 8, 11, 15}},
      {"v3 gate_up", 2048, 7168, true, 9, {0, 2, 3, 4, 5, 6, 7, 8}},
      {"v3 down", 7168, 2048, false, 9, {0, 2, 3, 4, 5, 6, 7, 8}},
  };
}
// Its routing at `rows` rows an active expert (the first one rows - 1 when that is not 0: ragged), none for the
// others: expert-ordered counts and offsets, the total.
inline ExpertRouting decode_routing(const MoeDecodeShape& sh, int rows) {
  ExpertRouting r;
  r.counts.assign(sh.experts, 0);
  r.offsets.assign(sh.experts, 0);
  for (size_t a = 0; a < sh.active.size(); ++a) r.counts[sh.active[a]] = a == 0 && rows > 1 ? rows - 1 : rows;
  for (int e = 0; e < sh.experts; ++e) {
    r.offsets[e] = static_cast<int32_t>(r.total);
    r.total += r.counts[e];
    r.max_rows = std::max(r.max_rows, r.counts[e]);
  }
  r.active.assign(sh.active.begin(), sh.active.end());
  return r;
}
// The wgmma walks' tensor maps (kernels::make_moe_wgmma_maps) over these device weights ([rows, row_bytes] each), in
// device memory (64-byte aligned, as the walks need; checked).
inline Tensor wgmma_maps(const std::vector<const void*>& weights, int experts, int64_t rows, int64_t row_bytes) {
  Tensor maps = Tensor::empty({static_cast<int64_t>(experts * sizeof(CUtensorMap))}, DType::kU8);
  EXPECT_TRUE(kernels::make_moe_wgmma_maps(weights.data(), experts, rows, row_bytes,
                                           static_cast<CUtensorMap*>(maps.data())))
      << "tensor maps of " << experts << " experts, " << rows << " x " << row_bytes << " bytes";
  Tensor d = cuda_upload(maps);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.data()) & 63, 0u) << "tensor maps need 64-byte alignment";
  return d;
}
// The grouping's slot records (kernels/moe.h) of that routing over n_slots slots (>= the active experts): header
// {expert, count, offset, 0} and, with src (src[row] = its activation row), the source rows of each expert's first
// kMoeSlotSrc rows; count 0 past the active experts, as the grouping leaves them.
inline std::vector<int32_t> slot_records(const ExpertRouting& r, int n_slots, const std::vector<int32_t>* src) {
  std::vector<int32_t> rec(static_cast<size_t>(n_slots) * kernels::kMoeSlotInts, 0);
  for (size_t a = 0; a < r.active.size(); ++a) {
    const int e = r.active[a];
    int32_t* s = &rec[a * kernels::kMoeSlotInts];
    s[0] = e;
    s[1] = r.counts[e];
    s[2] = r.offsets[e];
    for (int i = 0; src && i < r.counts[e] && i < kernels::kMoeSlotSrc; ++i)
      s[kernels::kMoeSlotHeader + i] = (*src)[r.offsets[e] + i];
  }
  return rec;
}
// got: host F32 [total + 1, N] read back from a NaN-poisoned output: every routed row finite, the extra row
// untouched (still NaN).
inline void expect_rows_written(const Tensor& got, int64_t total, int64_t N, const std::string& what) {
  int64_t nonfinite = 0, tail_written = 0;
  for (int64_t i = 0; i < total * N; ++i) nonfinite += !std::isfinite(got.f32()[i]);
  for (int64_t i = total * N; i < (total + 1) * N; ++i) tail_written += !std::isnan(got.f32()[i]);
  EXPECT_EQ(nonfinite, 0) << what;
  EXPECT_EQ(tail_written, 0) << what;
}
// A grouped GEMM's expected rows from the full product y [n, 2N] (silu: silu(gate) * up in fp32) or [n, N], and
// the rows [r0, r0 + n) of got [*, N] beside them: {want, have}.
inline std::pair<Tensor, Tensor> expert_rows(const Tensor& y, const Tensor& got, int64_t r0, int64_t N, bool silu) {
  const int64_t n = y.dim(0), w = y.dim(1);
  Tensor want = Tensor::empty({n, N}, DType::kF32), have = Tensor::empty({n, N}, DType::kF32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < N; ++c) {
      float v = y.f32()[i * w + c];
      if (silu) v = v / (1.0f + std::exp(-v)) * y.f32()[i * w + N + c];
      want.f32()[i * N + c] = v;
      have.f32()[i * N + c] = got.f32()[(r0 + i) * N + c];
    }
  return {want, have};
}

// "op d0 d1 ...": the case name the ERR lines print.
inline std::string shape_name(const char* op, std::initializer_list<int64_t> dims) {
  std::string s = op;
  for (int64_t d : dims) s.append(" ").append(std::to_string(d));
  return s;
}

// Device float tensor -> host F32.
inline Tensor to_host_f32(const Tensor& dev) { return to_f32(cuda_download(dev)); }
// Two host tensors of the same shape and bytes (outputs that must agree bit for bit).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}
// The same for two device tensors (downloaded as they are: any dtype).
inline bool same_device_bits(const Tensor& a, const Tensor& b) { return same_bits(cuda_download(a), cuda_download(b)); }

// launch_fp8_quant_act's token-major quantization of a contiguous bf16 device tensor x [M, K] (K % 128 == 0) into new
// *q (e4m3 [M, K]) and *s (fp32 [M, K / 128]) on `stream`: the reference a producer's fused quantization must equal.
inline cudaError_t quant_act(const Tensor& x, bool ue8m0, cudaStream_t stream, Tensor* q, Tensor* s) {
  const int64_t M = x.dim(0), K = x.dim(1);
  *q = Tensor::empty({M, K}, DType::kF8E4M3, Device::kCuda);
  *s = Tensor::empty({M, K / 128}, DType::kF32, Device::kCuda);
  return kernels::launch_fp8_quant_act(
      kernels::fp8_quant_rows_params(x.data(), false, K, M, K, K, q->data_as<uint8_t>(), s->data_as<float>(), ue8m0),
      stream);
}

// A GEMM output checked inside a NaN-filled [rows, ldd] buffer of which only [M, N] may be written: padding that is
// no longer NaN, non-finite values inside, and the largest |got - ref(m, n)| against the largest |ref| (ref: the
// host product, double). add() accumulates over several such blocks (batches); rel() is the ratio.
struct PaddedCheck {
  int64_t bad_pad = 0, nonfinite = 0;
  double max_err = 0, max_ref = 0;
  template <typename Ref>
  void add(const float* got, int64_t rows, int64_t ldd, int64_t M, int64_t N, Ref ref) {
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < ldd; ++n) {
        const float v = got[m * ldd + n];
        if (m >= M || n >= N) {
          bad_pad += !std::isnan(v);
          continue;
        }
        const double r = ref(m, n);
        if (!std::isfinite(v)) {
          ++nonfinite;
          continue;
        }
        max_err = std::max(max_err, std::fabs(v - r));
        max_ref = std::max(max_ref, std::fabs(r));
      }
  }
  double rel() const { return max_err / std::max(max_ref, 1e-6); }
};

struct Err {
  double max_rel = 0;  // max |a - b| / max(max |b|, floor)
  double l2_rel = 0;   // ||a - b|| / ||b||
  int64_t nan = 0;     // NaNs in `got` where `want` has none
  std::string str() const {
    return "max_rel " + std::to_string(max_rel) + " l2_rel " + std::to_string(l2_rel) + " nan " + std::to_string(nan);
  }
};

inline Err compare(const Tensor& got, const Tensor& want, double floor = 1e-6) {
  EXPECT_EQ(got.numel(), want.numel());
  Err e;
  double max_abs = 0, max_b = 0, diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < want.numel() && i < got.numel(); ++i) {
    const double a = got.f32()[i], b = want.f32()[i];
    if (std::isnan(b)) continue;
    if (!std::isfinite(a)) {
      ++e.nan;
      continue;
    }
    max_abs = std::max(max_abs, std::fabs(a - b));
    max_b = std::max(max_b, std::fabs(b));
    diff2 += (a - b) * (a - b);
    ref2 += b * b;
  }
  e.max_rel = max_abs / std::max(max_b, floor);
  e.l2_rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), floor);
  return e;
}

// Records one op's worst errors for the summary line each test prints (grep "ERR ").
inline void report(const std::string& what, const Err& e) {
  std::printf("ERR %-40s %s\n", what.c_str(), e.str().c_str());
}

#define DS_EXPECT_CLOSE(got, want, max_tol, l2_tol, what)                         \
  do {                                                                             \
    ::ds::test::Err e_ = ::ds::test::compare((got), (want));                       \
    ::ds::test::report((what), e_);                                                \
    EXPECT_EQ(e_.nan, 0) << (what);                                                \
    EXPECT_LE(e_.max_rel, (max_tol)) << (what) << " " << e_.str();                 \
    EXPECT_LE(e_.l2_rel, (l2_tol)) << (what) << " " << e_.str();                   \
  } while (0)

// A test grouping buffer of N entries over E experts (int32): the op's layout (counts[E], offsets[E], cursor[E],
// active[E], num_active, row_of[N], src_token[N]), then min(E, N) slot records from grouping_slots_at on (a
// multiple of 4: 16-byte aligned in an aligned buffer).
inline int64_t grouping_slots_at(int E, int64_t N) { return (4 * int64_t{E} + 1 + 2 * N + 3) / 4 * 4; }
inline int64_t grouping_len(int E, int64_t N) {
  return grouping_slots_at(E, N) + kernels::kMoeSlotInts * kernels::moe_slot_count(E, N);
}

// The grouping of kernels::MoePermuteParams (layout above, as downloaded) checked against the ids it grouped:
// counts, offsets, the active list, every valid entry in its expert's row range exactly once with its token, -1
// for ids outside [0, E); with slots, also the slot records (header, the source tokens of the first rows as
// src_token holds them, count 0 past the active experts). Returns the number of wrong values.
inline int64_t grouping_mismatches(const std::vector<int32_t>& ids, const int32_t* meta, int E, int K,
                                   bool slots = false) {
  const int64_t N = static_cast<int64_t>(ids.size());
  const int32_t* counts = meta;
  const int32_t* offsets = counts + E;
  const int32_t* active = counts + 3 * E;
  const int32_t num_active = counts[4 * E];
  const int32_t* row_of = counts + 4 * E + 1;
  const int32_t* src = row_of + N;
  std::vector<int32_t> want_counts(E, 0), want_offsets(E, 0), want_active;
  int64_t valid = 0;
  for (int32_t e : ids)
    if (e >= 0 && e < E) ++want_counts[e], ++valid;
  int32_t acc = 0;
  int64_t bad = 0;
  for (int e = 0; e < E; ++e) {
    bad += counts[e] != want_counts[e];
    bad += offsets[e] != acc;
    want_offsets[e] = acc;
    acc += want_counts[e];
    if (want_counts[e] > 0) want_active.push_back(e);
  }
  bad += num_active != static_cast<int32_t>(want_active.size());
  for (size_t i = 0; i < want_active.size() && static_cast<int32_t>(i) < num_active; ++i) bad += active[i] != want_active[i];
  std::vector<int> used(valid, 0);
  for (int64_t i = 0; i < N; ++i) {
    const int32_t e = ids[i], r = row_of[i];
    if (e < 0 || e >= E) {
      bad += r != -1;
      continue;
    }
    if (r < want_offsets[e] || r >= want_offsets[e] + want_counts[e]) {
      ++bad;
      continue;
    }
    ++used[r];
    bad += src[r] != i / K;
  }
  for (int u : used) bad += u != 1;
  if (slots) {
    const int32_t* rec0 = meta + grouping_slots_at(E, N);
    for (int64_t s = 0; s < kernels::moe_slot_count(E, N); ++s) {
      const int32_t* rec = rec0 + s * kernels::kMoeSlotInts;
      if (s >= num_active) {
        bad += rec[1] != 0;
        continue;
      }
      const int32_t e = active[s];
      bad += rec[0] != e || rec[1] != counts[e] || rec[2] != offsets[e] || rec[3] != 0;
      for (int r = 0; r < counts[e] && r < kernels::kMoeSlotSrc; ++r)
        bad += rec[kernels::kMoeSlotHeader + r] != src[offsets[e] + r];
    }
  }
  return bad;
}

}  // namespace ds::test
