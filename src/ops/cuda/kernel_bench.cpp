// dserve_kernel_bench: every CUDA op of the backend at DeepSeek-V2-Lite / V3 shapes (bf16), one line per case:
// median time of CUDA-graph replays (CUDA events), TFLOP/s, GB/s, fraction of the roofline from counted
// FLOPs/bytes (ops/kernel_cost.h) against ceilings measured in this run (device copy, large cuBLASLt GEMM),
// and a baseline measured in this run: cuBLASLt's own default heuristic for GEMMs, the reference kernels for
// MLA, a per-expert cuBLASLt loop for the MoE layer, and a same-size device copy for memory-bound ops.
// Inputs come from ops/cuda/kernel_cases.h (the consistency tests' generators). A failing case prints a line
// and the run goes on (DS_CHECK failures inside an op abort: scripts/device/kbench.sh runs groups apart).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "kernels/basic.h"
#include "kernels/fp8_wgmma_probe.h"
#include "kernels/indexer.h"
#include "kernels/l2_prefetch.h"
#include "kernels/mla_decode.h"
#include "kernels/mla_prefill.h"
#include "kernels/moe.h"
#include "kernels/pdl.cuh"
#include "kernels/read_probe.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/copy_bandwidth.h"
#include "ops/cuda/cublaslt_gemm.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/kernel_cases.h"
#include "ops/kernel_cost.h"
#include "ops/ops.h"

namespace ds {
namespace {

using kbench::Ceilings;
using kbench::Cost;
using kbench::ModelDims;
using kbench::Row;

// A case failure: the message goes into the row's status and the run continues.
struct CaseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CaseError(std::string(what) + ": " + cudaGetErrorString(e));
}
void ck_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw CaseError(std::string(what) + ": cublas status " + std::to_string(int(s)));
}
#define CK(expr) ck((expr), #expr)
#define CKB(expr) ck_blas((expr), #expr)

cudaStream_t stream() { return cuda_stream(); }

int g_eager_fallbacks = 0;  // graph captures that failed and were timed eagerly instead (noted in the row)

// ---------------- device data ----------------

// Random device tensors: a random block made by the tests' generator (kcases::randn), uploaded once and tiled
// over the target with device copies at shifting offsets (large weights fill at copy speed, never zeros).
class RandomSource {
 public:
  RandomSource() {
    std::mt19937 rng(20261122);
    Tensor h = kcases::randn({kElems}, rng, 1.0f);
    bf16_ = kcases::to_device(h, DType::kBF16);
    f32_ = kcases::to_device(h, DType::kF32);
  }
  Tensor make(Shape shape, DType dtype, uint32_t seed) {
    Tensor t = Tensor::empty(std::move(shape), dtype, Device::kCuda);
    fill(t, seed);
    return t;
  }
  void fill(Tensor& t, uint32_t seed) {
    const Tensor& src = t.dtype() == DType::kF32 ? f32_ : bf16_;
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) throw CaseError("random fill of a non-float tensor");
    const size_t es = dtype_size(t.dtype()), total = t.nbytes(), half = kElems / 2 * es;
    size_t done = 0, k = seed;
    while (done < total) {
      const size_t n = std::min(half, total - done);
      const size_t off = ((k++ * 7919u) % (kElems / 2)) * es;
      CK(cudaMemcpyAsync(static_cast<char*>(t.data()) + done, static_cast<const char*>(src.data()) + off, n,
                         cudaMemcpyDeviceToDevice, stream()));
      done += n;
    }
  }

 private:
  static constexpr int64_t kElems = int64_t{1} << 22;
  Tensor bf16_, f32_;
};

// max |a - b| / max |b| of two bf16 (or f32) device tensors of one dtype and shape over their first rows
// (at most ~16M values, so big outputs compare quickly); 1e30 for a non-finite a.
double max_rel(const Tensor& got_all, const Tensor& want_all) {
  if (got_all.numel() != want_all.numel() || got_all.dtype() != want_all.dtype() || got_all.ndim() == 0)
    throw CaseError("compared tensors differ in shape");
  const int64_t rows = got_all.dim(0), per_row = rows ? got_all.numel() / rows : 0;
  const int64_t keep = std::clamp<int64_t>(per_row ? (int64_t{16} << 20) / per_row : rows, 1, std::max<int64_t>(rows, 1));
  CK(cudaStreamSynchronize(stream()));
  Tensor a = to_f32(cuda_download(got_all.rows(0, keep))), b = to_f32(cuda_download(want_all.rows(0, keep)));
  double md = 0, mb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.f32()[i], y = b.f32()[i];
    if (!std::isfinite(y)) continue;
    md = std::max(md, std::isfinite(x) ? std::fabs(x - y) : 1e30);
    mb = std::max(mb, std::fabs(y));
  }
  return md / std::max(mb, 1e-6);
}

// ---------------- timing ----------------

struct Bench {
  int reps = 15;
  bool quick = false;
  int64_t l2_bytes = 50 << 20;
};

class Events {
 public:
  Events() {
    CK(cudaEventCreate(&a_));
    CK(cudaEventCreate(&b_));
  }
  ~Events() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start() { CK(cudaEventRecord(a_, stream())); }
  double stop_us() {
    CK(cudaEventRecord(b_, stream()));
    CK(cudaEventSynchronize(b_));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a_, b_));
    return 1000.0 * ms;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// Instances of a case's inputs so that one pass over all of them overflows the L2 (as a model step streams
// its weights and caches from DRAM), at most `cap`.
int instances_for(double bytes, const Bench& b, int cap = 16) {
  if (bytes <= 0) return 1;
  return static_cast<int>(std::clamp(std::ceil(2.0 * b.l2_bytes / bytes), 1.0, double(cap)));
}

// Median microseconds per call of fn(i) (enqueues one call on stream() for instance i % instances): an eager
// warm-up call (plans, tables), an eager estimate, then a CUDA graph of calls rotating over the instances
// replayed `reps` times. graph = false (ops that may synchronise) times eager loops instead.
double time_calls(const std::function<void(int)>& fn, int instances, const Bench& b, bool graph = true,
                  int max_reps = 1000) {
  Events ev;
  fn(0);
  CK(cudaStreamSynchronize(stream()));
  CK(cudaGetLastError());
  ev.start();
  fn(instances > 1 ? 1 : 0);
  const double est = std::max(ev.stop_us(), 1.0);
  int per = static_cast<int>(std::clamp(2000.0 / est, 1.0, 64.0));
  if (est < 500 && per < instances) per = std::min(instances, 64);
  const int reps = std::min(est > 20000 ? 3 : est > 3000 ? std::min(b.reps, 5) : b.reps, max_reps);
  std::vector<double> us;
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    // A capture or instantiation that fails (an op that cannot be captured) falls back to eager timing.
    cudaGraph_t g = nullptr;
    try {
      CK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
      try {
        for (int i = 0; i < per; ++i) fn(i % instances);
      } catch (...) {
        cudaStreamEndCapture(stream(), &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      CK(cudaStreamEndCapture(stream(), &g));
      const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
      cudaGraphDestroy(g);
      if (ie != cudaSuccess) exec = nullptr;
      CK(ie);
    } catch (const CaseError& e) {
      std::printf("  (graph capture failed: %s; timing eager launches)\n", e.what());
      ++g_eager_fallbacks;
      cudaGetLastError();
      CK(cudaStreamSynchronize(stream()));
      exec = nullptr;
    }
  }
  if (exec) {
    try {
      for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(exec, stream()));
      for (int r = 0; r < reps; ++r) {
        ev.start();
        CK(cudaGraphLaunch(exec, stream()));
        us.push_back(ev.stop_us() / per);
      }
    } catch (...) {
      cudaGraphExecDestroy(exec);
      throw;
    }
    CK(cudaGraphExecDestroy(exec));
  } else {
    for (int r = 0; r < reps; ++r) {
      ev.start();
      for (int i = 0; i < per; ++i) fn(i % instances);
      us.push_back(ev.stop_us() / per);
    }
  }
  CK(cudaGetLastError());
  return kbench::median(us);
}

// Same-size device copy: `bytes` of traffic (half read, half written), rotating over buffers past the L2.
struct CopyBaseline {
  Tensor src, dst;
  double time_us(double bytes, const Bench& b) {
    const size_t half = std::max<size_t>(static_cast<size_t>(bytes / 2), 16);
    const int inst = instances_for(bytes, b);
    const int64_t need = static_cast<int64_t>(half) * inst;
    if (!src.defined() || src.numel() < need) {
      src = Tensor();
      dst = Tensor();
      src = Tensor::empty({need}, DType::kU8, Device::kCuda);
      dst = Tensor::empty({need}, DType::kU8, Device::kCuda);
      CK(cudaMemsetAsync(src.data(), 0x3c, need, stream()));
    }
    return time_calls(
        [&](int i) {
          CK(cudaMemcpyAsync(dst.data_as<uint8_t>() + half * i, src.data_as<uint8_t>() + half * i, half,
                             cudaMemcpyDeviceToDevice, stream()));
        },
        inst, b);
  }
};

// ---------------- the run ----------------

class Runner {
 public:
  // ops is null with --list (no GPU work at all).
  Runner(const kbench::Options& o, Ops* ops) : opt_(o), ops_(ops) {
    bench_.quick = o.quick;
    bench_.reps = o.reps > 0 ? o.reps : (o.quick ? 5 : 15);
    if (o.list) return;
    rnd_ptr_ = std::make_unique<RandomSource>();
    lt_ptr_ = std::make_unique<CublasLtGemm>();
    copy_ptr_ = std::make_unique<CopyBaseline>();
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    bench_.l2_bytes = prop.l2CacheSize > 0 ? prop.l2CacheSize : (50 << 20);
    std::printf("device %s, %d SMs, L2 %d MB, %zu MB memory\n", prop.name, prop.multiProcessorCount,
                static_cast<int>(bench_.l2_bytes >> 20), static_cast<size_t>(prop.totalGlobalMem >> 20));
    if (!o.csv.empty()) {
      csv_ = std::fopen(o.csv.c_str(), "w");
      if (!csv_) std::fprintf(stderr, "cannot write --csv %s; printing only\n", o.csv.c_str());
      else std::fprintf(csv_, "%s\n", kbench::csv_header().c_str());
    }
  }
  ~Runner() {
    if (csv_) std::fclose(csv_);
  }

  int failures() const { return failures_; }

  // Runs `body` for a case named op/model/shape when the filter selects it; body fills us/baseline/max_rel.
  void run_case(const std::string& op, const std::string& model, const std::string& shape, const Cost& cost,
                const std::function<void(Row&)>& body) {
    Row r;
    r.op = op;
    r.model = model;
    r.shape = shape;
    r.cost = cost;
    if (!kbench::matches_filter(r.name(), opt_.filter)) return;
    if (opt_.list) {
      std::printf("%s\n", r.name().c_str());
      return;
    }
    const int fallbacks = g_eager_fallbacks;
    try {
      body(r);
      if (g_eager_fallbacks != fallbacks) r.status = "ok; a graph capture failed so some timing is of eager launches";
    } catch (const std::exception& e) {
      r.status = e.what();
      if (r.us <= 0) ++failures_;
      // A sticky error (e.g. an illegal address) leaves the context unusable: report and stop.
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream(), &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        cudaGraph_t g = nullptr;
        cudaStreamEndCapture(stream(), &g);
        if (g) cudaGraphDestroy(g);
      }
      cudaGetLastError();
      const cudaError_t sync = cudaDeviceSynchronize();
      if (sync != cudaSuccess) {
        emit(r);
        std::printf("FATAL: CUDA context lost (%s); stopping\n", cudaGetErrorString(sync));
        std::fflush(stdout);
        if (csv_) std::fclose(csv_);
        std::exit(2);
      }
    }
    emit(r);
  }

  void emit(const Row& r) {
    std::printf("%s\n", kbench::text_line(r, ceil_).c_str());
    std::fflush(stdout);
    if (csv_) {
      std::fprintf(csv_, "%s\n", kbench::csv_line(r, ceil_).c_str());
      std::fflush(csv_);
    }
  }

  // ---- ceilings ----
  void measure_ceilings() {
    Events ev;
    {  // device copy of 1 GiB, read + written
      const size_t bytes = size_t{1} << 30;
      ceil_.copy_bytes_per_s = measure_copy_bandwidth(stream(), bytes);
      const double t = 2.0 * bytes / ceil_.copy_bytes_per_s * 1e6;
      copy_row_ = Row{"ceiling", "-", "d2d copy 1 GiB (read+write)", t, Cost{0, 2.0 * bytes}, "", 0, -1, "ok"};
    }
    {  // cuBLASLt bf16 GEMM 8192^3 through ops.linear (the backend's heuristic pick)
      const int64_t n = 8192;
      Tensor x = rnd().make({n, n}, DType::kBF16, 1);
      LinearWeight w;
      w.weight = rnd().make({n, n}, DType::kBF16, 2);
      const double t = time_calls([&](int) { Tensor y = ops().linear(x, w); }, 1, bench_);
      const Cost c = kbench::linear_cost(n, n, n);
      ceil_.gemm_flops_per_s = c.flops / (t * 1e-6);
      gemm_row_ = Row{"ceiling", "-", "cuBLASLt bf16 GEMM 8192^3", t, c, "", 0, -1, "ok"};
    }
    std::printf("ceilings: d2d copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", ceil_.copy_bytes_per_s / 1e9,
                ceil_.gemm_flops_per_s / 1e12);
    emit(copy_row_);
    emit(gemm_row_);
  }

  // ---- GEMMs ----
  void linear_cases(const ModelDims& m) {
    const std::vector<int64_t> Ms = bench_.quick ? std::vector<int64_t>{1, 64, 4096}
                                                 : std::vector<int64_t>{1, 8, 64, 256, 4096};
    for (const kbench::LinearLayer& l : kbench::linear_layers(m))
      for (int64_t M : Ms) {
        char shape[128];
        std::snprintf(shape, sizeof shape, "%s M=%lld K=%lld N=%lld", l.name.c_str(), (long long)M, (long long)l.in,
                      (long long)l.out);
        run_case("linear", m.name, shape, kbench::linear_cost(M, l.in, l.out), [&](Row& r) {
          const int inst = instances_for(2.0 * l.in * l.out + 2.0 * M * (l.in + l.out), bench_, 64);
          std::vector<Tensor> xs;
          std::vector<LinearWeight> ws;
          for (int i = 0; i < inst; ++i) {
            xs.push_back(rnd().make({M, l.in}, DType::kBF16, 10 + i));
            LinearWeight w;
            w.weight = rnd().make({l.out, l.in}, DType::kBF16, 100 + i);
            ws.push_back(w);
          }
          r.us = time_calls([&](int i) { Tensor y = ops().linear(xs[i], ws[i]); }, inst, bench_);
          // Baseline: cuBLASLt called directly with no algorithm (its default heuristic), same layout.
          r.baseline = "cublaslt-default-heuristic";
          Tensor d = Tensor::empty({M, l.out}, DType::kBF16, Device::kCuda);
          RawLt lt(M, l.in, l.out);
          r.baseline_us = time_calls([&](int i) { lt.run(xs[i], ws[i].weight, d); }, inst, bench_);
          lt.run(xs[0], ws[0].weight, d);
          r.max_rel = max_rel(ops().linear(xs[0], ws[0]), d);
        });
      }
  }

  // The floor of a decode weight stream: a pure read (kernels/read_probe.h, 2 CTAs per SM of 256 threads) of each
  // linear layer's weight bytes and of a decode step's routed expert weights (gate|up and down of top-k experts),
  // in the same graph-replay harness, consecutive calls on different buffers. early: loads before the PDL wait
  // (consecutive calls overlap: the bandwidth floor); after-wait: loads after it (each call waits for the one
  // before, as a GEMM waits for its activations: the floor of a dependent kernel). Baseline: for linear layers our
  // linear at M = 1 (the small-M kernel), for the experts a device copy of the same bytes.
  void weight_read_cases(const ModelDims& m) {
    struct Item {
      std::string name;
      int64_t in, out;  // linear layer dims (0, 0 for the expert rows)
      double bytes;
    };
    std::vector<Item> items;
    for (const kbench::LinearLayer& l : kbench::linear_layers(m)) items.push_back({l.name, l.in, l.out, 2.0 * l.in * l.out});
    const double expert_mat = 2.0 * m.moe_intermediate * m.hidden;  // one [inter, hidden] bf16 matrix
    items.push_back({"routed_gate_up top" + std::to_string(m.top_k), 0, 0, 2 * expert_mat * m.top_k});
    items.push_back({"routed_down top" + std::to_string(m.top_k), 0, 0, expert_mat * m.top_k});
    for (const Item& it : items)
      for (bool wait_first : {false, true}) {
        char shape[160];
        std::snprintf(shape, sizeof shape, "%s bytes=%.1fMB %s", it.name.c_str(), it.bytes / 1e6,
                      wait_first ? "after-wait" : "early");
        run_case("weight_read", m.name, shape, Cost{0, it.bytes}, [&](Row& r) {
          const int64_t bytes = static_cast<int64_t>(it.bytes) / 16 * 16;
          const int inst = std::max(2, instances_for(it.bytes, bench_, 64));  // never the same buffer twice in a row
          std::vector<Tensor> bufs;
          for (int i = 0; i < inst; ++i) bufs.push_back(rnd().make({bytes / 2}, DType::kBF16, 300 + i));
          Tensor sink = Tensor::empty({1}, DType::kI32, Device::kCuda);
          r.us = time_calls(
              [&](int i) {
                CK(kernels::launch_read_probe(bufs[i].data(), bytes, sink.data_as<uint32_t>(), 0x9e3779b9u, 2,
                                              wait_first, stream()));
              },
              inst, bench_);
          if (it.in > 0) {
            r.baseline = "our-linear-M=1";
            std::vector<Tensor> xs;
            std::vector<LinearWeight> ws;
            for (int i = 0; i < inst; ++i) {
              xs.push_back(rnd().make({1, it.in}, DType::kBF16, 10 + i));
              LinearWeight w;
              w.weight = bufs[i].reshape({it.out, it.in});
              ws.push_back(w);
            }
            r.baseline_us = time_calls([&](int i) { Tensor y = ops().linear(xs[i], ws[i]); }, inst, bench_);
          } else {
            r.baseline = "d2d-copy-same-bytes";
            r.baseline_us = copy_ptr_->time_us(it.bytes, bench_);
          }
        });
      }
  }

  // An FP8 decode weight stream on Hopper's native FP8 tensor-core path (launch_fp8_wgmma_probe: TMA boxes, wgmma
  // m64n8k32 e4m3, 8 token columns; the FP8 kernels' mma.sync e4m3 is emulated on Hopper, session 38): a step's routed
  // gate|up weights (top-k experts x 2 x moe_intermediate rows x hidden), loads after the PDL wait, 2 / 4 / 8 stages
  // of 8 KB in flight per CTA. max_rel: 64 rows x 8 tokens against a host product of the same bytes (double
  // accumulation), relative to the outputs' range: ~2e-4 is FP8 wgmma's reduced in-block accumulation (s38g), a
  // wrong layout shows as O(1). Baseline: the read probe of the same bytes after its wait (the floor a dependent
  // stream of them reaches).
  void fp8_wgmma_cases(const kbench::ModelDims& m) {
    const int64_t N = static_cast<int64_t>(m.top_k) * 2 * m.moe_intermediate, K = m.hidden;
    const double bytes = static_cast<double>(N) * K;
    for (int stages : {2, 4, 8}) {
      char shape[128];
      std::snprintf(shape, sizeof shape, "routed_gate_up top%d rows=%lld K=%lld stages=%d", m.top_k,
                    static_cast<long long>(N), static_cast<long long>(K), stages);
      run_case("fp8_wgmma", m.name, shape, Cost{2.0 * 8 * N * K, bytes}, [&](Row& r) {
        const int64_t nb = K / 128;
        const LinearWeight hw = random_e4m3_weight(N, K, 77, 1.0f);
        Tensor sw = Tensor::empty({N / 128, nb}, DType::kF32), sx = Tensor::empty({8, nb}, DType::kF32);
        for (int64_t i = 0; i < sw.numel(); ++i) sw.f32()[i] = 0.5f + 0.25f * static_cast<float>(i % 5);
        for (int64_t i = 0; i < sx.numel(); ++i) sx.f32()[i] = 0.01f * static_cast<float>(1 + i % 7);
        const LinearWeight hx = random_e4m3_weight(8, K, 78, 1.0f);
        const int inst = std::max(2, instances_for(bytes, bench_, 64));
        std::vector<Tensor> ws;
        for (int i = 0; i < inst; ++i) ws.push_back(ops().upload(hw.weight));
        Tensor x = ops().upload(hx.weight);
        Tensor swd = ops().upload(sw), sxd = ops().upload(sx);
        Tensor y = Tensor::empty({8, N}, DType::kF32, Device::kCuda);
        kernels::Fp8WgmmaProbeParams p;
        p.x = static_cast<const uint8_t*>(x.data());
        p.sw = swd.data_as<float>();
        p.sx = sxd.data_as<float>();
        p.y = y.data_as<float>();
        p.N = N;
        p.K = K;
        p.stages = stages;
        auto call = [&](int i) {
          p.w = static_cast<const uint8_t*>(ws[i].data());
          CK(kernels::launch_fp8_wgmma_probe(p, /*wait_first=*/true, stream()));
        };
        call(0);
        CK(cudaStreamSynchronize(stream()));
        Tensor got = ops().to_host(y);
        const uint8_t* wb = static_cast<const uint8_t*>(hw.weight.data());
        const uint8_t* xb = static_cast<const uint8_t*>(hx.weight.data());
        double worst = 0, scale = 0;
        std::vector<double> want;
        std::vector<float> have;
        for (int j = 0; j < 64; ++j) {
          const int64_t n = (j * 7919) % N;
          for (int t = 0; t < 8; ++t) {
            double v = 0;
            for (int64_t b = 0; b < nb; ++b) {
              double part = 0;
              for (int64_t k = b * 128; k < b * 128 + 128; ++k)
                part += static_cast<double>(fp8e4m3_to_f32(wb[n * K + k])) * fp8e4m3_to_f32(xb[t * K + k]);
              v += part * sw.f32()[(n / 128) * nb + b] * sx.f32()[t * nb + b];
            }
            want.push_back(v);
            have.push_back(got.f32()[t * N + n]);
            scale = std::max(scale, std::abs(v));
          }
        }
        for (size_t i = 0; i < want.size(); ++i)
          worst = std::max(worst, std::abs(static_cast<double>(have[i]) - want[i]) / std::max(scale, 1e-30));
        r.max_rel = worst;
        r.us = time_calls(call, inst, bench_);
        r.baseline = "read-probe-after-wait";
        Tensor sink = Tensor::empty({1}, DType::kI32, Device::kCuda);
        r.baseline_us = time_calls(
            [&](int i) {
              CK(kernels::launch_read_probe(ws[i].data(), static_cast<int64_t>(bytes) / 16 * 16,
                                            sink.data_as<uint32_t>(), 0x9e3779b9u, 2, true, stream()));
            },
            inst, bench_);
      });
    }
  }

  // A grid barrier against a launch handoff (the question a one-launch decode layer has to answer first): phases of
  // `bytes` each in one persistent launch of two CTAs an SM, separated by grid barriers (launch_barrier_probe; per
  // phase = the launch's time / phases), with the next phase's first loads issued before the barrier or after it;
  // baseline: the same bytes per launch in chained launches that load after their PDL wait (read_probe after-wait,
  // i.e. today's kernel-to-kernel handoff). 0 bytes: the barrier alone against an empty dependent launch.
  void grid_barrier_cases() {
    constexpr int kPhases = 100;
    for (double mb : {0.0, 1.0, 4.0, 15.0, 35.0})
      for (bool ahead : {false, true}) {
        char shape[96];
        std::snprintf(shape, sizeof shape, "phase=%.0fMB %s", mb, ahead ? "loads-ahead" : "loads-after");
        const int64_t bytes = static_cast<int64_t>(mb * 1e6) / 16 * 16;
        const double counted = std::max<double>(static_cast<double>(bytes), 16.0);
        run_case("grid_barrier", "any", shape, Cost{0, counted}, [&](Row& r) {
          const int slices = std::max(2, instances_for(counted, bench_, 64));
          const int64_t buf = std::max<int64_t>(bytes, 16) * slices;
          Tensor data = rnd().make({buf / 2}, DType::kBF16, 400);
          Tensor sync = Tensor::empty({2}, DType::kI32, Device::kCuda);
          Tensor sink = Tensor::empty({1}, DType::kI32, Device::kCuda);
          CK(cudaMemsetAsync(sync.data(), 0, sync.nbytes(), stream()));
          uint32_t* sy = sync.data_as<uint32_t>();
          r.us = time_calls(
                     [&](int) {
                       CK(kernels::launch_barrier_probe(data.data(), bytes, slices, kPhases, sy,
                                                        sink.data_as<uint32_t>(), 0x9e3779b9u, 2, ahead, stream()));
                     },
                     1, bench_) /
                 kPhases;
          r.baseline = "chained-after-wait-launches";
          const int64_t per = std::max<int64_t>(bytes, 16);
          r.baseline_us = time_calls(
              [&](int i) {
                CK(kernels::launch_read_probe(static_cast<const char*>(data.data()) + (i % slices) * per, per,
                                              sink.data_as<uint32_t>(), 0x9e3779b9u, 2, true, stream()));
              },
              slices, bench_);
        });
      }
  }

  // Does an L2 prefetch keep a weight range until a later read (session 43: the shared MLP's prefetch during the
  // attention did not shorten the shared MLP in the model)? Per repetition: a 256 MB read evicts everything, then
  // W is prefetched (kernels::launch_l2_prefetch, normal or evict-last lines; or read once: the L2-hit floor) or
  // not, optionally `other` MB of unrelated reads follow (the attention's weight streams), then after a host pause
  // W is read once (the read probe after its wait). ours = that read after the prefetch, baseline = the same read
  // cold. Buffers are made inside each case, so a filtered-out case allocates nothing.
  void l2_prefetch_cases() {
    for (double mb : {11.5, 17.3, 23.0})
      for (int mode : {1, 2, 3})
        for (double other_mb : {0.0, 14.0, 28.0}) {
          char shape[96];
          std::snprintf(shape, sizeof shape, "W=%.1fMB prefetch=%s other=%.0fMB", mb,
                        mode == 3 ? "read" : mode == 2 ? "evict-last" : "normal", other_mb);
          const int64_t bytes = static_cast<int64_t>(mb * 1e6) / 16 * 16;
          const int64_t other = static_cast<int64_t>(other_mb * 1e6) / 16 * 16;
          run_case("l2_prefetch", "any", shape, Cost{0, static_cast<double>(bytes)}, [&](Row& r) {
            const int64_t flush_bytes = int64_t{256} << 20;
            Tensor w = rnd().make({bytes / 2}, DType::kBF16, 500);
            Tensor flush = rnd().make({flush_bytes / 2}, DType::kBF16, 501);
            Tensor o = rnd().make({std::max<int64_t>(other, 16) / 2}, DType::kBF16, 502);
            Tensor sink = Tensor::empty({1}, DType::kI32, Device::kCuda);
            uint32_t* sk = sink.data_as<uint32_t>();
            auto read = [&](const Tensor& t, int64_t n) {
              CK(kernels::launch_read_probe(t.data(), n, sk, 0x9e3779b9u, 2, true, stream()));
            };
            Events ev;
            auto once = [&](bool prefetch) {
              read(flush, flush_bytes);
              if (prefetch && mode == 3) {
                read(w, bytes);  // warmed by plain loads: the L2-hit floor
              } else if (prefetch) {
                kernels::L2PrefetchParams p;
                p.ptr[0] = w.data();
                p.bytes[0] = bytes;
                p.ranges = 1;
                p.evict_last = mode == 2;
                CK(kernels::launch_l2_prefetch(p, stream()));
              }
              if (other > 0) read(o, other);
              CK(cudaStreamSynchronize(stream()));
              std::this_thread::sleep_for(std::chrono::microseconds(200));  // the prefetch's requests land
              ev.start();
              read(w, bytes);
              return ev.stop_us();
            };
            std::vector<double> warm, cold;
            for (int i = 0; i < 2 * bench_.reps; ++i) {
              warm.push_back(once(true));
              cold.push_back(once(false));
            }
            r.us = kbench::median(warm);
            r.baseline = "same-read-cold";
            r.baseline_us = kbench::median(cold);
          });
        }
  }

  // The absorbed-MLA per-head products at decode sizes (ops.bmm_heads): W_UK (nope -> lora) and W_UV (lora -> v),
  // [T, H, K] x [H, K, N]. Baseline: a device copy of the same bytes (weight-bandwidth bound).
  void bmm_cases(const ModelDims& m) {
    const int64_t H = m.heads;
    for (const auto& [name, K, N] : {std::tuple<std::string, int64_t, int64_t>{"w_kc", m.qk_nope, m.kv_lora_rank},
                                     std::tuple<std::string, int64_t, int64_t>{"w_vc", m.kv_lora_rank, m.v_head}})
      for (int64_t T : std::vector<int64_t>{1, 8, 64}) {
        const std::string shape = name + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " K=" +
                                  std::to_string(K) + " N=" + std::to_string(N);
        const Cost cost{2.0 * T * H * K * N, 2.0 * (H * K * N + T * H * K + T * H * N)};
        membound_case("bmm_heads", m.name, shape, cost, [&, K = K, N = N](int inst) {
          auto st = std::make_shared<std::vector<Tensor>>();
          for (int i = 0; i < inst; ++i) {
            st->push_back(rnd().make({T, H, K}, DType::kBF16, 10 + i));
            st->push_back(rnd().make({H, K, N}, DType::kBF16, 100 + i));
          }
          return std::function<void(int)>([this, st](int i) { Tensor y = ops().bmm_heads((*st)[2 * i], (*st)[2 * i + 1]); });
        });
        // The W8A8 form (ops.bmm_heads_fp8: activation quantization + the batched small-M kernel) on e4m3
        // weights [H, N, K] with 128x128 block scales: the same product, half the weight bytes.
        const Cost cost8{2.0 * T * H * K * N, 1.0 * H * K * N + 2.0 * (T * H * K + T * H * N)};
        membound_case("bmm_heads_fp8", m.name, shape, cost8, [&, K = K, N = N](int inst) {
          struct St {
            std::vector<Tensor> x;
            std::vector<HeadsFp8> w;
          };
          auto st = std::make_shared<St>();
          for (int i = 0; i < inst; ++i) {
            st->x.push_back(rnd().make({T, H, K}, DType::kBF16, 10 + i));
            const LinearWeight lw = random_e4m3_weight(H * N, K, 100 + i, 1.0f / 64);
            HeadsFp8 h;
            h.w = cuda_upload(lw.weight).reshape({H, N, K});
            h.scale = cuda_upload(lw.scale_inv).reshape({H, N / 128, K / 128});
            st->w.push_back(h);
          }
          return std::function<void(int)>([this, st](int i) { Tensor y = ops().bmm_heads_fp8(st->x[i], st->w[i]); });
        });
      }
  }

  // A bf16 GEMM straight through cuBLASLt without our wrapper's alignment hints or algorithm cache:
  // cublasLtMatmul with algo = null (the library's default heuristic), D[M, N] = X[M, K] W[N, K]^T.
  struct RawLt {
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    Tensor ws;
    RawLt(int64_t M, int64_t K, int64_t N) {
      CKB(cublasLtCreate(&h));
      CKB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      CKB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, K, N, K));
      CKB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, K, M, K));
      CKB(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, N, M, N));
      ws = Tensor::empty({32 << 20}, DType::kU8, Device::kCuda);
    }
    ~RawLt() {
      if (d) cublasLtMatrixLayoutDestroy(d);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (op) cublasLtMatmulDescDestroy(op);
      if (h) cublasLtDestroy(h);
    }
    void run(const Tensor& x, const Tensor& w, Tensor& out) {
      const float alpha = 1.0f, beta = 0.0f;
      CKB(cublasLtMatmul(h, op, &alpha, w.data(), a, x.data(), b, &beta, out.data(), d, out.data(), d, nullptr,
                         ws.data(), ws.nbytes(), stream()));
    }
  };

  // ---- MLA ----
  void mla_decode_cases(const ModelDims& m) {
    struct Shape {
      int batch, context;
    };
    const std::vector<Shape> shapes = bench_.quick ? std::vector<Shape>{{1, 32768}, {64, 4096}}
                                                   : std::vector<Shape>{{1, 32768}, {64, 4096}, {256, 1024}};
    const int D = kernels::kMlaHeadDim, V = kernels::kMlaValueDim, H = static_cast<int>(m.heads);
    for (const Shape& s : shapes) {
      char shape[128];
      std::snprintf(shape, sizeof shape, "batch=%d context=%d heads=%d", s.batch, s.context, H);
      run_case("mla_decode", m.name, shape, kbench::mla_decode_cost(s.batch, s.context, H), [&](Row& r) {
        std::mt19937 rng(s.batch * 131 + H);
        kcases::Batch bt = kcases::make_batch(std::vector<int>(s.batch, s.context), std::vector<int>(s.batch, 1), 64, rng);
        const double cache_bytes = double(bt.slots) * D * 2;
        const int inst = instances_for(cache_bytes, bench_, 8);
        std::vector<Tensor> caches, qs;
        for (int i = 0; i < inst; ++i) {
          caches.push_back(rnd().make({bt.slots, D}, DType::kBF16, 1000 + i));
          qs.push_back(rnd().make({s.batch, H, D}, DType::kBF16, 2000 + i));
        }
        const float scale = 0.1352338f;
        r.us = time_calls(
            [&](int i) { Tensor o = cuda_mla_attention_absorbed(qs[i], caches[i], V, bt.dev, scale, nullptr, stream()); },
            inst, bench_);
        r.baseline = "reference-kernel";
        Tensor out = Tensor::empty({s.batch, H, V}, DType::kBF16, Device::kCuda);
        kernels::MlaDecodeParams p;
        p.out = out.data();
        p.q_starts = bt.dev.q_starts.data_as<int32_t>();
        p.seq_lens = bt.dev.seq_lens.data_as<int32_t>();
        p.positions = bt.dev.positions.data_as<int32_t>();
        p.block_table = bt.dev.block_table.data_as<int32_t>();
        p.num_seqs = s.batch;
        p.num_tokens = s.batch;
        p.num_heads = H;
        p.num_slots = bt.slots;
        p.max_pages = static_cast<int>(bt.dev.block_table.dim(1));
        p.page_size = 64;
        p.max_q_len = 1;
        p.scale = scale;
        auto ref = [&](int i) {
          kernels::MlaDecodeParams pi = p;
          pi.q = qs[i].data();
          pi.cache = caches[i].data();
          CK(kernels::launch_mla_decode_reference(pi, stream()));
        };
        r.baseline_us = time_calls(ref, inst, bench_, true, 3);
        ref(0);
        r.max_rel = max_rel(cuda_mla_attention_absorbed(qs[0], caches[0], V, bt.dev, scale, nullptr, stream()), out);
      });
    }
  }

  // V3.2's lightning indexer (64 heads of 128, top-2048, page 64). Decode rows: ours = the tensor-core scores + the
  // radix select, baseline = the CUDA-core scores + the same select (DSERVE_INDEXER_MMA=0's path). Prefill rows
  // (q_len query rows a sequence): ours = the multi-token tensor-core scores + the select, baseline = the one-token
  // tensor-core scores + the select (DSERVE_INDEXER_MT=0's path). max_rel = the share of chosen positions the two
  // disagree on (near-ties).
  void indexer_cases() {
    struct Shape {
      int batch, context, q_len;
    };
    const std::vector<Shape> shapes =
        bench_.quick ? std::vector<Shape>{{1, 32768, 1}, {64, 4096, 1}, {1, 8192, 8192}}
                     : std::vector<Shape>{{1, 4096, 1},    {1, 32768, 1},    {8, 32768, 1},
                                          {64, 4096, 1},   {1, 8192, 8192}, {1, 32768, 2048}};
    const int H = 64, D = 128, topk = 2048;
    for (const Shape& s : shapes) {
      char shape[128];
      const bool prefill = s.q_len > 1;
      const int rows = s.batch * s.q_len;
      std::snprintf(shape, sizeof shape, "batch=%d context=%d%s heads=%d dim=%d topk=%d", s.batch, s.context,
                    prefill ? (" q_len=" + std::to_string(s.q_len)).c_str() : "", H, D, topk);
      run_case(prefill ? "indexer_prefill" : "indexer_topk", "v3.2", shape,
               kbench::indexer_cost(s.batch, s.context, H, D, topk, s.q_len), [&](Row& r) {
        std::mt19937 rng(s.batch * 977 + s.context + s.q_len);
        kcases::Batch bt =
            kcases::make_batch(std::vector<int>(s.batch, s.context), std::vector<int>(s.batch, s.q_len), 64, rng);
        const int inst = prefill ? 1 : instances_for(double(bt.slots) * D * 2, bench_, 8);
        std::vector<Tensor> keys, qs;
        for (int i = 0; i < inst; ++i) {
          keys.push_back(rnd().make({bt.slots, D}, DType::kBF16, 4000 + i));
          qs.push_back(rnd().make({rows, H, D}, DType::kBF16, 5000 + i));
        }
        Tensor w = rnd().make({rows, H}, DType::kF32, 6000);
        const int64_t cols = bt.dev.block_table.dim(1) * 64;
        Tensor scratch = Tensor::empty({rows, cols}, DType::kF32, Device::kCuda);
        Tensor mine = Tensor::empty({rows, topk}, DType::kI32, Device::kCuda);
        Tensor theirs = Tensor::empty({rows, topk}, DType::kI32, Device::kCuda);
        kernels::IndexerParams p{};
        p.w = w.data();
        p.w_f32 = true;
        p.positions = bt.dev.positions.data_as<int32_t>();
        p.q_starts = bt.dev.q_starts.data_as<int32_t>();
        p.block_table = bt.dev.block_table.data_as<int32_t>();
        p.scores = scratch.data_as<float>();
        p.token_count = rows;
        p.heads = H;
        p.dim = D;
        p.max_pages = bt.dev.block_table.dim(1);
        p.num_seqs = s.batch;
        p.page_size = 64;
        p.max_q_len = s.q_len;
        p.score_cols = static_cast<int>(cols);
        p.topk = topk;
        p.num_sms = kernels::device_sm_count();
        p.q_scale = 1.0f / std::sqrt(float(D));
        p.w_scale = 0.125f;
        auto params = [&](int i) {  // instance i's inputs
          kernels::IndexerParams pi = p;
          pi.q = qs[i].data();
          pi.k_cache = keys[i].data();
          pi.tma = true;  // the wgmma scores' key tiles from a TMA producer warp, as the op's default
          pi.k_slots = keys[i].dim(0);
          return pi;
        };
        // ours: tensor cores, several rows a block where there are (on wgmma where it applies, as the op's default);
        // theirs: see above.
        auto call = [&](int i, bool ours, Tensor& out) {
          kernels::IndexerParams pi = params(i);
          pi.out = out.data_as<int32_t>();
          pi.multi_token = pi.wgmma = ours;
          CK(kernels::launch_indexer_topk(pi, ours || prefill, stream()));
        };
        r.us = time_calls([&](int i) { call(i, true, mine); }, inst, bench_);
        r.baseline = prefill ? "one-token-mma-scores" : "cuda-core-scores";
        r.baseline_us = time_calls([&](int i) { call(i, false, theirs); }, inst, bench_, true, prefill ? 3 : 20);
        call(0, true, mine);
        call(0, false, theirs);
        const Tensor a = cuda_download(mine), b = cuda_download(theirs);
        int64_t differ = 0;
        for (int64_t t = 0; t < rows; ++t) {
          const int32_t* x = a.data_as<int32_t>() + t * topk;
          const int32_t* y = b.data_as<int32_t>() + t * topk;
          std::vector<int32_t> inter;
          std::set_intersection(x, x + topk, y, y + topk, std::back_inserter(inter));
          differ += topk - static_cast<int64_t>(inter.size());
        }
        r.max_rel = double(differ) / (double(rows) * topk);
        // The scores alone (the select's share is the difference), printed beside the row.
        auto scores = [&](int i, bool ours) {
          kernels::IndexerParams pi = params(i);
          pi.multi_token = pi.wgmma = ours;
          CK(kernels::launch_indexer_scores(pi, ours || prefill, stream()));
        };
        const double s_mine = time_calls([&](int i) { scores(i, true); }, inst, bench_);
        const double s_theirs = time_calls([&](int i) { scores(i, false); }, inst, bench_, true, prefill ? 3 : 20);
        const double flops = kbench::indexer_cost(s.batch, s.context, H, D, topk, s.q_len).flops;
        std::printf("  indexer scores alone: ours %.2f us (%.0f GB/s of keys, %.1f TFLOP/s), %s %.2f us (%.1f TFLOP/s)\n",
                    s_mine, double(s.batch) * s.context * D * 2 / (s_mine * 1e3), flops / (s_mine * 1e6),
                    prefill ? "one-token mma" : "cuda cores", s_theirs, flops / (s_theirs * 1e6));
        if (prefill) {  // the multi-token scores on mma.sync (DSERVE_INDEXER_WGMMA=0)
          const double s_mt = time_calls([&](int i) {
            kernels::IndexerParams pi = params(i);
            pi.multi_token = true;
            pi.wgmma = false;
            CK(kernels::launch_indexer_scores(pi, true, stream()));
          }, inst, bench_);
          std::printf("  indexer scores alone, multi-token mma.sync: %.2f us (%.1f TFLOP/s)\n", s_mt,
                      flops / (s_mt * 1e6));
          const double s_cp = time_calls([&](int i) {  // wgmma, every thread's cp.async (DSERVE_INDEXER_TMA=0)
            kernels::IndexerParams pi = params(i);
            pi.multi_token = pi.wgmma = true;
            pi.tma = false;
            CK(kernels::launch_indexer_scores(pi, true, stream()));
          }, inst, bench_);
          std::printf("  indexer scores alone, wgmma with cp.async tiles: %.2f us (%.1f TFLOP/s)\n", s_cp,
                      flops / (s_cp * 1e6));
        }
      });
    }
  }

  void mla_prefill_cases(const ModelDims& m) {
    const int H = static_cast<int>(m.heads);
    const int nope = static_cast<int>(m.qk_nope), rope = static_cast<int>(m.qk_rope), v = static_cast<int>(m.v_head);
    const int64_t ctx_dim = m.kv_lora_rank + m.qk_rope;
    for (int T : {512, 4096}) {
      if (bench_.quick && T == 4096 && H > 16) continue;
      char shape[128];
      std::snprintf(shape, sizeof shape, "tokens=%d heads=%d", T, H);
      run_case("mla_prefill", m.name, shape, kbench::mla_prefill_cost(T, H, nope, rope, v), [&](Row& r) {
        std::mt19937 rng(T + H);
        kcases::Batch bt = kcases::make_batch({T}, {T}, 64, rng);
        Tensor q = rnd().make({T, H, nope + rope}, DType::kBF16, 3000);
        Tensor kv = rnd().make({T, H, nope + v}, DType::kBF16, 3001);
        Tensor ctx = rnd().make({T, ctx_dim}, DType::kBF16, 3002);
        const float scale = 0.1147214f;
        const int64_t rope_off = m.kv_lora_rank;
        // Eager loops: the prefill op is not promised to be graph-capturable.
        r.us = time_calls([&](int) { Tensor o = cuda_mla_attention_mha(q, kv, ctx, rope_off, bt.dev, scale, nullptr, stream()); },
                          1, bench_, false);
        r.baseline = "reference-kernel";
        Tensor out = Tensor::empty({T, H, v}, DType::kBF16, Device::kCuda);
        kernels::MlaPrefillParams p;
        p.q = q.data();
        p.kv = kv.data();
        p.ctx = ctx.data();
        p.out = out.data();
        p.q_starts = bt.dev.q_starts.data_as<int32_t>();
        p.seq_lens = bt.dev.seq_lens.data_as<int32_t>();
        p.positions = bt.dev.positions.data_as<int32_t>();
        p.num_seqs = 1;
        p.num_tokens = T;
        p.num_heads = H;
        p.max_q_len = T;
        p.nope = nope;
        p.rope = rope;
        p.v = v;
        p.ctx_dim = ctx_dim;
        p.rope_offset = rope_off;
        p.ctx_rows = T;
        p.scale = scale;
        auto ref = [&](int) { CK(kernels::launch_mla_prefill_reference(p, stream())); };
        r.baseline_us = time_calls(ref, 1, bench_, false, 3);
        ref(0);
        r.max_rel = max_rel(cuda_mla_attention_mha(q, kv, ctx, rope_off, bt.dev, scale, nullptr, stream()), out);
        // The two tensor-core kernels alone (ours = the op's default, wgmma), printed beside the row.
        const double flops = kbench::mla_prefill_cost(T, H, nope, rope, v).flops;
        for (const int keys : {64, 128}) {
          const double us =
              time_calls([&](int) { CK(kernels::launch_mla_prefill_wgmma(p, stream(), keys)); }, 1, bench_, false);
          std::printf("  mla prefill kernel wgmma, %d-key tiles: %.1f us (%.1f TFLOP/s)\n", keys, us, flops / (us * 1e6));
          const double us_tma =
              time_calls([&](int) { CK(kernels::launch_mla_prefill_wgmma(p, stream(), keys, true)); }, 1, bench_, false);
          std::printf("  mla prefill kernel wgmma, %d-key tiles, TMA producer: %.1f us (%.1f TFLOP/s)\n", keys, us_tma,
                      flops / (us_tma * 1e6));
        }
        const double us_mma = time_calls([&](int) { CK(kernels::launch_mla_prefill(p, stream())); }, 1, bench_, false);
        std::printf("  mla prefill kernel mma.sync: %.1f us (%.1f TFLOP/s)\n", us_mma, flops / (us_mma * 1e6));
      });
    }
  }

  // ---- MoE layer (routed experts) ----
  void moe_cases(const ModelDims& m) {
    const int E = m.n_routed, K = m.top_k;
    const int64_t d = m.hidden, I = m.moe_intermediate;
    const std::vector<int64_t> tokens = bench_.quick ? std::vector<int64_t>{1, 64} : std::vector<int64_t>{1, 8, 64, 256};
    std::vector<PreparedMlp> experts;  // built on the first selected case; the op caches its table by address
    Tensor weights;
    for (int64_t T : tokens) {
      char shape[128];
      std::snprintf(shape, sizeof shape, "tokens=%lld experts=%d top%d d=%lld inter=%lld", (long long)T, E, K,
                    (long long)d, (long long)I);
      const double active = kbench::expected_active_experts(T, E, K);
      run_case("moe_layer", m.name, shape, kbench::moe_cost(T, K, active, d, I), [&](Row& r) {
        if (experts.empty()) {
          const int64_t per = 3 * I * d;
          size_t free_b = 0, total_b = 0;  // (freed tensors stay in the allocator's pool: judge by the total)
          CK(cudaMemGetInfo(&free_b, &total_b));
          if (double(E) * per * 2 > 0.6 * total_b) throw CaseError("expert weights do not fit in device memory");
          weights = rnd().make({E * per}, DType::kBF16, 4000);
          for (int e = 0; e < E; ++e) {
            PreparedMlp mlp;  // views sharing the one allocation
            mlp.gate_up.weight = weights.rows(e * per, e * per + 2 * I * d).reshape({2 * I, d});
            mlp.down.weight = weights.rows(e * per + 2 * I * d, (e + 1) * per).reshape({d, I});
            experts.push_back(mlp);
          }
        }
        // Instances: different tokens and routings (uniform top-k), so repeated calls do not reuse one set of
        // experts from the L2.
        const int inst = 4;
        std::mt19937 rng(T * 7 + E);
        struct In {
          Tensor x, ids, w;
          std::vector<int32_t> host_ids;
          // per-expert loop baseline: permuted order on the host
          std::vector<int32_t> counts;
          Tensor src_dev, row_of_dev;
        };
        std::vector<In> in(inst);
        double active_sum = 0;
        for (int i = 0; i < inst; ++i) {
          In& a = in[i];
          a.x = rnd().make({T, d}, DType::kBF16, 5000 + i);
          a.host_ids = kcases::route_uniform(T, E, K, rng);
          a.ids = cuda_upload(kcases::i32_tensor(a.host_ids, {T, K}));
          a.w = cuda_upload(kcases::randn({T, K}, rng, 0.2f, 0.5f));
          a.counts.assign(E, 0);
          for (int32_t e : a.host_ids) ++a.counts[e];
          std::vector<int32_t> offs(E + 1, 0), cur(E), src(T * K), row_of(T * K);
          for (int e = 0; e < E; ++e) offs[e + 1] = offs[e] + a.counts[e];
          std::copy(offs.begin(), offs.end() - 1, cur.begin());
          for (int64_t j = 0; j < T * K; ++j) {
            const int row = cur[a.host_ids[j]]++;
            row_of[j] = row;
            src[row] = static_cast<int32_t>(j / K);
          }
          a.src_dev = cuda_upload(kcases::i32_tensor(src));
          a.row_of_dev = cuda_upload(kcases::i32_tensor(row_of));
          active_sum += std::count_if(a.counts.begin(), a.counts.end(), [](int32_t c) { return c > 0; });
        }
        r.cost = kbench::moe_cost(T, K, active_sum / inst, d, I);  // the experts these routings touch
        r.us = time_calls([&](int i) { Tensor y = ops().moe_experts(in[i].x, in[i].ids, in[i].w, experts); }, inst, bench_);
        // Baseline: the plain implementation, one cuBLASLt GEMM pair per active expert over rows permuted by
        // the host-known routing, SiLU-mul, weighted combine (what moe_experts did before the grouped kernel).
        r.baseline = "per-expert-cublaslt-loop";
        const int64_t N = T * K;
        Tensor xp = Tensor::empty({N, d}, DType::kBF16, Device::kCuda);
        Tensor gu = Tensor::empty({N, 2 * I}, DType::kBF16, Device::kCuda);
        Tensor act = Tensor::empty({N, I}, DType::kBF16, Device::kCuda);
        Tensor y = Tensor::empty({N, d}, DType::kBF16, Device::kCuda);
        Tensor out = Tensor::empty({T, d}, DType::kBF16, Device::kCuda);
        auto ref = [&](int i) {
          const In& a = in[i];
          CK(kernels::launch_gather_rows(a.x.data(), a.src_dev.data_as<int32_t>(), xp.data(), N, d, stream()));
          int64_t off = 0;
          for (int e = 0; e < E; ++e) {
            const int64_t c = a.counts[e];
            if (!c) continue;
            gemm(xp.data_as<uint16_t>() + off * d, experts[e].gate_up.weight.data(), gu.data_as<uint16_t>() + off * 2 * I,
                 c, d, 2 * I);
            off += c;
          }
          CK(kernels::launch_silu_mul(gu.data(), act.data(), N, I, stream()));
          off = 0;
          for (int e = 0; e < E; ++e) {
            const int64_t c = a.counts[e];
            if (!c) continue;
            gemm(act.data_as<uint16_t>() + off * I, experts[e].down.weight.data(), y.data_as<uint16_t>() + off * d, c, I, d);
            off += c;
          }
          CK(kernels::launch_moe_combine(
              {y.data(), a.row_of_dev.data_as<int32_t>(), a.w.data_as<float>(), out.data(), T, d, K}, stream()));
        };
        r.baseline_us = time_calls(ref, inst, bench_);
        ref(0);
        r.max_rel = max_rel(ops().moe_experts(in[0].x, in[0].ids, in[0].w, experts), out);
      });
    }
  }

  void gemm(const void* x, const void* w, void* out, int64_t M, int64_t K, int64_t N) {
    GemmArgs g;
    g.x = x;
    g.ldx = K;
    g.w = w;
    g.ldw = K;
    g.w_nk = true;
    g.d = out;
    g.ldd = N;
    g.M = M;
    g.N = N;
    g.K = K;
    lt_ptr_->run(g, stream());
  }

  // ---- memory-bound ops: baseline = a device copy moving the same bytes ----
  std::vector<int64_t> small_tokens() const {
    return bench_.quick ? std::vector<int64_t>{1, 64, 4096} : std::vector<int64_t>{1, 8, 64, 512, 4096};
  }

  void membound_case(const std::string& op, const std::string& model, const std::string& shape, const Cost& cost,
                     const std::function<std::function<void(int)>(int inst)>& setup) {
    run_case(op, model, shape, cost, [&](Row& r) {
      const int inst = instances_for(cost.bytes, bench_, 8);
      std::function<void(int)> fn = setup(inst);
      r.us = time_calls(fn, inst, bench_);
      r.baseline = "d2d-copy-same-bytes";
      r.baseline_us = copy_ptr_->time_us(cost.bytes, bench_);
    });
  }

  void membound_cases(const ModelDims& m) {
    const int H = static_cast<int>(m.heads);
    const int64_t n = m.hidden, latent = m.kv_lora_rank + m.qk_rope, qk = m.qk_nope + m.qk_rope;
    for (int64_t T : small_tokens()) {
      const std::string ts = "tokens=" + std::to_string(T);
      membound_case("add_rms_norm", m.name, ts + " n=" + std::to_string(n), kbench::add_rms_norm_cost(T, n), [&](int inst) {
        auto st = std::make_shared<std::vector<Tensor>>();
        Tensor w = rnd().make({n}, DType::kBF16, 7);
        for (int i = 0; i < inst; ++i) {
          st->push_back(rnd().make({T, n}, DType::kBF16, 10 + i));
          st->push_back(rnd().make({T, n}, DType::kBF16, 50 + i));
        }
        return std::function<void(int)>([this, st, w](int i) {
          Tensor res = (*st)[2 * i];
          Tensor y = ops().add_rms_norm(res, (*st)[2 * i + 1], w, 1e-6f);
        });
      });
      membound_case("rope_cache", m.name, ts + " heads=" + std::to_string(H), kbench::rope_cache_cost(T, H, m.qk_rope, latent),
                    [&](int inst) {
        struct St {
          std::vector<Tensor> q, rows;
          Tensor cache, slots, pos, inv;
        };
        auto st = std::make_shared<St>();
        std::mt19937 rng(T);
        for (int i = 0; i < inst; ++i) {
          st->q.push_back(rnd().make({T, H, qk}, DType::kBF16, 20 + i));
          st->rows.push_back(rnd().make({T, latent}, DType::kBF16, 60 + i));
        }
        const int64_t slots = 2 * T + 64;
        st->cache = rnd().make({slots, latent}, DType::kBF16, 9);
        std::vector<int32_t> perm(slots), pos(T);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        perm.resize(T);
        for (auto& p : pos) p = static_cast<int32_t>(rng() % 32768);
        st->slots = cuda_upload(kcases::i32_tensor(perm));
        st->pos = cuda_upload(kcases::i32_tensor(pos));
        Tensor inv = Tensor::empty({m.qk_rope / 2}, DType::kF32);
        for (int64_t i = 0; i < m.qk_rope / 2; ++i) inv.f32()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / m.qk_rope));
        st->inv = cuda_upload(inv);
        const int64_t nope = m.qk_nope, rope = m.qk_rope, lora = m.kv_lora_rank;
        return std::function<void(int)>([this, st, T, latent, nope, rope, lora](int i) {
          Tensor q = st->q[i];
          ops().rope_(q, nope, rope, st->pos, st->inv, 1.0f, RopeStyle::kInterleaved);
          Tensor k = st->rows[i].reshape({T, 1, latent});
          ops().rope_(k, lora, rope, st->pos, st->inv, 1.0f, RopeStyle::kInterleaved);
          ops().store_rows(st->cache, st->rows[i], st->slots);
        });
      });
      membound_case("silu_mul", m.name, ts + " inter=" + std::to_string(m.intermediate),
                    kbench::silu_mul_cost(T, m.intermediate), [&](int inst) {
        auto st = std::make_shared<std::vector<Tensor>>();
        for (int i = 0; i < inst; ++i) st->push_back(rnd().make({T, 2 * m.intermediate}, DType::kBF16, 30 + i));
        return std::function<void(int)>([this, st](int i) { Tensor y = ops().silu_mul((*st)[i]); });
      });
      membound_case("moe_route", m.name, ts + " experts=" + std::to_string(m.n_routed) + " top" + std::to_string(m.top_k),
                    kbench::moe_route_cost(T, m.n_routed, m.top_k), [&](int inst) {
        auto st = std::make_shared<std::vector<Tensor>>();
        for (int i = 0; i < inst; ++i) st->push_back(rnd().make({T, m.n_routed}, DType::kF32, 40 + i));
        const MoeRouting r = kcases::routing_of(m);
        Tensor bias = m.sigmoid ? rnd().make({m.n_routed}, DType::kF32, 41) : Tensor();
        return std::function<void(int)>([this, st, r, bias](int i) {
          Tensor ids, w;
          ops().moe_route((*st)[i], bias, r, &ids, &w);
        });
      });
      membound_case("moe_permute", m.name, ts + " experts=" + std::to_string(m.n_routed) + " top" + std::to_string(m.top_k),
                    kbench::moe_permute_cost(T, m.top_k, m.n_routed), [&](int inst) {
        struct St {
          std::vector<Tensor> ids;
          Tensor meta;
        };
        auto st = std::make_shared<St>();
        std::mt19937 rng(T + 1);
        for (int i = 0; i < inst; ++i)
          st->ids.push_back(cuda_upload(kcases::i32_tensor(kcases::route_uniform(T, m.n_routed, m.top_k, rng))));
        const int E = m.n_routed, K = m.top_k;
        st->meta = Tensor::empty({3 * int64_t{E} + 2 * T * K}, DType::kI32, Device::kCuda);
        return std::function<void(int)>([st, E, K, T](int i) {
          int32_t* counts = st->meta.data_as<int32_t>();
          CK(kernels::launch_moe_permute({st->ids[i].data_as<int32_t>(), counts, counts + E, counts + 2 * E,
                                          counts + 3 * E, counts + 3 * E + T * K, T * K, K, E},
                                         stream()));
        });
      });
      membound_case("moe_combine", m.name, ts + " top" + std::to_string(m.top_k) + " d=" + std::to_string(n),
                    kbench::moe_combine_cost(T, m.top_k, n), [&](int inst) {
        struct St {
          std::vector<Tensor> y;
          Tensor row_of, w, out;
        };
        auto st = std::make_shared<St>();
        const int K = m.top_k;
        std::mt19937 rng(T + 2);
        for (int i = 0; i < inst; ++i) st->y.push_back(rnd().make({T * K, n}, DType::kBF16, 70 + i));
        std::vector<int32_t> perm(T * K);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        st->row_of = cuda_upload(kcases::i32_tensor(perm));
        st->w = rnd().make({T, K}, DType::kF32, 71);
        st->out = Tensor::empty({T, n}, DType::kBF16, Device::kCuda);
        return std::function<void(int)>([st, T, n, K](int i) {
          CK(kernels::launch_moe_combine(
              {st->y[i].data(), st->row_of.data_as<int32_t>(), st->w.data_as<float>(), st->out.data(), T, n, K}, stream()));
        });
      });
      membound_case("log_softmax", m.name, ts + " vocab=" + std::to_string(m.vocab), kbench::log_softmax_cost(T, m.vocab),
                    [&](int inst) {
        auto st = std::make_shared<std::vector<Tensor>>();
        for (int i = 0; i < inst; ++i) st->push_back(rnd().make({T, m.vocab}, DType::kF32, 80 + i));
        return std::function<void(int)>([this, st](int i) { Tensor y = ops().log_softmax((*st)[i]); });
      });
    }
  }

 private:
  RandomSource& rnd() { return *rnd_ptr_; }
  Ops& ops() { return *ops_; }

  kbench::Options opt_;
  Ops* ops_;
  Bench bench_;
  Ceilings ceil_;
  Row copy_row_, gemm_row_;
  std::unique_ptr<RandomSource> rnd_ptr_;
  std::unique_ptr<CublasLtGemm> lt_ptr_;
  std::unique_ptr<CopyBaseline> copy_ptr_;

  FILE* csv_ = nullptr;
  int failures_ = 0;
};

}  // namespace
}  // namespace ds

int main(int argc, char** argv) {
  using namespace ds;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", kbench::usage().c_str());
      return 0;
    }
  Result<kbench::Options> opt = kbench::parse_args(argc, argv);
  if (!opt.is_ok()) {
    std::fprintf(stderr, "dserve_kernel_bench: %s\n%s", opt.status().message().c_str(), kbench::usage().c_str());
    return 1;
  }
  const Status dev = opt->list ? Status::ok() : check_cuda_device(0);
  if (!dev.is_ok()) {
    std::fprintf(stderr, "dserve_kernel_bench: %s\n", dev.message().c_str());
    return 1;
  }
  std::unique_ptr<Ops> ops;
  if (!opt->list) ops = make_cuda_ops(0);
  try {
    Runner run(*opt, ops.get());
    if (!opt->list) run.measure_ceilings();
    const std::vector<kbench::ModelDims> models = {kbench::deepseek_v2_lite(), kbench::deepseek_v3()};
    for (const auto& m : models) run.linear_cases(m);
    for (const auto& m : models) run.weight_read_cases(m);
    run.grid_barrier_cases();
    run.l2_prefetch_cases();
    for (const auto& m : models) run.fp8_wgmma_cases(m);
    for (const auto& m : models) run.bmm_cases(m);
    for (const auto& m : models) run.mla_decode_cases(m);
    for (const auto& m : models) run.mla_prefill_cases(m);
    run.indexer_cases();
    for (const auto& m : models) run.moe_cases(m);
    for (const auto& m : models) run.membound_cases(m);
    std::printf("done: %d failed case(s)\n", run.failures());
    return run.failures() ? 3 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dserve_kernel_bench: %s\n", e.what());
    return 2;
  }
}
