// GPU token sampling: the exact semantics of ops/sampling.h (sample_row_reference), one thread block per
// row. IEEE float ops (__f*_rn) where the host reference rounds in float, so no FMA contraction changes a
// penalised logit or a temperature-scaled key; probabilities and prefix sums in double.
#include "kernels/sampling.h"

#include <climits>
#include <cmath>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cuda_bf16.h>

#include "kernels/block_reduce.cuh"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

constexpr int kThreads = 1024;  // the walk's BlockScan is specialised for exactly this block size

__device__ __forceinline__ float load_logit(const void* p, ElemType t, int64_t i) {
  if (t == ElemType::kBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

constexpr int kScanThreads = 256;

// (value, id) order of the greedy choice: the larger value, then the lower id (the first maximum).
__device__ __forceinline__ bool first_max_better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// Columns [begin, end) of one logits row (starting at element `base`), kScanThreads threads with kUnroll loads in
// flight each before any is used; f(i, x) in ascending i per thread.
template <class F>
__device__ __forceinline__ void scan_chunk(const void* logits, ElemType type, int64_t base, int64_t begin,
                                           int64_t end, F f) {
  constexpr int kUnroll = 4;
  for (int64_t i0 = begin + threadIdx.x; i0 < end; i0 += kScanThreads * kUnroll) {
    float xs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + u * kScanThreads;
      xs[u] = i < end ? load_logit(logits, type, base + i) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + u * kScanThreads;
      if (i >= end) break;
      f(i, xs[u]);
    }
  }
}

// The block's first maximum of the threads' (bv, bi) (kScanThreads threads): warps by shuffles, then thread 0 over
// the warps' results (s_val / s_id: kScanThreads / 32 entries). The result is thread 0's; every thread passes the
// barrier inside.
__device__ __forceinline__ void block_first_max(float& bv, int& bi, float* s_val, int* s_id) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (first_max_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) s_val[warp] = bv, s_id[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 1; i < kScanThreads / 32; ++i)
      if (first_max_better(s_val[i], s_id[i], bv, bi)) bv = s_val[i], bi = s_id[i];
}

// Pass 1, kSampleScanChunks blocks per row (one block per row left most of a decode step's sampling time to
// memory latency): this chunk's first non-finite column, max, sum of exp(x - max) and first maximum, and the
// raw row copied into `work` (and the raw slot for top-logprob rows).
__global__ void __launch_bounds__(kScanThreads) sample_scan_kernel(SampleParams p) {
  __shared__ float scratch[33];
  __shared__ int s_bad;
  __shared__ float s_val[kScanThreads / 32];
  __shared__ int s_id[kScanThreads / 32];
  const int b = blockIdx.x, c = blockIdx.y;
  const SampleRowParams r = p.rows[b];
  const int64_t V = p.vocab;
  const int64_t per = (V + kSampleScanChunks - 1) / kSampleScanChunks;
  const int64_t begin = min(V, c * per), end = min(V, begin + per);
  const int64_t base = static_cast<int64_t>(r.logits_row) * p.ld;
  float* w = p.work + static_cast<int64_t>(r.slot) * V;
  float* raw = r.raw_slot >= 0 ? p.work + static_cast<int64_t>(r.raw_slot) * V : nullptr;
  if (threadIdx.x == 0) s_bad = INT_MAX;
  __syncthreads();
  float mx = -INFINITY, bv = -INFINITY;
  int bad = INT_MAX, bi = INT_MAX;
  scan_chunk(p.logits, p.type, base, begin, end, [&](int64_t i, float x) {
    if (!isfinite(x) && bad == INT_MAX) bad = static_cast<int>(i);
    mx = fmaxf(mx, x);
    x = __fadd_rn(x, 0.0f);  // -0 -> +0: radix order of the keys equals their comparison order
    w[i] = x;
    if (raw) raw[i] = x;
    if (x > bv) bv = x, bi = static_cast<int>(i);  // ascending i per thread: the first maximum
  });
  if (bad != INT_MAX) atomicMin(&s_bad, bad);
  mx = block_max(mx, scratch);  // its barriers also publish s_bad
  float s = 0.0f;
  if (s_bad == INT_MAX && mx > -INFINITY)
    for (int64_t i = begin + threadIdx.x; i < end; i += kScanThreads) s += expf(w[i] - mx);
  s = block_sum(s, scratch);
  block_first_max(bv, bi, s_val, s_id);
  if (threadIdx.x == 0) {
    SampleScanPart& out = p.part[static_cast<int64_t>(b) * kSampleScanChunks + c];
    out.mx = mx;
    out.sum = s;
    out.best = bv;
    out.best_id = bi;
    out.bad = s_bad;
  }
}

// Pass 2, one block per row: the raw log-sum-exp and the first non-finite column from the chunks' partials,
// the penalties applied to the row in `work`, and the greedy token (from the partials when nothing was
// penalised, else by a pass over the adjusted row).
__global__ void __launch_bounds__(kThreads) sample_prep_kernel(SampleParams p) {
  __shared__ float s_val[32];
  __shared__ int s_id[32];
  __shared__ float s_lse;
  __shared__ int s_bad, s_best;
  const int b = blockIdx.x;
  const SampleRowParams r = p.rows[b];
  const int64_t V = p.vocab;
  const int64_t base = static_cast<int64_t>(r.logits_row) * p.ld;
  float* w = p.work + static_cast<int64_t>(r.slot) * V;
  if (threadIdx.x == 0) {
    const SampleScanPart* part = p.part + static_cast<int64_t>(b) * kSampleScanChunks;
    int bad = INT_MAX, best_id = INT_MAX;
    float mx = -INFINITY, best = -INFINITY;
    for (int c = 0; c < kSampleScanChunks; ++c) {
      bad = min(bad, part[c].bad);
      mx = fmaxf(mx, part[c].mx);
      if (first_max_better(part[c].best, part[c].best_id, best, best_id))
        best = part[c].best, best_id = part[c].best_id;
    }
    float sum = 0.0f;
    if (bad == INT_MAX)
      for (int c = 0; c < kSampleScanChunks; ++c)
        if (part[c].mx > -INFINITY) sum += part[c].sum * expf(part[c].mx - mx);
    s_bad = bad;
    s_best = best_id;
    s_lse = mx + logf(sum);
  }
  __syncthreads();
  const int bad_id = s_bad;
  if (bad_id != INT_MAX) {
    if (threadIdx.x == 0) {
      p.out.bad_id[b] = bad_id;
      p.out.bad_value[b] = load_logit(p.logits, p.type, base + bad_id);
      p.out.tokens[b] = 0;
      p.lse[b] = NAN;
    }
    return;
  }
  for (int e = r.penalty_begin + threadIdx.x; e < r.penalty_end; e += blockDim.x) {
    const SamplePenaltyParams q = p.penalties[e];
    if (q.id < 0 || q.id >= V) continue;
    float v = w[q.id];
    if (q.output_count > 0)
      v = __fsub_rn(v, __fadd_rn(__fmul_rn(r.frequency_penalty, static_cast<float>(q.output_count)), r.presence_penalty));
    if (q.seen && r.repetition_penalty != 1.0f)
      v = v > 0.0f ? __fdiv_rn(v, r.repetition_penalty) : __fmul_rn(v, r.repetition_penalty);
    if (q.bias != 0.0f) v = __fadd_rn(v, q.bias);
    if (q.banned) v = -INFINITY;
    w[q.id] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    p.out.bad_id[b] = -1;
    p.out.bad_value[b] = 0.0f;
    p.lse[b] = s_lse;
  }
  if (r.temperature > 0.0f) return;
  if (r.penalty_begin == r.penalty_end) {  // the adjusted row is the raw row: the partials' first maximum
    if (threadIdx.x == 0) p.out.tokens[b] = s_best >= 0 && s_best < V ? s_best : 0;
    return;
  }
  // Greedy: the first (lowest id) maximum of the adjusted row.
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float x = w[i];
    if (x > bv || (x == bv && static_cast<int>(i) < bi)) bv = x, bi = static_cast<int>(i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (first_max_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  if (lane == 0) s_val[warp] = bv, s_id[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    bv = lane < warps ? s_val[lane] : -INFINITY;
    bi = lane < warps ? s_id[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (first_max_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) p.out.tokens[b] = bi >= 0 && bi < V ? bi : 0;
  }
}

__global__ void fill_sort_inputs_kernel(int32_t* vals, int32_t* offsets, int64_t vocab, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    vals[i] = static_cast<int32_t>(i % vocab);
  if (blockIdx.x == 0 && threadIdx.x <= kSampleSortChunk)
    offsets[threadIdx.x] = static_cast<int32_t>(threadIdx.x * vocab);
}

using BlockScanD = cub::BlockScan<double, kThreads>;

struct WalkShared {
  typename BlockScanD::TempStorage scan;
  double red[32];
  double total;
  int found;
};

// Sum over threads (fixed tree order); every thread gets the result.
__device__ double block_sum_d(double v, WalkShared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) sh.red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double x = lane < (kThreads >> 5) ? sh.red[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) sh.total = x;
  }
  __syncthreads();
  return sh.total;
}

// The smallest i < n whose inclusive prefix sum of prob(0..i) is >= target, or -1.
template <class Prob>
__device__ int first_prefix_at_least(int64_t n, double target, Prob prob, WalkShared& sh) {
  double carry = 0.0;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const double v = i < n ? prob(i) : 0.0;
    double incl, agg;
    __syncthreads();
    if (threadIdx.x == 0) sh.found = INT_MAX;
    BlockScanD(sh.scan).InclusiveSum(v, incl, agg);  // starts with no barrier: the one above orders `found`
    __syncthreads();
    if (i < n && carry + incl >= target) atomicMin(&sh.found, static_cast<int>(i));
    __syncthreads();
    const int f = sh.found;
    if (f != INT_MAX) return f;
    carry += agg;
  }
  return -1;
}

// The smallest i in [lo, n) with pred(i), or n.
template <class Pred>
__device__ int64_t first_where(int64_t lo, int64_t n, Pred pred, WalkShared& sh) {
  for (int64_t base = lo; base < n; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) sh.found = INT_MAX;
    __syncthreads();
    if (i < n && pred(i)) atomicMin(&sh.found, static_cast<int>(i));
    __syncthreads();
    const int f = sh.found;
    if (f != INT_MAX) return f;
  }
  return n;
}

// One block per sorted job of this chunk: a draw (semantics of sample_row_reference) or top logprobs.
__global__ void __launch_bounds__(kThreads) sample_walk_kernel(SampleParams p, int job0) {
  __shared__ WalkShared sh;
  const int job = job0 + blockIdx.x;
  const int b = p.job_row[job];
  if (p.out.bad_id[b] >= 0) return;
  const SampleRowParams r = p.rows[b];
  const int64_t V = p.vocab;
  const float* keys = p.keys_out + static_cast<int64_t>(blockIdx.x) * V;
  const int32_t* vals = p.vals_out + static_cast<int64_t>(blockIdx.x) * V;
  if (p.job_raw[job]) {
    const float lse = p.lse[b];
    for (int i = threadIdx.x; i < r.top_n && i < V; i += blockDim.x) {
      p.top_id[static_cast<int64_t>(b) * p.max_top_n + i] = vals[i];
      p.top_lp[static_cast<int64_t>(b) * p.max_top_n + i] = keys[i] - lse;
    }
    return;
  }
  const float t = r.temperature;
  int64_t keep = r.top_k > 0 ? (r.top_k < V ? r.top_k : V) : V;
  const double mx = static_cast<double>(__fdiv_rn(keys[0], t));
  auto expv = [&](int64_t i) { return exp(static_cast<double>(__fdiv_rn(keys[i], t)) - mx); };
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < keep; i += kThreads) part += expv(i);
  const double sum = block_sum_d(part, sh);
  auto prob = [&](int64_t i) { return expv(i) / sum; };
  if (r.top_p < 1.0f) {
    const int f = first_prefix_at_least(keep, static_cast<double>(r.top_p), prob, sh);
    const int64_t n = f >= 0 ? f + 1 : keep;
    keep = n > 1 ? n : 1;
  }
  if (r.min_p > 0.0f) {
    const double thr = static_cast<double>(r.min_p) * prob(0);
    keep = first_where(1, keep, [&](int64_t i) { return prob(i) < thr; }, sh);
  }
  part = 0.0;
  for (int64_t i = threadIdx.x; i < keep; i += kThreads) part += prob(i);
  const double total = block_sum_d(part, sh);
  const int f = first_prefix_at_least(keep, r.uniform * total, prob, sh);
  if (threadIdx.x == 0) {
    const int32_t tok = vals[f >= 0 ? f : keep - 1];
    p.out.tokens[b] = tok >= 0 && tok < V ? tok : 0;
  }
}

__global__ void sample_logprob_kernel(SampleParams p) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= p.num_rows) return;
  const SampleRowParams r = p.rows[b];
  float lp = NAN;
  if (r.want_logprob && p.out.bad_id[b] < 0)
    lp = load_logit(p.logits, p.type, static_cast<int64_t>(r.logits_row) * p.ld + p.out.tokens[b]) - p.lse[b];
  p.out.logprobs[b] = lp;
  for (int e = r.ids_begin; e < r.ids_end; ++e)
    p.lp_ids_out[e] = p.out.bad_id[b] < 0
                          ? load_logit(p.logits, p.type, static_cast<int64_t>(r.logits_row) * p.ld + p.lp_ids[e]) - p.lse[b]
                          : NAN;
  if (r.store_index >= 0) p.token_store[r.store_index] = p.out.tokens[b];
}

// The greedy-only launch (launch_sample_greedy): the scan's chunk pass without the row copy or the exp sums, then the
// row's last block merges the partials (one per thread) as sample_prep_kernel and sample_logprob_kernel would for a
// greedy row.
__global__ void __launch_bounds__(kScanThreads) sample_greedy_kernel(const SampleGreedyParams p) {
  __shared__ float s_val[kScanThreads / 32];
  __shared__ int s_id[kScanThreads / 32];
  __shared__ int s_bad;
  __shared__ bool s_last;
  const int b = blockIdx.x, c = blockIdx.y, chunks = gridDim.y;
  const int64_t V = p.vocab;
  const int64_t per = (V + chunks - 1) / chunks;
  const int64_t begin = min(V, c * per), end = min(V, begin + per);
  const int32_t logits_row = p.identity ? b : p.logits_row[b];
  const int64_t base = static_cast<int64_t>(logits_row) * p.ld;
  if (threadIdx.x == 0) s_bad = INT_MAX;
  pdl_enter();  // the logits are the previous launch's (the lm_head GEMM in a decode graph)
  __syncthreads();
  float bv = -INFINITY;
  int bad = INT_MAX, bi = INT_MAX;
  scan_chunk(p.logits, p.type, base, begin, end, [&](int64_t i, float x) {
    if (!isfinite(x) && bad == INT_MAX) bad = static_cast<int>(i);
    if (x > bv) bv = x, bi = static_cast<int>(i);  // ascending i per thread: the first maximum
  });
  if (bad != INT_MAX) atomicMin(&s_bad, bad);
  block_first_max(bv, bi, s_val, s_id);  // its barrier also publishes s_bad
  SampleScanPart* parts = p.part + static_cast<int64_t>(b) * chunks;
  if (threadIdx.x == 0) {
    parts[c] = SampleScanPart{0.0f, 0.0f, bv, bi, s_bad};
    __threadfence();  // the partial is visible before the arrival is counted
    s_last = atomicAdd(&p.arrivals[b], 1u) == static_cast<unsigned>(chunks - 1);
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // every block's partial (each fenced before its arrival) is read after the count
  // One partial a thread (chunks <= kSampleGreedyMaxChunks = kScanThreads), merged as the chunk pass merged columns.
  static_assert(kSampleGreedyMaxChunks <= kScanThreads, "one partial per thread");
  if (threadIdx.x == 0) s_bad = INT_MAX;
  __syncthreads();
  bv = -INFINITY;
  bi = INT_MAX;
  if (threadIdx.x < chunks) {
    bv = __ldcg(&parts[threadIdx.x].best);
    bi = __ldcg(&parts[threadIdx.x].best_id);
    const int kbad = __ldcg(&parts[threadIdx.x].bad);
    if (kbad != INT_MAX) atomicMin(&s_bad, kbad);
  }
  block_first_max(bv, bi, s_val, s_id);
  if (threadIdx.x != 0) return;
  const int bad_id = s_bad;
  p.arrivals[b] = 0;  // ready for the next launch (stream-ordered after this one)
  int token = 0;
  if (bad_id == INT_MAX) token = bi >= 0 && bi < V ? bi : 0;
  if (p.out.tokens) {
    p.out.bad_id[b] = bad_id != INT_MAX ? bad_id : -1;
    p.out.bad_value[b] = bad_id != INT_MAX ? load_logit(p.logits, p.type, base + bad_id) : 0.0f;
    p.out.tokens[b] = token;
    p.out.logprobs[b] = NAN;
  }
  const int32_t store = p.identity ? b : p.store_index[b];
  if (store >= 0) p.token_store[store] = token;
}

}  // namespace

cudaError_t sample_sort_temp_bytes(int64_t vocab, size_t* bytes) {
  *bytes = 0;
  const int n = static_cast<int>(kSampleSortChunk * vocab);
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, *bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, kSampleSortChunk,
      static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr) + 1, 0, 32);
}

cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.vocab <= 0 || p.vocab * kSampleSortChunk > INT_MAX) return cudaErrorInvalidValue;
  if (!p.part) return cudaErrorInvalidValue;
  const dim3 scan_grid(static_cast<unsigned>(p.num_rows), kSampleScanChunks);
  if (const cudaError_t e = launch_plain(sample_scan_kernel, scan_grid, kScanThreads, 0, stream, p); e != cudaSuccess)
    return e;
  if (const cudaError_t e = launch_plain(sample_prep_kernel, p.num_rows, kThreads, 0, stream, p); e != cudaSuccess)
    return e;
  if (p.num_jobs > 0) {
    const int64_t n = kSampleSortChunk * p.vocab;
    const unsigned blocks = static_cast<unsigned>((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    const cudaError_t e =
        launch_plain(fill_sort_inputs_kernel, blocks, 256, 0, stream, p.vals_in, p.offsets, p.vocab, n);
    if (e != cudaSuccess) return e;
  }
  for (int j0 = 0; j0 < p.num_jobs; j0 += kSampleSortChunk) {
    const int n = p.num_jobs - j0 < kSampleSortChunk ? p.num_jobs - j0 : kSampleSortChunk;
    size_t bytes = p.sort_temp_bytes;
    cudaError_t e = cub::DeviceSegmentedRadixSort::SortPairsDescending(
        p.sort_temp, bytes, p.work + static_cast<int64_t>(j0) * p.vocab, p.keys_out, p.vals_in, p.vals_out,
        static_cast<int>(n * p.vocab), n, p.offsets, p.offsets + 1, 0, 32, stream);
    if (e != cudaSuccess) return e;
    if ((e = launch_plain(sample_walk_kernel, n, kThreads, 0, stream, p, j0)) != cudaSuccess) return e;
  }
  return launch_plain(sample_logprob_kernel, (p.num_rows + 255) / 256, 256, 0, stream, p);
}

cudaError_t launch_sample_greedy(const SampleGreedyParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.num_rows < 0 || (!p.identity && p.num_rows > kSampleGreedyMaxRows) || p.vocab <= 0 || p.vocab > INT_MAX ||
      !p.part || !p.arrivals || (p.identity && !p.token_store) || (!p.identity && !p.out.tokens))
    return cudaErrorInvalidValue;
  return launch_pdl(sample_greedy_kernel,
                    dim3(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(sample_greedy_chunks(p.vocab))),
                    kScanThreads, 0, stream, p);
}

}  // namespace ds::kernels
