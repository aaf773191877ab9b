// CUDA-graph decode (cuda_graph_runner.h): static input buffers, capture per padded batch size, replay.
// Without the CUDA backend only the batch-size helpers exist and create() reports why.
#include "runner/cuda_graph_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/logging.h"
#include "runner/graph_inputs.h"
#ifdef DSERVE_WITH_CUDA
#include "ops/cuda/cuda_runtime.h"
#endif

namespace ds {

#ifdef DSERVE_WITH_CUDA
namespace {
constexpr int64_t kOneCopyMaxBytes = 32 << 10;  // write_inputs: one copy up to here (~1-2 us of PCIe at most)
}  // namespace
#endif

std::vector<int> cuda_graph_batch_sizes(int max_bs, bool speculative) {
  std::vector<int> out;
  if (max_bs < 1) return out;
  auto add = [&](int b) {
    if (b <= max_bs && (out.empty() || b > out.back())) out.push_back(b);
  };
  if (speculative) {
    for (int b = 1; b <= 8; ++b) add(b);
    for (int b = 10; b <= 32; b += 2) add(b);
    for (int b = 40; b <= 64; b += 4) add(b);
    for (int b = 72; b <= 256; b += 8) add(b);
    for (int b = 272; b <= max_bs; b += 16) add(b);
  } else {
    for (int b : {1, 2, 4, 8, 12}) add(b);
    for (int b = 16; b <= 256; b += 8) add(b);
    for (int b = 272; b <= 496; b += 16) add(b);
    for (int b = 512; b <= max_bs; b += 32) add(b);
  }
  if (out.back() != max_bs) out.push_back(max_bs);
  return out;
}

int default_cuda_graph_max_bs(double gpu_memory_bytes) {
  const double gb = gpu_memory_bytes / (1024.0 * 1024.0 * 1024.0);
  if (gb < 20) return 8;
  if (gb < 35) return 24;
  if (gb < 60) return 32;
  if (gb < 160) return 256;
  return 512;
}

std::vector<int> graph_capture_sizes(std::vector<int> requested, int max_bs, bool speculative) {
  if (requested.empty()) return cuda_graph_batch_sizes(max_bs, speculative);
  std::sort(requested.begin(), requested.end());
  requested.erase(std::unique(requested.begin(), requested.end()), requested.end());
  std::vector<int> out;
  for (int b : requested)
    if (b >= 1 && b <= max_bs) out.push_back(b);
  if (max_bs >= 1 && requested.back() > max_bs && (out.empty() || out.back() != max_bs)) out.push_back(max_bs);
  return out;
}

int padded_batch_size(const std::vector<int>& sizes, int n) {
  auto it = std::lower_bound(sizes.begin(), sizes.end(), n);
  return it == sizes.end() ? -1 : *it;
}

#ifdef DSERVE_WITH_CUDA

struct CudaGraphRunner::Impl {
  // Where each device input lives in `io` (max_bs, rows a sequence q, draft steps, table pages, offsets) and how a
  // batch is written into its host copies (runner/graph_inputs.h).
  GraphInputLayout lay;
  Tensor io;  // the device inputs, I32
  Tensor drafts;  // [steps * max_bs] I32: draft j of sequence i at j * max_bs + i
  PinnedSlot drafts_host;
  // Pinned, two alternating buffers (with overlap scheduling the next step's inputs are written while the
  // previous copy may not have run yet), laid out as `io` (q_starts written once), so that a small step's inputs
  // go over in one copy.
  PinnedSlot in[2];                      // `done`: the last input copy out of in[i] finished
  bool copy_pending[2] = {false, false};
  int cur = 0;                           // the buffer the next write_inputs uses
  Tensor logits;                  // [max_bs * q, vocab] F32: the graphs' output
  Tensor hidden;                  // [max_bs * q, d]: the forward's output rows (tokens_per_seq > 1 only)
  std::vector<cudaGraph_t> graphs;
  std::vector<cudaGraphExec_t> execs;  // by index in sizes_
  // DSERVE_GRAPH_TIMING=1 (a measurement switch): per replay, the device time from the input copy to the graph's end
  // and the gap since the previous replay's end (sampling, copies back, host turnaround), so a benchmark can tell the
  // graph from what runs around it; medians per batch size are logged when the runner goes. Each replay waits for the
  // previous one's end event (bench-one-batch waits anyway; under the server's overlap schedule this serialises).
  cudaEvent_t timing[3] = {nullptr, nullptr, nullptr};  // start, end, previous end
  int timing_bs = 0;  // batch size of the pending replay; 0: none pending
  bool have_prev_end = false;
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> timing_ms;  // bs -> (graph, gap before it)
  std::map<int, std::vector<float>> launch_us;  // bs -> host time of the input copy + cudaGraphLaunch calls

  void take_timing() {
    if (!timing_bs || cudaEventSynchronize(timing[1]) != cudaSuccess) return;
    float ms = 0, gap = -1;
    auto& t = timing_ms[timing_bs];
    if (cudaEventElapsedTime(&ms, timing[0], timing[1]) == cudaSuccess) t.first.push_back(ms);
    if (have_prev_end && cudaEventElapsedTime(&gap, timing[2], timing[0]) == cudaSuccess) t.second.push_back(gap);
    std::swap(timing[1], timing[2]);
    have_prev_end = true;
    timing_bs = 0;
  }
  static float median(std::vector<float> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  ~Impl() {
    if (timing[0]) {
      take_timing();
      for (const auto& [bs, t] : timing_ms)
        DS_INFO("CUDA graph timing, batch ", bs, ": ", t.first.size(),
                " replays, median device time (input copy + graph) ", median(t.first) * 1000.0f,
                " us, median gap since the previous replay ", median(t.second) * 1000.0f,
                " us, median host time of the input copy and launch calls ", median(launch_us[bs]), " us");
      for (cudaEvent_t e : timing) cudaEventDestroy(e);
    }
    for (cudaGraphExec_t e : execs)
      if (e) cudaGraphExecDestroy(e);
    for (cudaGraph_t g : graphs)
      if (g) cudaGraphDestroy(g);
    for (int i = 0; i < 2; ++i) {
      if (copy_pending[i]) (void)cudaEventSynchronize(in[i].done);
      release_pinned(in[i]);
    }
    if (drafts_host.host) release_pinned(drafts_host);
  }
  int32_t* dev(int64_t off) const { return io.data_as<int32_t>() + off; }
};

CudaGraphRunner::CudaGraphRunner(DeepseekModel& model, Ops& ops, const KvCache& cache, CudaGraphOptions opts)
    : model_(model), ops_(ops), cache_(cache), opts_(opts) {}

CudaGraphRunner::~CudaGraphRunner() = default;

Result<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::create(DeepseekModel& model, Ops& ops,
                                                                 const KvCache& cache, CudaGraphOptions o) {
  if (ops.device() != Device::kCuda) return error("CUDA graphs need --device cuda");
  if (!env_flag("DSERVE_MOE_GROUPED", true))
    return error("CUDA graphs need the grouped MoE kernel (DSERVE_MOE_GROUPED=0 is set)");
  if (cache.page_size < 1 || o.dummy_page < 0 || o.dummy_page >= cache.num_pages)
    return error("CUDA graphs need a dummy cache page (got ", o.dummy_page, " of ", cache.num_pages, ")");
  if (o.max_context < 1) return error("CUDA graphs: max_context must be >= 1");
  if (o.tokens_per_seq < 1 || o.tokens_per_seq > 16)
    return error("CUDA graphs: tokens_per_seq must be in [1, 16], got ", o.tokens_per_seq);
  if (o.tokens_per_seq > 1 && o.greedy_ids) return error("CUDA graphs: greedy_ids needs tokens_per_seq 1");
  if (o.draft_steps < 0 || o.draft_steps > 16) return error("CUDA graphs: draft_steps must be in [0, 16]");
  if (o.draft_steps > 0) {
    if (o.greedy_ids || o.token_store.defined()) return error("CUDA draft graphs take neither greedy_ids nor a token store");
    if (model.num_mtp_layers() < 1 || static_cast<int>(cache.latent.size()) <= model.config().num_hidden_layers)
      return error("CUDA draft graphs need the MTP layer and its cache");
    if (!o.draft_hidden.defined() || o.draft_hidden.ndim() != 2 || o.draft_hidden.dim(1) != model.config().hidden_size)
      return error("CUDA draft graphs need the verify graphs' hidden rows");
  }
  for (int b : o.batch_sizes)
    if (b < 1) return error("--cuda-graph-bs values must be >= 1, got ", b);
  if (o.max_bs <= 0 && !o.batch_sizes.empty()) o.max_bs = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  if (o.max_bs <= 0) {
    size_t free_b = 0, total_b = 0;
    cuda_stream();  // current device
    DS_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    o.max_bs = default_cuda_graph_max_bs(static_cast<double>(total_b));
  }
  // DSERVE_GRAPH_PLAN_CONTEXT: experiment switch (device benchmarks) for the context the split plan assumes; it may
  // exceed max_context (the plan only sizes the splits and their scratch), so bench-one-batch can take the server's.
  if (const int64_t e = env_int("DSERVE_GRAPH_PLAN_CONTEXT", 0); o.plan_context <= 0 && e > 0 && e <= INT32_MAX)
    o.plan_context = static_cast<int>(e);
  if (o.plan_context <= 0) o.plan_context = static_cast<int>(std::min<int64_t>(o.max_context, 4096));
  std::unique_ptr<CudaGraphRunner> r(new CudaGraphRunner(model, ops, cache, o));
  r->sizes_ = graph_capture_sizes(o.batch_sizes, o.max_bs, o.tokens_per_seq > 1);
  auto impl = std::make_unique<Impl>();
  // Speculative decoding's sequences hold pages past the context: the drafts' q - 1 positions and as many for the
  // draft steps' lookahead (StepPlan::SeqStep::num_pages).
  const int64_t max_pages = (o.max_context + 2 * (o.tokens_per_seq - 1) + cache.page_size - 1) / cache.page_size;
  const GraphInputLayout& lay = impl->lay = GraphInputLayout::make(o.max_bs, o.tokens_per_seq, o.draft_steps, max_pages);
  const int64_t rows = static_cast<int64_t>(o.max_bs) * lay.q;
  if (lay.steps > 0 && o.draft_hidden.dim(0) < rows)
    return error("CUDA draft graphs: hidden rows ", o.draft_hidden.dim(0), " < ", rows);
  impl->io = ops.empty({lay.size}, DType::kI32);
  for (PinnedSlot& slot : impl->in) {
    slot = acquire_pinned(static_cast<size_t>(lay.size) * sizeof(int32_t));
    lay.init(static_cast<int32_t*>(slot.host));  // zeros and the q_starts (constant)
  }
  {  // the constant inputs once (q_starts; the block table zeroed)
    cudaStream_t s = cuda_stream();
    DS_CUDA_CHECK(cudaMemcpyAsync(impl->io.data(), impl->in[0].host, impl->io.nbytes(), cudaMemcpyHostToDevice, s));
    DS_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  if (impl->lay.steps > 0) {
    impl->drafts = ops.empty({static_cast<int64_t>(impl->lay.steps) * o.max_bs}, DType::kI32);
    impl->drafts_host = acquire_pinned(static_cast<size_t>(impl->drafts.nbytes()));
  }
  if (impl->lay.steps == 0) impl->logits = ops.empty({rows, model.config().vocab_size}, DType::kF32);
  if (env_flag("DSERVE_GRAPH_TIMING", false))
    for (cudaEvent_t& ev : impl->timing) DS_CUDA_CHECK(cudaEventCreate(&ev));
  impl->graphs.assign(r->sizes_.size(), nullptr);
  impl->execs.assign(r->sizes_.size(), nullptr);
  r->impl_ = std::move(impl);
  return r;
}

void CudaGraphRunner::write_inputs(const std::vector<DecodeSeq>& seqs, int bs, bool keep_ids) {
  Impl& im = *impl_;
  const int page_size = cache_.page_size;
  const int32_t dummy_page = opts_.dummy_page;
  const int hb = im.cur;  // (the batch's bounds: GraphInputLayout::fill checks them)
  im.cur ^= 1;
  if (im.copy_pending[hb]) DS_CUDA_CHECK(cudaEventSynchronize(im.in[hb].done));  // in[hb] is free again
  const int64_t M = im.lay.max_bs;
  int32_t* ids = static_cast<int32_t*>(im.in[hb].host);
  const int64_t width = im.lay.fill(ids, seqs, bs, page_size, dummy_page);  // table columns written per row
  int32_t* table = ids + im.lay.table_off;
  cudaStream_t s = cuda_stream();
  const int64_t skip = keep_ids ? M : 0;  // the ids the graph wrote stay (q == 1)
  // One copy of everything up to the last row's table when that is small (each copy is a host call and a DMA the
  // graph waits for: bench-one-batch's batch-1 step waits ~2 us less); else the header, then the rows' used columns.
  // DSERVE_GRAPH_ONE_COPY=0 (A/B runs): always the two copies.
  const bool one_copy = env_flag("DSERVE_GRAPH_ONE_COPY", true);
  const int64_t whole = im.lay.table_off + static_cast<int64_t>(bs) * im.lay.max_pages;
  if (one_copy && (whole - skip) * static_cast<int64_t>(sizeof(int32_t)) <= kOneCopyMaxBytes) {
    DS_CUDA_CHECK(
        cudaMemcpyAsync(im.dev(skip), ids + skip, sizeof(int32_t) * (whole - skip), cudaMemcpyHostToDevice, s));
  } else {
    DS_CUDA_CHECK(
        cudaMemcpyAsync(im.dev(skip), ids + skip, sizeof(int32_t) * (im.lay.table_off - skip), cudaMemcpyHostToDevice, s));
    DS_CUDA_CHECK(cudaMemcpy2DAsync(im.dev(im.lay.table_off), sizeof(int32_t) * im.lay.max_pages, table,
                                    sizeof(int32_t) * im.lay.max_pages, sizeof(int32_t) * width, bs,
                                    cudaMemcpyHostToDevice, s));
  }
  DS_CUDA_CHECK(cudaEventRecord(im.in[hb].done, s));
  im.copy_pending[hb] = true;
}

namespace {

// DSERVE_L2_PERSIST_ARENA=1 (read per capture; opt-in: a tie on V2-Lite, a loss at V3-shaped batch 1, BENCHMARKS
// session 38): every kernel node of a decode graph gets an L2 access-policy window over the graph region (the step's
// activations: the residual stream, norm outputs, split partials, the shared expert's output) whose hits persist, so
// the weights streaming through the L2 (~80-146 MB a V2-Lite layer against 60 MB) do not evict what the chain's
// latency-bound kernels read back launches later. The persisting carve-out (cudaLimitPersistingL2CacheSize) grows to
// the window, within the device's maximum; hit ratio = carve-out / window. Returns the nodes given the window (0
// without device support).
int64_t apply_l2_window(cudaGraph_t g, void* base, size_t bytes) {
  int dev = 0, max_window = 0, max_persist = 0;
  if (!base || bytes == 0 || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev) != cudaSuccess ||
      max_window <= 0 || max_persist <= 0)
    return 0;
  const size_t window = std::min(bytes, static_cast<size_t>(max_window));
  const size_t persist = std::min(window, static_cast<size_t>(max_persist));
  size_t current = 0;
  if (cudaDeviceGetLimit(&current, cudaLimitPersistingL2CacheSize) != cudaSuccess ||
      (current < persist && cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, persist) != cudaSuccess)) {
    (void)cudaGetLastError();  // no carve-out here (e.g. a shared or partitioned GPU): graphs without the window
    DS_WARN("DSERVE_L2_PERSIST_ARENA: the persisting L2 carve-out could not be set; graphs captured without it");
    return 0;
  }
  cudaKernelNodeAttrValue v{};
  v.accessPolicyWindow.base_ptr = base;
  v.accessPolicyWindow.num_bytes = window;
  v.accessPolicyWindow.hitRatio = static_cast<float>(static_cast<double>(persist) / static_cast<double>(window));
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  size_t n = 0;
  DS_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) DS_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  int64_t set = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    DS_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    if (t != cudaGraphNodeTypeKernel) continue;
    DS_CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &v));
    ++set;
  }
  return set;
}

// Adds graph g's node and edge counts to st (statistics only: a failing query leaves them short, never fails the
// capture).
void count_graph(cudaGraph_t g, CudaGraphStats* st) {
  size_t n = 0;
  if (cudaGraphGetNodes(g, nullptr, &n) != cudaSuccess) return;
  std::vector<cudaGraphNode_t> nodes(n);
  if (n && cudaGraphGetNodes(g, nodes.data(), &n) != cudaSuccess) return;
  std::map<cudaGraphNode_t, cudaGraphNodeType> type;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) return;
    type[node] = t;
    if (t == cudaGraphNodeTypeKernel)
      ++st->kernel_nodes;
    else if (t == cudaGraphNodeTypeMemAlloc || t == cudaGraphNodeTypeMemFree)
      ++st->memory_nodes;
    else
      ++st->other_nodes;
  }
  size_t e = 0;
  if (cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &e) != cudaSuccess) return;
  std::vector<cudaGraphNode_t> from(e), to(e);
  std::vector<cudaGraphEdgeData> data(e);
  if (e && cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &e) != cudaSuccess) return;
  for (size_t i = 0; i < e; ++i) {
    if (type[from[i]] != cudaGraphNodeTypeKernel || type[to[i]] != cudaGraphNodeTypeKernel) continue;
    ++st->kernel_edges;
    if (data[i].type == cudaGraphDependencyTypeProgrammatic) ++st->programmatic_edges;
  }
}

}  // namespace

Status CudaGraphRunner::capture() {
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  cudaStream_t stream = cuda_stream();
  // Draft runners: the MTP layer over the verify step's rows, then the chain (one greedy draft a step).
  auto run_drafts = [&](int bs, const AttnMetadata& m) {
    const int64_t T = static_cast<int64_t>(bs) * im.lay.q;
    const int64_t M = im.lay.max_bs;
    const int64_t vocab = model_.config().vocab_size;
    Tensor z = model_.mtp_forward(0, im.io.rows(0, T), opts_.draft_hidden.rows(0, T), m, cache_,
                                  AttnMode::kAbsorbed);                                // [T, d]
    Tensor zn = model_.mtp_norm(0, ops_.embedding(z, im.io.rows(im.lay.last_off, im.lay.last_off + bs)));  // [bs, d]
    for (int j = 0; j < im.lay.steps; ++j) {
      Tensor draft = im.drafts.rows(int64_t{j} * M, int64_t{j} * M + bs);  // [bs] I32
      ops_.greedy_to_store_(model_.mtp_head(0, zn), vocab, draft);
      if (j + 1 == im.lay.steps) break;
      const int64_t k = int64_t{j} * M;
      AttnMetadata c;
      c.num_seqs = bs;
      c.num_tokens = bs;
      c.page_size = cache_.page_size;
      c.max_seq_len = opts_.plan_context;
      c.max_q_len = 1;
      c.positions = im.io.rows(im.lay.cpos_off + k, im.lay.cpos_off + k + bs);
      c.slot_mapping = im.io.rows(im.lay.cslot_off + k, im.lay.cslot_off + k + bs);
      c.seq_lens = im.io.rows(im.lay.clen_off + k, im.lay.clen_off + k + bs);
      c.q_starts = im.io.rows(im.lay.cq_off, im.lay.cq_off + bs + 1);
      c.block_table = m.block_table;
      zn = model_.mtp_norm(0, model_.mtp_forward(0, draft, zn, c, cache_, AttnMode::kAbsorbed));  // [bs, d]
    }
  };
  // One forward over the static buffers for `bs` sequences (bs * q rows); its logits are written into the static
  // output, its hidden rows copied into theirs (q > 1).
  auto run = [&](int bs) {
    const int64_t T = static_cast<int64_t>(bs) * im.lay.q;
    AttnMetadata m;
    m.num_seqs = bs;
    m.num_tokens = static_cast<int>(T);
    m.page_size = cache_.page_size;
    m.max_seq_len = opts_.plan_context;  // sizes only the split-KV plan; any seq_lens work at replay
    m.max_q_len = im.lay.q;
    m.positions = im.io.rows(im.lay.pos_off, im.lay.pos_off + T);
    m.slot_mapping = im.io.rows(im.lay.slot_off, im.lay.slot_off + T);
    m.seq_lens = im.io.rows(im.lay.len_off, im.lay.len_off + bs);
    m.q_starts = im.io.rows(im.lay.q_off, im.lay.q_off + bs + 1);
    m.real_rows = im.io.rows(im.lay.real_off, im.lay.real_off + 1);
    m.block_table = im.io.rows(im.lay.table_off, im.lay.table_off + bs * im.lay.max_pages).reshape({bs, im.lay.max_pages});
    Tensor ids = im.io.rows(0, T);  // [T] I32
    if (im.lay.steps > 0) {
      run_drafts(bs, m);
      return;
    }
    // Placeholder ids (overlap scheduling) take the token store's entries inside the graph.
    if (opts_.token_store.defined()) ops_.resolve_tokens_(ids, opts_.token_store);
    Tensor hidden = model_.forward(ids, m, cache_, AttnMode::kAbsorbed);  // [T, d]
    Tensor logits = im.logits.rows(0, T);  // [T, vocab] F32: every graph writes the shared output buffer
    model_.logits_into(hidden, logits);
    if (opts_.greedy_ids) ops_.greedy_to_store_(logits, model_.config().vocab_size, ids);  // next replay's tokens
    if (keeps_hidden()) {
      // The first run is the largest batch's warm-up, outside any capture: the buffer is made there.
      if (!im.hidden.defined()) im.hidden = ops_.empty({im.lay.max_bs * int64_t{im.lay.q}, hidden.dim(1)}, hidden.dtype());
      DS_CUDA_CHECK(cudaMemcpyAsync(im.hidden.data(), hidden.data(), hidden.nbytes(), cudaMemcpyDeviceToDevice,
                                    cuda_stream()));
    }
  };
  // The captures' allocations come from the graph arena (cuda_runtime.h: no memory nodes between the kernels, so
  // their PDL edges stay programmatic), sized by the eager warm-up of the same forward (the default;
  // DSERVE_GRAPH_ARENA=0: the stream-ordered allocator's alloc / free nodes).
  const bool arena = graph_arena_enabled();
  // DSERVE_GRAPH_ARENA_FIRST_KIB=n (tests only): every capture's first attempt on a fresh region of n KiB, too
  // small for the forward, so the recapture below runs (CudaGraphTest.ReplayMatchesEagerDecode). At most 1 GiB.
  const int64_t forced_kib = std::min<int64_t>(env_int("DSERVE_GRAPH_ARENA_FIRST_KIB", -1), int64_t{1} << 20);
  stats_ = CudaGraphStats{};
  const bool l2_window = env_flag("DSERVE_L2_PERSIST_ARENA", false);
  void* region_base = nullptr;  // the graph region of the newest capture
  // Instantiated after every capture, smallest first: the batch-1 graph instantiated last (after 2, 4 and 8) ran
  // ~20 us a step slower on the device than instantiated first (BENCHMARKS.md, session 48; the driver's reason is not
  // known). DSERVE_GRAPH_INSTANTIATE_EACH=1 (A/B runs): each right after its capture, largest first, as before.
  const bool instantiate_each = env_flag("DSERVE_GRAPH_INSTANTIATE_EACH", false);
  auto instantiate = [&](int i) -> Status {
    const cudaError_t inst = cudaGraphInstantiate(&im.execs[i], im.graphs[i], cuda_graph_instantiate_flags());
    if (inst != cudaSuccess)
      return error("CUDA graph instantiation for batch size ", sizes_[i], " failed: ", cudaGetErrorString(inst));
    DS_CUDA_CHECK(cudaGraphUpload(im.execs[i], stream));
    return Status::ok();
  };
  // Captured largest first (as SGLang): later, smaller graphs reuse the memory the large ones took.
  for (int i = static_cast<int>(sizes_.size()) - 1; i >= 0; --i) {
    const int bs = sizes_[i];
    write_inputs({}, bs);
    if (arena) begin_graph_alloc_measure();
    run(bs);  // warm-up: lazily built tables, kernel attributes, GEMM heuristics happen outside the capture
    size_t need = arena ? end_graph_alloc_measure() : 0;
    DS_CUDA_CHECK(cudaStreamSynchronize(stream));
    // The warm-up's placement is the first guess (with slack); a capture whose allocations do not all fit (a path
    // that differs while capturing, e.g. the MoE layer past its grouped size) is captured again on a fresh region of
    // exactly what its own sequence needed.
    cudaGraph_t graph = nullptr;
    for (int attempt = 0;; ++attempt) {
      if (arena && attempt == 0 && forced_kib >= 0)
        begin_graph_alloc(static_cast<size_t>(forced_kib) << 10, /*fresh_region=*/true);
      else if (arena)
        begin_graph_alloc(attempt == 0 ? need + need / 8 + (size_t{2} << 20) : need, attempt > 0);
      DS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      run(bs);
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      const GraphAllocStats a = arena ? end_graph_alloc() : GraphAllocStats{};
      if (end != cudaSuccess)
        return error("CUDA graph capture of batch size ", bs, " failed: ", cudaGetErrorString(end));
      if (!arena) break;
      stats_.arena_bytes = a.region_bytes;
      region_base = a.region_base;
      if (a.fallbacks == 0 || attempt == 1) {
        stats_.arena_fallbacks += a.fallbacks;
        break;
      }
      cudaGraphDestroy(graph);
      graph = nullptr;
      need = a.needed;
      ++stats_.arena_recaptures;
    }
    if (arena && l2_window) stats_.l2_window_nodes += apply_l2_window(graph, region_base, stats_.arena_bytes);
    im.graphs[i] = graph;
    count_graph(graph, &stats_);
    // DSERVE_GRAPH_DOT=prefix (diagnostics): each captured graph as Graphviz (nodes with their launch parameters,
    // edges), in prefix_bs<N>.dot.
    if (const char* dot = env_text("DSERVE_GRAPH_DOT")) {
      const std::string path = std::string(dot) + "_bs" + std::to_string(bs) + ".dot";
      if (cudaGraphDebugDotPrint(graph, path.c_str(), cudaGraphDebugDotFlagsVerbose) != cudaSuccess) {
        (void)cudaGetLastError();
        DS_WARN("DSERVE_GRAPH_DOT: could not write ", path);
      }
    }
    if (instantiate_each)
      if (Status st = instantiate(i); !st) return st;
  }
  for (int i = 0; !instantiate_each && i < static_cast<int>(sizes_.size()); ++i)
    if (Status st = instantiate(i); !st) return st;
  DS_CUDA_CHECK(cudaStreamSynchronize(stream));
  capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opts_.verbose)
    DS_INFO("captured CUDA graphs for ", sizes_.size(), " batch sizes (1..", max_bs(), ") in ", capture_seconds_,
            " s: ", stats_.kernel_nodes, " kernel nodes, ", stats_.memory_nodes, " memory nodes, ",
            stats_.programmatic_edges, " of ", stats_.kernel_edges, " kernel-to-kernel edges programmatic",
            arena ? ", graph arena " : "", arena ? std::to_string(stats_.arena_bytes >> 20) + " MiB" : "",
            stats_.arena_fallbacks ? ", " + std::to_string(stats_.arena_fallbacks) + " allocations missed it" : "",
            stats_.arena_recaptures ? ", " + std::to_string(stats_.arena_recaptures) + " recaptured on a larger one" : "",
            stats_.l2_window_nodes ? ", L2 window on " + std::to_string(stats_.l2_window_nodes) + " kernel nodes" : "");
  return Status::ok();
}

void CudaGraphRunner::synchronize() { DS_CUDA_CHECK(cudaStreamSynchronize(cuda_stream())); }

Tensor CudaGraphRunner::replay(const std::vector<DecodeSeq>& seqs, bool ids_on_device) {
  Impl& im = *impl_;
  DS_CHECK(!ids_on_device || opts_.greedy_ids, "replay with device ids needs greedy_ids graphs");
  DS_CHECK(im.lay.steps == 0, "replay on a draft graph runner (replay_drafts)");
  const int n = static_cast<int>(seqs.size());
  const int bs = padded_batch_size(sizes_, n);
  DS_CHECK(n >= 1 && bs > 0, "no CUDA graph for a decode batch of ", n);
  const size_t idx = static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), bs) - sizes_.begin());
  DS_CHECK(im.execs[idx], "CUDA graph for batch size ", bs, " not captured");
  if (im.timing[0]) {
    im.take_timing();  // the previous replay (its end and this start bracket the gap)
    DS_CUDA_CHECK(cudaEventRecord(im.timing[0], cuda_stream()));
  }
  const auto host0 = std::chrono::steady_clock::now();
  write_inputs(seqs, bs, ids_on_device);
  DS_CUDA_CHECK(cudaGraphLaunch(im.execs[idx], cuda_stream()));
  if (im.timing[0]) {
    im.launch_us[bs].push_back(
        std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - host0).count());
    DS_CUDA_CHECK(cudaEventRecord(im.timing[1], cuda_stream()));
    im.timing_bs = bs;
  }
  return im.logits.rows(0, static_cast<int64_t>(bs) * im.lay.q);
}

std::vector<std::vector<int32_t>> CudaGraphRunner::replay_drafts(const std::vector<DecodeSeq>& seqs) {
  Impl& im = *impl_;
  DS_CHECK(im.lay.steps > 0, "replay_drafts on a runner without draft graphs");
  const int n = static_cast<int>(seqs.size());
  const int bs = padded_batch_size(sizes_, n);
  DS_CHECK(n >= 1 && bs > 0, "no CUDA draft graph for a batch of ", n);
  const size_t idx = static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), bs) - sizes_.begin());
  DS_CHECK(im.execs[idx], "CUDA draft graph for batch size ", bs, " not captured");
  cudaStream_t s = cuda_stream();
  write_inputs(seqs, bs);
  DS_CUDA_CHECK(cudaGraphLaunch(im.execs[idx], s));
  DS_CUDA_CHECK(cudaMemcpyAsync(im.drafts_host.host, im.drafts.data(), im.drafts.nbytes(), cudaMemcpyDeviceToHost, s));
  DS_CUDA_CHECK(cudaStreamSynchronize(s));
  const int32_t* h = static_cast<const int32_t*>(im.drafts_host.host);
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(im.lay.steps));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < im.lay.steps; ++j) out[i][j] = h[static_cast<int64_t>(j) * im.lay.max_bs + i];
  return out;
}

Tensor CudaGraphRunner::hidden() const {
  DS_CHECK(impl_->hidden.defined(), "CUDA graph hidden rows: a tokens_per_seq 1 runner without keep_hidden keeps none");
  return impl_->hidden;
}

#else  // no CUDA backend

struct CudaGraphRunner::Impl {};
CudaGraphRunner::CudaGraphRunner(DeepseekModel& model, Ops& ops, const KvCache& cache, CudaGraphOptions opts)
    : model_(model), ops_(ops), cache_(cache), opts_(opts) {}
CudaGraphRunner::~CudaGraphRunner() = default;
Result<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::create(DeepseekModel&, Ops&, const KvCache&,
                                                                 CudaGraphOptions) {
  return error("CUDA graphs need a build with the CUDA backend");
}
Status CudaGraphRunner::capture() { return error("CUDA graphs need a build with the CUDA backend"); }
void CudaGraphRunner::write_inputs(const std::vector<DecodeSeq>&, int, bool) {}
void CudaGraphRunner::synchronize() {}
Tensor CudaGraphRunner::hidden() const { return Tensor(); }
std::vector<std::vector<int32_t>> CudaGraphRunner::replay_drafts(const std::vector<DecodeSeq>&) { return {}; }
Tensor CudaGraphRunner::replay(const std::vector<DecodeSeq>&, bool) {
  DS_CHECK(false, "CUDA graphs need a build with the CUDA backend");
  return Tensor();
}

#endif

}  // namespace ds
