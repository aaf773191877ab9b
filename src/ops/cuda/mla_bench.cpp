// dserve_mla_bench: the absorbed-MLA decode kernel alone (kernels/mla_decode.h) on the GPU, as achieved
// bandwidth of latent-cache reads against a device-to-device copy measured in the same run, plus the
// reference (naive) kernel's time. MLA_BENCH_KV=fp8_e4m3 reads a packed FP8 cache instead of bf16. One line per case on stdout and a CSV at $OUT/mla_bench.csv (or argv[1]).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"
#include "ops/cuda/copy_bandwidth.h"
#include "ops/cuda/mla_bench_case.h"

namespace {

#define CHECK(expr) MLA_BENCH_CHECK(expr)
using ds::mla_bench::bf16_value;

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  int batch, context, heads;
};

}  // namespace

int main(int argc, char** argv) {
  const char* out_env = std::getenv("OUT");
  const std::string csv_path = argc > 1 ? argv[1] : std::string(out_env ? out_env : ".") + "/mla_bench.csv";
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const double copy_bw = ds::measure_copy_bandwidth(stream);
  std::printf("device %s, %d SMs; d2d copy %.0f GB/s (read + write)\n", prop.name, prop.multiProcessorCount,
              copy_bw / 1e9);
  FILE* csv = std::fopen(csv_path.c_str(), "w");
  if (csv)
    std::fprintf(csv, "kv,batch,context,heads,splits,ours_us,ours_GBps,copy_GBps,ratio,naive_us,naive_GBps,max_rel_vs_naive\n");

  const std::vector<Case> all_cases = {{64, 4096, 128}, {1, 32768, 128}, {64, 4096, 16}, {8, 8192, 128}, {1, 32768, 16}, {1, 4096, 16}, {8, 4096, 16}, {64, 512, 16}};
  std::vector<Case> cases = all_cases;
  if (const char* sel = std::getenv("MLA_BENCH_CASES")) {  // e.g. "0" or "0,1": run only these
    cases.clear();
    for (const char* c = sel; *c; ++c)
      if (*c >= '0' && *c <= '9' && static_cast<size_t>(*c - '0') < all_cases.size()) cases.push_back(all_cases[*c - '0']);
  }
  // MLA_BENCH_SHAPES="BxLxH,...": these (batch, context, heads) cases instead.
  if (const char* shapes = std::getenv("MLA_BENCH_SHAPES")) {
    cases.clear();
    for (const char* c = shapes; *c;) {
      Case k{};
      if (std::sscanf(c, "%dx%dx%d", &k.batch, &k.context, &k.heads) == 3 && k.batch > 0 && k.context > 0 && k.heads > 0)
        cases.push_back(k);
      while (*c && *c != ',') ++c;
      if (*c == ',') ++c;
    }
  }
  std::printf("transposed kernel: clusters of 2 / 4 / 8 / 16 CTAs that fit at once: %d / %d / %d / %d\n",
              ds::kernels::mla_decode_t16_max_clusters(2), ds::kernels::mla_decode_t16_max_clusters(4),
              ds::kernels::mla_decode_t16_max_clusters(8), ds::kernels::mla_decode_t16_max_clusters(16));
  // MLA_BENCH_KV=fp8_e4m3: the packed FP8 cache (656-byte rows) instead of bf16 (1152).
  const char* kv_env = std::getenv("MLA_BENCH_KV");
  const int fmt = kv_env && std::strcmp(kv_env, "fp8_e4m3") == 0 ? ds::kernels::kKvE4M3 : ds::kernels::kKvBf16;
  const char* kv_name = fmt ? "fp8_e4m3" : "bf16";
  for (const Case& c : cases) {
    const int B = c.batch, L = c.context, H = c.heads, V = ds::kernels::kMlaValueDim;
    const int pages_per_seq = (L + 63) / 64;
    ds::mla_bench::DecodeCase dc(B, L, H, fmt, prop.multiProcessorCount);
    ds::kernels::MlaDecodeParams& p = dc.p;
    const std::vector<void*>& caches = dc.caches();
    const int64_t row_bytes = dc.row_bytes();
    void* out = p.out;
    void* out_ref;
    CHECK(cudaMalloc(&out_ref, static_cast<size_t>(B) * H * V * 2));

    // Agreement with the reference kernel on the same inputs (a sanity check; ctest has the real ones).
    CHECK(ds::kernels::launch_mla_decode(p, stream));
    ds::kernels::MlaDecodeParams pr = p;
    pr.out = out_ref;
    CHECK(ds::kernels::launch_mla_decode_reference(pr, stream));
    CHECK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> a(static_cast<size_t>(B) * H * V), r(a.size());
    CHECK(cudaMemcpy(a.data(), out, a.size() * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(r.data(), out_ref, r.size() * 2, cudaMemcpyDeviceToHost));
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = bf16_value(a[i]), y = bf16_value(r[i]);
      max_diff = std::max(max_diff, std::isfinite(x) ? std::fabs(x - y) : 1e30);
      max_ref = std::max(max_ref, std::fabs(y));
    }
    const double max_rel = max_diff / std::max(max_ref, 1e-6);

    // Ours: a graph of 20 launches rotating over the cache copies, median of 15 replays.
    auto time_decode = [&](const ds::kernels::MlaDecodeParams& plan, bool use_tma = true) {
      ds::kernels::MlaDecodeParams pg = plan;
      pg.use_tma = use_tma;
      ds::mla_bench::DecodeGraph g(pg, caches, 20, stream);
      return g.median_us(15, 3) * 1e-6;
    };
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const double ours_s = time_decode(p);
    const double bytes = static_cast<double>(B) * L * row_bytes;  // each cached row read once

    // Naive: the reference kernel (one block per (token, head)), median of 3.
    std::vector<float> ms_ref;
    for (int i = 0; i < 3; ++i) {
      pr.cache = caches[i % caches.size()];
      CHECK(cudaEventRecord(e0, stream));
      CHECK(ds::kernels::launch_mla_decode_reference(pr, stream));
      CHECK(cudaEventRecord(e1, stream));
      CHECK(cudaEventSynchronize(e1));
      float t;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms_ref.push_back(t);
    }
    const double naive_s = median(ms_ref) * 1e-3;
    CHECK(cudaGetLastError());

    const bool t16 = ds::kernels::mla_decode_t16_supported(p);
    const int cluster = t16 ? ds::kernels::mla_decode_t16_cluster(p) : 1;
    std::printf(
        "mla_decode kv=%s batch=%d context=%d heads=%d splits=%d cluster=%d rows=%d: ours %.1f us = %.0f GB/s = %.1f%% of "
        "copy %.0f GB/s; naive %.1f us = %.0f GB/s (%.1fx slower); max_rel vs naive %.2e\n",
        kv_name, B, L, H, p.num_splits, cluster, t16 ? ds::kernels::mla_decode_t16_rows(p, cluster) : 0, ours_s * 1e6,
        bytes / ours_s / 1e9, 100.0 * bytes / ours_s / copy_bw, copy_bw / 1e9, naive_s * 1e6, bytes / naive_s / 1e9, naive_s / ours_s, max_rel);
    if (csv)
      std::fprintf(csv, "%s,%d,%d,%d,%d,%.2f,%.1f,%.1f,%.4f,%.2f,%.1f,%.3e\n", kv_name, B, L, H, p.num_splits, ours_s * 1e6,
                   bytes / ours_s / 1e9, copy_bw / 1e9, bytes / ours_s / copy_bw, naive_s * 1e6,
                   bytes / naive_s / 1e9, max_rel);
    const double cp_async_s = fmt ? ours_s : time_decode(p, false);
    if (!fmt) std::printf("  cp.async loads instead of TMA: %.1f us = %.1f%% of copy\n", cp_async_s * 1e6,
                100.0 * bytes / cp_async_s / copy_bw);
    // Other split counts around the plan's, for tuning the planner (not in the CSV); MLA_BENCH_ALT="a,b,...":
    // these instead.
    std::vector<int> alts = {p.num_splits / 2, p.num_splits * 2};
    if (const char* a = std::getenv("MLA_BENCH_ALT")) {
      alts.clear();
      for (const char* c = a; *c;) {
        alts.push_back(std::atoi(c));
        while (*c && *c != ',') ++c;
        if (*c == ',') ++c;
      }
    }
    for (int alt : alts) {
      if (alt < 1 || alt == p.num_splits || alt > ds::kernels::kMlaMaxSplits || alt > pages_per_seq) continue;
      const double t = time_decode(dc.with_splits(alt));
      std::printf("  alt splits=%d: %.1f us = %.1f%% of copy\n", alt, t * 1e6, 100.0 * bytes / t / copy_bw);
    }
    std::fflush(stdout);

    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaFree(out_ref));
  }
  if (csv) std::fclose(csv);
  return 0;
}
