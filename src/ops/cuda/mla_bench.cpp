// dserve_mla_bench: the absorbed-MLA decode kernel alone (kernels/mla_decode.h) on the GPU, as achieved
// bandwidth of latent-cache reads against a device-to-device copy measured in the same run, plus the
// reference (naive) kernel's time. MLA_BENCH_KV=fp8_e4m3 reads a packed FP8 cache instead of bf16. One line per case on stdout and a CSV at $OUT/mla_bench.csv (or argv[1]).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"

namespace {

#define CHECK(expr)                                                                           \
  do {                                                                                        \
    cudaError_t e_ = (expr);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

uint16_t bf16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
float bf16_value(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Random bf16 in (-1, 1) made on the host and copied (never zeros: they can run faster than real data).
void fill_random(void* dev, size_t n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : h) {
    float v = u(rng);
    x = bf16_bits(v == 0.0f ? 0.5f : v);
  }
  CHECK(cudaMemcpy(dev, h.data(), n * 2, cudaMemcpyHostToDevice));
}

// Packed e4m3 rows (kernels/kv_fp8.h): e4m3 bytes in (-2, 2) (no NaN), block scales 1/64, bf16 rope in (-1, 1).
void fill_packed(void* dev, size_t rows, uint32_t seed) {
  constexpr ds::kernels::KvRowLayout L = ds::kernels::kv_row_layout(ds::kernels::kKvE4M3, 512, 64);
  std::vector<uint8_t> h(rows * L.row_bytes);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 0x3f);  // exponent <= 7: |value| < 2
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* row = h.data() + r * L.row_bytes;
    for (int k = 0; k < 512; ++k) row[k] = static_cast<uint8_t>(byte(rng) | ((rng() & 1) << 7));
    for (int b = 0; b < 4; ++b) {
      const float s = 1.0f / 64;
      std::memcpy(row + L.scale_off + 4 * b, &s, 4);
    }
    for (int k = 0; k < 64; ++k) {
      const uint16_t v = bf16_bits(u(rng));
      std::memcpy(row + L.rope_off + 2 * k, &v, 2);
    }
  }
  CHECK(cudaMemcpy(dev, h.data(), h.size(), cudaMemcpyHostToDevice));
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device copy bandwidth, bytes read + written, median of 10.
double copy_bandwidth(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * bytes / (median(ms) * 1e-3);
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
  const double copy_bw = copy_bandwidth(stream);
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
  // MLA_BENCH_KV=fp8_e4m3: the packed FP8 cache (656-byte rows) instead of bf16 (1152).
  const char* kv_env = std::getenv("MLA_BENCH_KV");
  const int fmt = kv_env && std::strcmp(kv_env, "fp8_e4m3") == 0 ? ds::kernels::kKvE4M3 : ds::kernels::kKvBf16;
  const char* kv_name = fmt ? "fp8_e4m3" : "bf16";
  for (const Case& c : cases) {
    const int B = c.batch, L = c.context, H = c.heads, D = ds::kernels::kMlaHeadDim, V = ds::kernels::kMlaValueDim;
    const int pages_per_seq = (L + 63) / 64, pages = B * pages_per_seq;
    const int64_t row_bytes = ds::kernels::kv_row_layout(fmt, V, D - V).row_bytes;
    const size_t cache_bytes = static_cast<size_t>(pages) * 64 * row_bytes;
    // Enough distinct caches that one pass over all of them overflows the 50 MB L2.
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t{200} << 20) / cache_bytes + 1));
    std::vector<void*> caches(copies);
    for (int i = 0; i < copies; ++i) {
      CHECK(cudaMalloc(&caches[i], cache_bytes));
      if (fmt)
        fill_packed(caches[i], static_cast<size_t>(pages) * 64, 17 + i);
      else
        fill_random(caches[i], cache_bytes / 2, 17 + i);
    }
    void *q, *out, *out_ref;
    CHECK(cudaMalloc(&q, static_cast<size_t>(B) * H * D * 2));
    fill_random(q, static_cast<size_t>(B) * H * D, 5);
    CHECK(cudaMalloc(&out, static_cast<size_t>(B) * H * V * 2));
    CHECK(cudaMalloc(&out_ref, static_cast<size_t>(B) * H * V * 2));
    std::vector<int32_t> perm(pages), q_starts(B + 1), lens(B, L), pos(B, L - 1);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
    std::iota(q_starts.begin(), q_starts.end(), 0);
    int32_t *d_table, *d_qs, *d_lens, *d_pos;
    CHECK(cudaMalloc(&d_table, pages * 4));
    CHECK(cudaMalloc(&d_qs, (B + 1) * 4));
    CHECK(cudaMalloc(&d_lens, B * 4));
    CHECK(cudaMalloc(&d_pos, B * 4));
    CHECK(cudaMemcpy(d_table, perm.data(), pages * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_qs, q_starts.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_lens, lens.data(), B * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_pos, pos.data(), B * 4, cudaMemcpyHostToDevice));

    ds::kernels::MlaDecodeParams p;
    p.q = q;
    p.cache = caches[0];
    p.out = out;
    p.q_starts = d_qs;
    p.seq_lens = d_lens;
    p.positions = d_pos;
    p.block_table = d_table;
    p.num_seqs = B;
    p.num_tokens = B;
    p.num_heads = H;
    p.num_slots = static_cast<int64_t>(pages) * 64;
    p.max_pages = pages_per_seq;
    p.page_size = 64;
    p.max_q_len = 1;
    p.scale = 0.1352338f;
    p.cache_format = fmt;
    p.num_splits = ds::kernels::mla_decode_num_splits(B, B, 1, H, L, false, prop.multiProcessorCount, fmt && H <= 16 ? 16 : 64);
    p.plan_context = L;
    void* scratch = nullptr;
    const size_t scratch_bytes = ds::kernels::mla_decode_scratch_bytes(p.num_splits, B, H);
    if (scratch_bytes) {
      CHECK(cudaMalloc(&scratch, scratch_bytes));
      p.part_o = static_cast<float*>(scratch);
      p.part_lse = reinterpret_cast<float*>(static_cast<char*>(scratch) +
                                            ds::kernels::mla_decode_lse_offset(p.num_splits, B, H));
    }

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
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    auto time_decode = [&](int splits, void* scratch_ptr, bool use_tma = true) {
      constexpr int kPerGraph = 20;
      ds::kernels::MlaDecodeParams pg = p;
      pg.use_tma = use_tma;
      pg.num_splits = splits;
      pg.part_o = static_cast<float*>(scratch_ptr);
      pg.part_lse = reinterpret_cast<float*>(static_cast<char*>(scratch_ptr) +
                                             ds::kernels::mla_decode_lse_offset(splits, B, H));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < kPerGraph; ++i) {
        pg.cache = caches[i % copies];
        CHECK(ds::kernels::launch_mla_decode(pg, stream));
      }
      CHECK(cudaStreamEndCapture(stream, &graph));
      CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
      std::vector<float> ms;
      for (int i = 0; i < 15; ++i) {
        CHECK(cudaEventRecord(e0, stream));
        CHECK(cudaGraphLaunch(exec, stream));
        CHECK(cudaEventRecord(e1, stream));
        CHECK(cudaEventSynchronize(e1));
        float t;
        CHECK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t / kPerGraph);
      }
      CHECK(cudaGraphExecDestroy(exec));
      CHECK(cudaGraphDestroy(graph));
      return median(ms) * 1e-3;
    };
    const double ours_s = time_decode(p.num_splits, scratch);
    const double bytes = static_cast<double>(B) * L * row_bytes;  // each cached row read once

    // Naive: the reference kernel (one block per (token, head)), median of 3.
    std::vector<float> ms_ref;
    for (int i = 0; i < 3; ++i) {
      pr.cache = caches[i % copies];
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

    std::printf(
        "mla_decode kv=%s batch=%d context=%d heads=%d splits=%d: ours %.1f us = %.0f GB/s = %.1f%% of copy %.0f GB/s; "
        "naive %.1f us = %.0f GB/s (%.1fx slower); max_rel vs naive %.2e\n",
        kv_name, B, L, H, p.num_splits, ours_s * 1e6, bytes / ours_s / 1e9, 100.0 * bytes / ours_s / copy_bw, copy_bw / 1e9,
        naive_s * 1e6, bytes / naive_s / 1e9, naive_s / ours_s, max_rel);
    if (csv)
      std::fprintf(csv, "%s,%d,%d,%d,%d,%.2f,%.1f,%.1f,%.4f,%.2f,%.1f,%.3e\n", kv_name, B, L, H, p.num_splits, ours_s * 1e6,
                   bytes / ours_s / 1e9, copy_bw / 1e9, bytes / ours_s / copy_bw, naive_s * 1e6,
                   bytes / naive_s / 1e9, max_rel);
    const double cp_async_s = fmt ? ours_s : time_decode(p.num_splits, scratch, false);
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
      void* alt_scratch = nullptr;
      const size_t alt_bytes = ds::kernels::mla_decode_scratch_bytes(alt, B, H);
      if (alt_bytes) CHECK(cudaMalloc(&alt_scratch, alt_bytes));
      const double t = time_decode(alt, alt_scratch);
      std::printf("  alt splits=%d: %.1f us = %.1f%% of copy\n", alt, t * 1e6, 100.0 * bytes / t / copy_bw);
      if (alt_scratch) CHECK(cudaFree(alt_scratch));
    }
    std::fflush(stdout);

    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    for (void* cptr : caches) CHECK(cudaFree(cptr));
    for (void* ptr : {q, out, out_ref, static_cast<void*>(d_table), static_cast<void*>(d_qs),
                      static_cast<void*>(d_lens), static_cast<void*>(d_pos)})
      CHECK(cudaFree(ptr));
    if (scratch) CHECK(cudaFree(scratch));
  }
  if (csv) std::fclose(csv);
  return 0;
}
