// dserve_mla_trace: where the transposed MLA decode kernel's time goes (issue 6, batch 1 x 32K). Built only by
// scripts/build_mla_trace.sh, with the kernels compiled under -DDS_MLA_TRACE so each decode / combine block writes
// its timeline (kernels/mla_decode_t16.cu, mla_decode.cu). Replays a graph of 20 decode + combine launches like
// dserve_mla_bench, then prints per launch when blocks start / end and, per block, when each tile landed and when
// its compute finished. Usage: dserve_mla_trace [batch context heads [splits]] (MLA_TRACE_SKIP_COMBINE=1: no combine).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/mla_decode.h"
#include "ops/cuda/mla_bench_case.h"

namespace ds::kernels {
int mla_t16_trace_read(unsigned long long* host, int rows);
int mla_combine_trace_read(unsigned long long* host, int rows);
}  // namespace ds::kernels

namespace {

constexpr int kS = 40;  // slots per decode block row (kernels/mla_decode_t16.cu)

#define CHECK(expr) MLA_BENCH_CHECK(expr)

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  const int B = argc > 3 ? std::atoi(argv[1]) : 1, L = argc > 3 ? std::atoi(argv[2]) : 32768,
            H = argc > 3 ? std::atoi(argv[3]) : 16;
  constexpr int D = ds::kernels::kMlaHeadDim, kPerGraph = 20;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  ds::mla_bench::DecodeCase dc(B, L, H, ds::kernels::kKvBf16, prop.multiProcessorCount, argc > 4 ? std::atoi(argv[4]) : 0);
  ds::kernels::MlaDecodeParams p = dc.p;
  // MLA_TRACE_SKIP_COMBINE=1: the decode kernel alone (its partials left unmerged), to see what the combine costs
  // between back-to-back decodes.
  if (const char* e = std::getenv("MLA_TRACE_SKIP_COMBINE"); e && e[0] == '1') p.skip_combine = true;
  // MLA_TRACE_CLUSTER=N: MlaDecodeParams::t16_cluster (the in-cluster split merge forced to N, 0: off).
  if (const char* e = std::getenv("MLA_TRACE_CLUSTER")) p.t16_cluster = std::atoi(e);
  ds::mla_bench::DecodeGraph graph(p, dc.caches(), kPerGraph, stream);
  const double per_launch_us = graph.median_us(12, 0);
  const double kv_bytes = static_cast<double>(B) * L * D * 2;
  std::printf("batch %d context %d heads %d splits %d cluster %d: %.2f us per decode + combine (median of 12 graphs) = "
              "%.0f GB/s\n",
              B, L, H, p.num_splits, ds::kernels::mla_decode_t16_cluster(p),
              per_launch_us, kv_bytes / (per_launch_us * 1e-6) / 1e9);

  std::vector<unsigned long long> dummy(8192 * kS);
  ds::kernels::mla_t16_trace_read(dummy.data(), 8192);  // resets the tickets
  ds::kernels::mla_combine_trace_read(dummy.data(), 8192);
  graph.replay();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned long long> dr(8192 * kS), cr(8192 * 4);
  const int nd = ds::kernels::mla_t16_trace_read(dr.data(), 8192);
  const int nc = ds::kernels::mla_combine_trace_read(cr.data(), 8192);
  const int row_blocks = (H + 15) / 16;
  const int per_launch = p.num_splits * row_blocks * B;
  const int c_per_launch = nc / kPerGraph;
  std::printf("trace: %d decode rows (%d per launch), %d combine rows (%d per launch)\n", nd, per_launch, nc, c_per_launch);
  if (nd < per_launch * kPerGraph) return 1;
  const unsigned long long t0 = dr[1];
  auto us = [&](unsigned long long t) { return (static_cast<double>(t) - static_cast<double>(t0)) / 1000.0; };
  std::printf("launch | decode start first / last | decode end first / p50 / last | combine start first, wait passed first / last, end last | period\n");
  double prev = 0;
  for (int k = 8; k < 12; ++k) {
    std::vector<double> st, en;
    for (int b = 0; b < per_launch; ++b) {
      const unsigned long long* r = &dr[static_cast<size_t>(k * per_launch + b) * kS];
      st.push_back(us(r[1]));
      if (r[2]) en.push_back(us(r[2]));
    }
    std::vector<double> cs, cw, ce;
    for (int b = 0; c_per_launch > 0 && b < c_per_launch; ++b) {
      const unsigned long long* r = &cr[static_cast<size_t>(k * c_per_launch + b) * 4];
      cs.push_back(us(r[0]));
      cw.push_back(us(r[1]));
      ce.push_back(us(r[2]));
    }
    const double first = pct(st, 0);
    std::printf("%2d | %8.2f %8.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %8.2f | %6.2f\n", k, first, pct(st, 1), pct(en, 0),
                pct(en, 0.5), pct(en, 1), pct(cs, 0), pct(cw, 0), pct(cw, 1), pct(ce, 1), k ? first - prev : 0.0);
    prev = first;
  }
  {
    double a = 0, b = 0;
    for (int k = 8; k < 12; ++k) {
      a += dr[static_cast<size_t>((k + 1) * per_launch) * kS + 1];
      b += dr[static_cast<size_t>(k * per_launch) * kS + 1];
    }
    std::printf("mean period launches 8-11 (first block starts): %.2f us\n", (a - b) / 4000.0);
  }
  // Per-block phases of launches 5..18 (steady state), in us from the block's own start (clock64 scaled by the
  // block's globaltimer span).
  std::vector<double> st_s, st_x, st_p, st_pv;
  std::vector<double> init, issue0, issue1, wait, qload, ready[8], comp[8], gap[8], epi, total, csync, cmerge, cend;
  std::vector<double> esum, etot, estore;  // the split epilogue: column sums in registers, across warps, the stores
  int tiles = 0;
  for (int k = 5; k < kPerGraph - 1; ++k)
    for (int b = 0; b < per_launch; ++b) {
      const unsigned long long* r = &dr[static_cast<size_t>(k * per_launch + b) * kS];
      const int n = static_cast<int>(r[23]);
      if (n <= 0 || r[22] <= r[3]) continue;
      tiles = std::max(tiles, std::min(n, 8));
      const double s = static_cast<double>(r[2] - r[1]) / 1000.0 / static_cast<double>(r[22] - r[3]);
      auto at = [&](int slot) { return static_cast<double>(r[slot] - r[3]) * s; };
      if (n > 1 && r[27]) {
        st_s.push_back(at(27) - at(7));
        st_x.push_back(at(28) - at(27));
        st_p.push_back(at(29) - at(28));
        st_pv.push_back(at(15) - at(29));
      }
      init.push_back(at(24));
      issue0.push_back(at(25));
      issue1.push_back(at(26));
      wait.push_back(at(4));
      qload.push_back(at(5) - at(4));
      for (int i = 0; i < std::min(n, 8); ++i) {
        ready[i].push_back(at(6 + i));
        comp[i].push_back(at(14 + i) - at(6 + i));
        gap[i].push_back(at(6 + i) - (i ? at(14 + i - 1) : at(5)));
      }
      epi.push_back(at(22) - at(14 + std::min(n, 8) - 1));
      if (r[32] && r[33] && n <= 8) {  // the split epilogue (slots 32, 33)
        esum.push_back(at(32) - at(14 + n - 1));
        etot.push_back(at(33) - at(32));
        estore.push_back(at(22) - at(33));
      }
      if (r[30] && r[31] && n <= 8) {  // the cluster merge (mla_decode_t16.cu's slots 30, 31)
        csync.push_back(at(30) - at(14 + n - 1));
        cmerge.push_back(at(31) - at(30));
        cend.push_back(at(22) - at(31));
      }
      total.push_back(at(22));
    }
  auto show = [](const char* name, const std::vector<double>& v) {
    std::printf("  %-22s p10 %6.2f  p50 %6.2f  p90 %6.2f  max %6.2f us\n", name, pct(v, 0.1), pct(v, 0.5), pct(v, 0.9), pct(v, 1));
  };
  std::printf("per block (launches 5-18, %zu blocks), from the block's start:\n", total.size());
  show("barriers init", init);
  show("early tile 0 issued", issue0);
  show("early tile 1 issued", issue1);
  show("PDL wait passed", wait);
  show("Q load", qload);
  for (int i = 0; i < tiles; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "tile %d landed at", i);
    show(name, ready[i]);
    if (i < 2 || i == tiles - 1) {
      std::snprintf(name, sizeof name, "tile %d compute", i);
      show(name, comp[i]);
    }
  }
  show("tile 1: S^T wgmma", st_s);
  show("tile 1: S^T exchange", st_x);
  show("tile 1: softmax, P^T", st_p);
  show("tile 1: P V wgmma", st_pv);
  show("epilogue", epi);
  if (!esum.empty()) {
    show("  column sums (regs)", esum);
    show("  column totals, lse", etot);
    show("  partial stores", estore);
  }
  if (!csync.empty()) {
    show("  to the cluster barrier", csync);
    show("  cluster merge", cmerge);
    show("  final barrier", cend);
  }
  show("block total", total);
  return 0;
}
