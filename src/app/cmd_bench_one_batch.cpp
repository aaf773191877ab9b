// `dserve bench-one-batch`: sglang.bench_one_batch's static-batch latency benchmark: one prefill of
// batch x input_len tokens, then output_len decode steps, no scheduler and no HTTP, for every batch size x input
// length x output length listed. Output lines and the --result-filename JSON lines match SGLang's.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "app/commands.h"
#include "app/model_setup.h"
#include "bench/one_batch.h"
#include "core/env.h"
#include "ops/sampling.h"
#include "runner/mem_plan.h"
#include "runner/attn_metadata.h"
#include "runner/cuda_graph_runner.h"

#ifdef DSERVE_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace ds {
namespace {

// NVTX ranges "prefill" / "decode" around the steps, so a profiler can pick out one step's kernels
// (`ncu --nvtx --nvtx-include "decode/"`; scripts/device/prof.sh). Free when no tool is attached.
struct NvtxRange {
#ifdef DSERVE_WITH_CUDA
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
#else
  explicit NvtxRange(const char*) {}
#endif
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct RunResult {
  double prefill_latency = 0;
  std::vector<double> decode_latencies;
  double total = 0;
};

// One prefill + decode pass over `bs` random prompts in `cache` (pages from 0 up); decode steps replay
// `graphs` when set, with the tokens kept on the device when device_tokens (greedy_ids graphs).
RunResult run_once(ModelSetup& s, KvCache& cache, CudaGraphRunner* graphs, bool device_tokens, int bs, int input_len,
                   int output_len, int page_size, std::mt19937& rng) {
  const ModelConfig& cfg = s.config;
  const int pages_per_seq = (input_len + output_len + page_size - 1) / page_size;
  DS_CHECK(static_cast<int64_t>(bs) * pages_per_seq <= cache.num_pages, "bench cache too small");
  std::vector<std::vector<int32_t>> tables(bs);
  for (int b = 0; b < bs; ++b)
    for (int p = 0; p < pages_per_seq; ++p) tables[b].push_back(b * pages_per_seq + p);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(std::min<int64_t>(cfg.vocab_size, 10000)) - 1);
  RunResult r;
  // Greedy sampling on the backend, as sglang.bench_one_batch does on the GPU: only bs ids come back.
  SampleBatch greedy_batch;
  greedy_batch.vocab = cfg.vocab_size;
  for (int b = 0; b < bs; ++b) greedy_batch.rows.push_back(SampleRow{.logits_row = b});
  auto greedy = [&](const Tensor& logits) { return s.ops->sample(logits, greedy_batch).tokens; };  // waits
  // Decode steps after the first on greedy_ids graphs take the tokens the previous replay left on the device (`ids`
  // unused then) and return none: the step ends when the graph has run, as sglang.bench_one_batch's decode ends
  // with its tokens still on the GPU.
  bool ids_on_device = false;
  auto step = [&](const std::vector<int32_t>& ids, int64_t start, int64_t n) {
    if (graphs && n == 1 && graphs->can_run(bs)) {
      std::vector<DecodeSeq> seqs(bs);
      for (int b = 0; b < bs; ++b)
        seqs[b] = DecodeSeq{ids_on_device ? 0 : ids[b], static_cast<int32_t>(start),
                            tables[b][start / page_size] * page_size + static_cast<int32_t>(start % page_size),
                            tables[b].data(), pages_per_seq};
      if (device_tokens) {
        graphs->replay(seqs, ids_on_device);
        graphs->synchronize();
        ids_on_device = true;
        return std::vector<int32_t>();
      }
      return greedy(graphs->replay(seqs));
    }
    std::vector<SeqSlice> slices;
    for (int b = 0; b < bs; ++b) slices.push_back(SeqSlice{start, n, &tables[b]});
    AttnMetadata meta = build_attn_metadata(slices, page_size, *s.ops);
    Tensor host = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
    std::copy(ids.begin(), ids.end(), host.data_as<int32_t>());
    Tensor hidden = s.model->forward(s.ops->upload(host), meta, cache);
    std::vector<int64_t> last;
    for (int b = 0; b < bs; ++b) last.push_back((b + 1) * n - 1);
    return greedy(s.model->logits(s.ops->select_rows(hidden, last)));
  };
  std::vector<int32_t> prompt(static_cast<size_t>(bs) * input_len);
  for (auto& t : prompt) t = tok(rng);
  const auto t0 = Clock::now();
  std::vector<int32_t> next;
  {
    NvtxRange range("prefill");
    next = step(prompt, 0, input_len);
  }
  r.prefill_latency = seconds_since(t0);
  for (int i = 0; i < output_len - 1; ++i) {
    const auto t = Clock::now();
    NvtxRange range("decode");
    next = step(next, input_len + i, 1);
    r.decode_latencies.push_back(seconds_since(t));
  }
  r.total = seconds_since(t0);
  return r;
}

}  // namespace

int run_bench_one_batch(int argc, char** argv) {
  Flags flags;
  add_model_flags(flags);
  // Lists as sglang.bench_one_batch takes them (--batch-size 1 8 16; commas too): every batch size x input length x
  // output length runs, in that order.
  flags.add_int_list("batch-size", "1", "batch sizes (a list: --batch-size 1 8 16, or 1,8,16)");
  flags.add_int_list("input-len", "1024", "input lengths (a list)");
  flags.add_int_list("output-len", "16", "tokens generated per sequence: 1 from prefill + output-len - 1 decode steps (a list)");
  flags.add_string("result-filename", "result.jsonl",
                   "append one JSON line a run (sglang.bench_one_batch's fields) to this file; empty: none");
  flags.add_int("log-decode-step", 0, "past the first five decode steps, print every Nth step's line too (0: none)");
  flags.add_int("page-size", 64, "KV page size");
  flags.add_double("mem-fraction-static", 0, "CUDA: fraction of GPU memory for weights + KV pool (0: SGLang's default)");
  flags.add_int("max-total-tokens", 0, "KV pool capacity in tokens (0: what the runs need, checked against --mem-fraction-static on CUDA)");
  flags.add_int("chunked-prefill-size", 8192, "activation reserve estimate of the memory plan (tokens)");
  flags.add_string("run-name", "default", "name of this run (reported only)");
  flags.add_bool("disable-cuda-graph", "decode eagerly instead of replaying CUDA graphs (--device cuda)");
  flags.add_int("cuda-graph-max-bs", 0, "largest batch captured in a CUDA graph (0: the largest --batch-size, within the default from GPU memory)");
  flags.add_int_list("cuda-graph-bs", "",
                     "the decode batch sizes captured in CUDA graphs (a list; sets --cuda-graph-max-bs to its largest)");
  // The serve flags that change what a decode step runs (for measuring what they cost):
  flags.add_bool("enable-return-hidden-states", "as serve's: the decode graphs keep their hidden rows (one copy a replay)");
  flags.add_bool("enable-return-routed-experts", "as serve's: every forward records its routed experts");
  flags.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve bench-one-batch: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("bench-one-batch").c_str());
    return 0;
  }
  const std::vector<int64_t> bss = flags.get_int_list("batch-size"), lens = flags.get_int_list("input-len"),
                             outs = flags.get_int_list("output-len"), graph_bs = flags.get_int_list("cuda-graph-bs");
  const int64_t page_size = flags.get_int("page-size");
  for (const auto& [list, name] : {std::pair{&bss, "--batch-size"}, std::pair{&lens, "--input-len"},
                                   std::pair{&outs, "--output-len"}, std::pair{&graph_bs, "--cuda-graph-bs"}})
    for (int64_t v : *list)
      if (v < 1 || v > INT32_MAX) return fail(error(name, " values must be in [1, 2^31 - 1], got ", v));
  if (page_size < 1 || page_size > 4096) return fail(error("--page-size must be in [1, 4096]"));
  const int64_t log_step = flags.get_int("log-decode-step");
  if (log_step < 0) return fail(error("--log-decode-step must be >= 0"));
  // The results file is opened (appended to) before anything is loaded, so a bad path costs no model load.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> results(nullptr, &std::fclose);
  if (const std::string path = flags.get_string("result-filename"); !path.empty()) {
    results.reset(std::fopen(path.c_str(), "a"));
    if (!results)
      return fail(error("--result-filename ", path, ": cannot open for appending: ", std::strerror(errno),
                        " (--result-filename '' writes none)"));
  }
  if (Status st = check_mem_fraction_flag(flags); !st) return fail(st);
  if (Status st = check_chunked_prefill_flag(flags); !st) return fail(st);
  auto setup = setup_model(flags);
  if (!setup) return fail(setup.status());
  const int64_t output_len = *std::max_element(outs.begin(), outs.end());  // the longest run sizes the cache
  for (int64_t v : lens)
    if (v + output_len > setup->config.max_position_embeddings)
      return fail(error("--input-len ", v, " + --output-len ", output_len, " exceeds max_position_embeddings ",
                        setup->config.max_position_embeddings));
  std::mt19937 rng(static_cast<uint32_t>(flags.get_int("seed")));
  // One cache for the largest run (+ the graphs' dummy page, the last one), graphs captured once.
  const int64_t max_bs = *std::max_element(bss.begin(), bss.end());
  // As SGLang: a --cuda-graph-bs list's largest size is the graphs' max batch (0: none given).
  const int64_t graph_bs_max = graph_bs.empty() ? 0 : *std::max_element(graph_bs.begin(), graph_bs.end());
  const int64_t max_in = *std::max_element(lens.begin(), lens.end());
  const int64_t max_pages = max_bs * ((max_in + output_len + page_size - 1) / page_size);
  if (max_pages + 1 > INT32_MAX) return fail(error("--batch-size x sequence length is too large"));
  // Memory plan (as serve sizes its pool): the largest run must fit in the pool it leaves; the cache below
  // holds only what the runs need.
  const int64_t flag_total = flags.get_int("max-total-tokens");
  if (flag_total < 0) return fail(error("--max-total-tokens must be >= 0"));
  if (flag_total > 0 && flag_total < max_pages * page_size)
    return fail(error("--max-total-tokens ", flag_total, " is below the ", max_pages * page_size,
                      " tokens the largest batch needs"));
  // The cache holds what the runs need, or the --max-total-tokens pool when given (as SGLang sizes its pool by it;
  // the cache's size does not move the decode figures: BENCHMARKS.md, session 48). The last page is the graphs' dummy.
  const int64_t cache_pages = std::max(max_pages, (flag_total + page_size - 1) / page_size);
  if (setup->ops->device() == Device::kCuda && flag_total == 0) {
    MemPlanInput mi;
    if (Status st = query_gpu_memory(&mi.free_bytes, &mi.total_bytes); !st) return fail(st);
    mi.weights_bytes = mi.total_bytes - mi.free_bytes;  // weights and the CUDA context
    mi.kv_bytes_per_token = kv_bytes_per_token(*setup->ops, setup->config, static_cast<int>(page_size), setup->kv_dtype);
    mi.page_size = static_cast<int32_t>(page_size);
    mi.mem_fraction_static = flags.get_double("mem-fraction-static");
    mi.chunked_prefill_size = flags.get_int("chunked-prefill-size");
    mi.cuda_graph_max_bs = flags.get_bool("disable-cuda-graph")
                               ? 0
                               : static_cast<int32_t>(graph_bs.empty() ? max_bs : graph_bs_max);
    mi.max_running_requests = static_cast<int32_t>(max_bs);
    mi.vocab = setup->config.vocab_size;
    mi.min_tokens = max_pages * page_size;
    auto plan = plan_kv_memory(mi);
    // Named by the flags that sized it (a huge --batch-size reserves logits rows and cache for that many sequences).
    if (!plan)
      return fail(error("--batch-size ", max_bs, " x (--input-len + --output-len): ", plan.status().message()));
    std::fprintf(stderr, "%s\n", describe_mem_plan(mi, *plan).c_str());
  } else {  // no plan checked it: the pool alone against what is free
    const std::string sized_by = flag_total > 0 ? "--max-total-tokens " + std::to_string(flag_total)
                                                : "--batch-size x (--input-len + --output-len)";
    if (Status st = check_kv_pool_fits(*setup->ops, setup->config, static_cast<int>(page_size), setup->kv_dtype,
                                       cache_pages * page_size, sized_by);
        !st)
      return fail(st);
  }
  KvCache cache = make_kv_cache(*setup->ops, setup->config, static_cast<int>(page_size), static_cast<int>(cache_pages) + 1,
                                0, setup->kv_dtype);
  std::unique_ptr<CudaGraphRunner> graphs;
  if (flags.get_bool("enable-return-routed-experts")) {  // before the graphs are captured (they record too)
    if (setup->model->config().n_routed_experts <= 0) return fail(error("--enable-return-routed-experts: no routed experts"));
    setup->model->enable_routed_capture(
        std::max<int64_t>({max_bs, flags.get_int("cuda-graph-max-bs"), int64_t{graph_bs_max}, 256}));
  }
  // Graph decode steps sample greedily inside the graph and keep the tokens on the device (sglang.bench_one_batch
  // samples on the GPU and copies nothing back between steps). DSERVE_BENCH_DEVICE_TOKENS=0 (A/B runs): the
  // sampler after each replay and the tokens back to the host, as the server's steps do.
  bool device_tokens = env_flag("DSERVE_BENCH_DEVICE_TOKENS", true);
  if (setup->ops->device() == Device::kCuda && !flags.get_bool("disable-cuda-graph")) {
    int64_t flag_bs = flags.get_int("cuda-graph-max-bs");
    if (flag_bs < 0) return fail(error("--cuda-graph-max-bs must be >= 0"));
    CudaGraphOptions go;
    if (!graph_bs.empty()) {
      flag_bs = graph_bs_max;
      go.batch_sizes.assign(graph_bs.begin(), graph_bs.end());
    }
    if (std::max(flag_bs, max_bs) > Ops::kGreedyToStoreMaxRows) device_tokens = false;
    go.max_bs = static_cast<int>(flag_bs);
    go.greedy_ids = device_tokens;
    go.keep_hidden = flags.get_bool("enable-return-hidden-states");
    go.max_context = max_in + output_len;
    go.dummy_page = static_cast<int32_t>(cache_pages);
    auto g = CudaGraphRunner::create(*setup->model, *setup->ops, cache, go);
    if (!g) {
      std::fprintf(stderr, "dserve bench-one-batch: CUDA graphs off: %s\n", g.status().message().c_str());
    } else {
      // From GPU memory (no --cuda-graph-max-bs): nothing beyond the largest batch benchmarked is ever replayed, so
      // none is captured. An explicit --cuda-graph-max-bs captures up to it, as sglang.bench_one_batch does.
      if (flag_bs == 0 && (*g)->max_bs() > max_bs) {
        go.max_bs = static_cast<int>(max_bs);
        g = CudaGraphRunner::create(*setup->model, *setup->ops, cache, go);
        if (!g) return fail(g.status());
      }
      if (Status st = (*g)->capture(); st.is_ok())
        graphs = std::move(*g);
      else
        std::fprintf(stderr, "dserve bench-one-batch: CUDA graphs off: %s\n", st.message().c_str());
    }
  }
  const std::string run_name = flags.get_string("run-name");
  for (int64_t bs : bss)
    for (int64_t in : lens)
      for (int64_t out : outs) {
        // Warm-up pass (SGLang runs one too), then the measured one.
        run_once(*setup, cache, graphs.get(), device_tokens, static_cast<int>(bs), static_cast<int>(in),
                 std::min<int>(static_cast<int>(out), 4), static_cast<int>(page_size), rng);
        RunResult r = run_once(*setup, cache, graphs.get(), device_tokens, static_cast<int>(bs), static_cast<int>(in),
                               static_cast<int>(out), static_cast<int>(page_size), rng);
        const bench::OneBatchFigures f = bench::one_batch_figures(r.prefill_latency, r.decode_latencies, r.total, bs, in, out);
        std::printf("Prefill. latency: %.5f s, throughput: %.2f token/s\n", f.prefill_latency, f.prefill_throughput);
        for (size_t i = 0; i < r.decode_latencies.size(); ++i)
          if (i < 5 || (log_step > 0 && i % static_cast<size_t>(log_step) == 0))
            std::printf("Decode %zu. Batch size: %lld, latency: %.5f s, throughput: %.2f token/s\n", i,
                        static_cast<long long>(bs), r.decode_latencies[i], bs / r.decode_latencies[i]);
        if (f.has_decode)
          std::printf("Decode.  median latency: %.5f s, median throughput: %.2f token/s\n", f.median_decode_latency,
                      f.median_decode_throughput);
        std::printf("Total. latency: %.3f s, throughput: %.2f token/s\n", f.total_latency, f.overall_throughput);
        std::fflush(stdout);
        if (results) {
          const std::string line = bench::one_batch_result_json(run_name, f) + "\n";
          if (std::fwrite(line.data(), 1, line.size(), results.get()) != line.size() || std::fflush(results.get()) != 0)
            return fail(error("--result-filename ", flags.get_string("result-filename"), ": write failed: ",
                              std::strerror(errno)));
        }
      }
  return 0;
}

}  // namespace ds
