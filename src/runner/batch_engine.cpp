// The engine loop: plan with the Scheduler under a mutex, execute on the model without it, apply results,
// and hand events to the API layer's callbacks outside the lock.
#include "runner/batch_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/env.h"
#include "core/logging.h"
#ifdef DSERVE_WITH_CUDA
#include "dist/cuda/nccl_group.h"
#include "ops/cuda/cuda_runtime.h"
#endif
#include "model/deepseek_model.h"
#include "model/quantize.h"
#include "dist/local_group.h"
#include "model/tp_shard.h"
#include "runner/batch_runner.h"
#include "runner/tp_ranks.h"
#include "runner/fault_inject.h"
#include "runner/mem_plan.h"

namespace ds {
namespace {

// Data-parallel attention: how long an idle group sleeps between agreements when no rank rings (a safety net: work
// rings the group's doorbell). Was a 2 ms poll (~2% of a core for an idle server).
constexpr int64_t kDpIdleWaitMs = 100;

struct RankGraphs {
  std::unique_ptr<CudaGraphRunner> verify;  // decode graphs (verify graphs with speculative decoding)
  std::unique_ptr<CudaGraphRunner> drafts;  // the MTP drafter's, over the verify graphs' hidden rows
};

// One rank's CUDA graphs, captured on the calling thread (bound to the rank's device): the decode (or verify) graphs
// up to the running limit, and with MTP drafting the drafter's at the same batch sizes. What could not be captured
// is left null, the reason in *why (the server then runs eager).
RankGraphs capture_rank_graphs(DeepseekModel& model, Ops& ops, KvCache& cache, BatchRunner& runner, CudaGraphOptions go,
                               int32_t max_running, bool mtp_drafts, std::string* why) {
  ops.bind_thread();
  RankGraphs out;
  go.token_store = runner.token_store();
  auto g = CudaGraphRunner::create(model, ops, cache, go);
  if (!g) {
    *why = "CUDA graphs off: " + g.status().message();
    return out;
  }
  if (go.max_bs == 0 || go.max_bs > max_running) {
    go.max_bs = std::min(max_running, (*g)->max_bs());  // no batch beyond the request limit
    g = CudaGraphRunner::create(model, ops, cache, go);
    if (!g) {
      *why = "CUDA graphs off: " + g.status().message();
      return out;
    }
  }
  if (Status st = (*g)->capture(); !st.is_ok()) {
    *why = "CUDA graphs off: " + st.message();
    return out;
  }
  out.verify = std::move(*g);
  // DSERVE_SPEC_DRAFT_GRAPHS=0 (A/B runs): the eager drafter after graph verify steps too.
  if (mtp_drafts && env_flag("DSERVE_SPEC_DRAFT_GRAPHS", true)) {
    CudaGraphOptions dgo = go;
    dgo.max_bs = out.verify->max_bs();
    dgo.batch_sizes = out.verify->batch_sizes();
    dgo.token_store = Tensor();
    dgo.draft_steps = go.tokens_per_seq - 1;
    dgo.draft_hidden = out.verify->hidden();
    auto dg = CudaGraphRunner::create(model, ops, cache, dgo);
    Status st = dg ? (*dg)->capture() : dg.status();
    if (st.is_ok())
      out.drafts = std::move(*dg);
    else
      *why = "MTP draft graphs off (the eager drafter runs): " + st.message();
  }
  return out;
}

class BatchEngine final : public Engine {
 public:
  BatchEngine() = default;
  ~BatchEngine() override {
    shutdown();
    // Multi-GPU: each rank's runner, model and backend go with their thread bound to the rank's GPU (their
    // allocations and cuBLASLt workspaces are freed on its streams).
    tp_.reset();
    for (size_t r = rank_ops_.size(); r-- > 0;) {
      rank_ops_[r]->bind_thread();
      rank_runners_[r].reset();
      rank_models_[r].reset();
      rank_ops_[r].reset();
    }
    if (ops_) ops_->bind_thread();
  }

  Status init(const BatchEngineOptions& o) {
    if (o.model_path.empty()) return error("--model-path is required");
    if (o.load_format == "dummy" && std::filesystem::is_regular_file(o.model_path)) {
      // Dummy weights need only a config: a bare config.json file is enough (benchmarks of real configs).
      std::ifstream f(o.model_path);
      std::stringstream text;
      text << f.rdbuf();
      auto cfg = parse_model_config(text.str());
      if (!cfg) return error(o.model_path, ": ", cfg.status().message());
      cfg_ = cfg.value();
    } else {
      if (!std::filesystem::is_directory(o.model_path)) return error("--model-path '", o.model_path, "' is not a directory");
      DS_ASSIGN_OR_RETURN(cfg_, load_model_config(o.model_path));
    }
    loaded_cfg_ = cfg_;
    quantization_ = o.quantization;
    verbose_ = o.verbose;
    if (o.device == "cpu") {
      ops_ = make_cpu_ops();
    } else if (o.device == "cuda") {
#ifdef DSERVE_WITH_CUDA
      // A data-parallel rank runs on its own GPU; tensor-parallel ranks from the first on (made below).
      DS_ASSIGN_OR_RETURN(const std::vector<int> gpus,
                          rank_gpus(o, o.dp_group ? o.dp_rank : 0, o.dp_group ? 1 : std::max(o.tp_size, 1)));
      for (int g : gpus) DS_RETURN_IF_ERROR(check_cuda_device(g));
      ops_ = make_cuda_ops(gpus[0]);
#else
      return error("--device cuda: this build has no CUDA backend (CUDA toolkit not found at build time)");
#endif
    } else {
      return error("--device must be cpu or cuda, got '", o.device, "'");
    }
    int64_t free_before = 0, total_mem = 0;  // GPU memory before the weights (memory planning)
    if (ops_->device() == Device::kCuda) DS_RETURN_IF_ERROR(query_gpu_memory(&free_before, &total_mem));
    ModelWeights weights;
    if (o.verbose) DS_INFO("loading weights from ", o.model_path, " (", o.load_format, ")");
    // Tensor-parallel dummy weights are made rank by rank, each its own shard (as SGLang initialises them): a
    // full-size V3 (671B parameters) never exists whole in host memory. Replicated tensors (embedding, norms, the
    // low-rank projections, router, lm_head) come out the same on every rank (seeded by name and shape).
    const bool dummy_shards = o.load_format == "dummy" && o.tp_size > 1 && o.ep_size == 1 && !o.dp_group;
    if (o.load_format == "auto") {
      DS_ASSIGN_OR_RETURN(weights, load_weights(o.model_path, cfg_));
    } else if (dummy_shards) {
      cfg_ = dummy_weights_config(cfg_, o.quantization);  // (each rank's shard is made from it below)
    } else if (o.load_format == "dummy") {
      weights = make_dummy_weights(cfg_, o.seed);
    } else {
      return error("--load-format must be auto or dummy, got '", o.load_format, "'");
    }
    DS_RETURN_IF_ERROR(apply_quantization_flag(o.quantization, &weights, &cfg_));
    DS_ASSIGN_OR_RETURN(KvCacheDtype kv_dtype, parse_kv_cache_dtype(o.kv_cache_dtype));
    if (o.speculative_num_steps > 0 && !o.speculative_ngram) {  // (its range: SchedulerConfig::validate)
      if (dummy_shards ? cfg_.num_nextn_predict_layers == 0 : weights.mtp.empty())
        return error("speculative decoding (--speculative-algorithm) drafts with the checkpoint's MTP (NextN) layer, "
                     "and ", o.model_path, " has none (num_nextn_predict_layers = ", cfg_.num_nextn_predict_layers,
                     ", no model.layers.", cfg_.num_hidden_layers, ".* tensors)");
    }
    // Tensor parallelism (--tp-size): rank r runs its shard of the weights on a backend of its own; rank 0 is
    // ops_ / model_ / runner_, the others run beside it every step (runner/tp_ranks.h).
    if (o.tp_size < 1) return error("--tp-size must be >= 1, got ", o.tp_size);
    if (o.tp_size > 1 && o.dp_group && o.tp_size != o.dp_group->size())
      return error("--tp-size ", o.tp_size, " with --dp-size ", o.dp_group->size(), ": data-parallel attention shards "
                   "the MLPs over the DP ranks (--tp-size = --dp-size)");
    if (o.ep_size != 1 && o.ep_size != o.tp_size)
      return error("--ep-size ", o.ep_size, " must be 1 or --tp-size (", o.tp_size, "): expert parallelism deals the "
                   "routed experts out over the tensor-parallel ranks");
    const bool ep = o.ep_size > 1;
    expert_parallel_ = ep;
    if (ep && ops_->device() != Device::kCpu)
      return error("--ep-size ", o.ep_size, " on --device cuda: the CUDA MoE kernels do not yet skip the routed experts "
                   "another rank holds; use --ep-size 1 (every rank a slice of every expert)");
    ModelConfig rank_cfg = cfg_;  // rank 0's: heads and intermediate sizes divided by tp_size
    if (o.dp_group) {  // one rank of data-parallel attention: whole attention, MLPs sharded over the group
      if (ops_->device() != Device::kCpu && !o.dp_collective)
        return error("--enable-dp-attention on --device cuda: the ranks' NCCL group is made by the data-parallel "
                     "controller (make_batch_engine with --dp-size)");
      DS_ASSIGN_OR_RETURN(TpShard shard, shard_for_tensor_parallel(cfg_, weights, o.dp_rank, o.dp_group->size(), ep,
                                                                   /*attention_whole=*/true));
      ops_->set_collective(o.dp_collective ? o.dp_collective : o.dp_group->member(o.dp_rank));
      ModelOptions mo = model_options(o.disable_shared_experts_fusion, o.disable_chunked_prefix_cache);
      mo.dp_attention = true;
      model_ = std::make_unique<DeepseekModel>(shard.config, shard.weights, *ops_, mo);
      rank_cfg = shard.config;
      group_ = o.dp_group;
      abort_group_ = [g = o.dp_group, nccl = o.dp_abort](const std::string& why) {
        g->abort(why);
        if (nccl) nccl(why);
      };
      dp_ = true;
    } else if (o.tp_size > 1) {
      // Ranks as threads: on the CPU a LocalGroup; on CUDA one GPU a rank (--base-gpu-id + r * --gpu-id-step), NCCL.
      std::vector<std::unique_ptr<Ops>> all_ops;
      all_ops.push_back(std::move(ops_));
      std::vector<std::shared_ptr<Collective>> members;
      if (all_ops[0]->device() == Device::kCpu) {
        auto group = std::make_shared<LocalGroup>(o.tp_size);
        for (int r = 0; r < o.tp_size; ++r) members.push_back(group->member(r));
        for (int r = 1; r < o.tp_size; ++r) all_ops.push_back(make_cpu_ops());
        group_ = group;
        abort_group_ = [group](const std::string& why) { group->abort(why); };
      } else {
#ifdef DSERVE_WITH_CUDA
        DS_ASSIGN_OR_RETURN(const std::vector<int> devices, rank_gpus(o, 0, o.tp_size));
        for (int r = 1; r < o.tp_size; ++r) all_ops.push_back(make_cuda_ops(devices[r]));
        all_ops[0]->bind_thread();
        DS_ASSIGN_OR_RETURN(std::shared_ptr<NcclGroup> group, NcclGroup::create(devices));
        for (int r = 0; r < o.tp_size; ++r) members.push_back(group->member(r));
        abort_group_ = [group](const std::string& why) { group->abort(why); };
        if (o.verbose) DS_INFO("NCCL ", group->version(), ": ", o.tp_size, " GPUs from GPU ", devices[0]);
#endif
      }
      for (int r = 0; r < o.tp_size; ++r) {
        TpShard shard;
        if (dummy_shards) {
          DS_ASSIGN_OR_RETURN(shard.config, tensor_parallel_config(cfg_, o.tp_size, ep, false, /*fp8_blocks=*/true));
          shard.weights = make_dummy_weights(shard.config, o.seed);
        } else {
          DS_ASSIGN_OR_RETURN(shard, shard_for_tensor_parallel(cfg_, weights, r, o.tp_size, ep));
        }
        std::unique_ptr<Ops> ops = std::move(all_ops[r]);
        ops->bind_thread();  // the rank's weights go to its GPU
        ops->set_collective(members[r]);
        auto model = std::make_unique<DeepseekModel>(shard.config, shard.weights, *ops,
                                                     model_options(o.disable_shared_experts_fusion, o.disable_chunked_prefix_cache));
        if (r == 0) {
          ops_ = std::move(ops);
          model_ = std::move(model);
          rank_cfg = shard.config;
        } else {
          rank_ops_.push_back(std::move(ops));
          rank_models_.push_back(std::move(model));
        }
      }
      ops_->bind_thread();
      if (o.verbose)
        DS_INFO("tensor parallelism: ", o.tp_size, " ranks (threads), ", rank_cfg.num_attention_heads,
                " attention heads each", ep ? ", routed experts dealt out whole (--ep-size)" : "");
    } else {
      model_ = std::make_unique<DeepseekModel>(cfg_, weights, *ops_, model_options(o.disable_shared_experts_fusion, o.disable_chunked_prefix_cache));
    }
    if (o.verbose) DS_INFO("weights ready: ", cfg_.num_hidden_layers, " layers, vocab ", cfg_.vocab_size);

    context_length_ = o.context_length > 0 ? o.context_length : cfg_.max_position_embeddings;
    if (o.context_length < 0) return error("--context-length must be >= 0");
    // As SGLang: a context past the model's positions is refused unless asked for (the rope tables and the graphs'
    // page tables are sized by it).
    if (o.context_length > cfg_.max_position_embeddings) {
      if (!env_flag("DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", false))
        return error("--context-length ", o.context_length, " is greater than the model's max_position_embeddings ",
                     cfg_.max_position_embeddings, "; set DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 to allow it");
      if (o.context_length > INT32_MAX)
        return error("--context-length ", o.context_length, " is past the int32 positions");
      if (o.verbose)
        DS_WARN("--context-length ", o.context_length, " is past max_position_embeddings ",
                cfg_.max_position_embeddings, " (DSERVE_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)");
    }
    if (o.page_size < 1 || o.page_size > 4096) return error("--page-size must be in [1, 4096], got ", o.page_size);
    int64_t max_tokens = o.max_total_tokens;
    const int mtp_cache_layers = o.speculative_num_steps > 0 && !o.speculative_ngram ? 1 : 0;  // the MTP layer's cache
    int64_t running_cap = INT32_MAX;  // the running requests the CUDA memory plan reserved rows for
    if (max_tokens < 0) return error("--max-total-tokens must be >= 0");
    if (max_tokens > 0)
      DS_RETURN_IF_ERROR(check_kv_pool_fits(*ops_, cfg_, o.page_size, kv_dtype, max_tokens,
                                            "--max-total-tokens " + std::to_string(max_tokens), mtp_cache_layers));
    if (max_tokens == 0 && ops_->device() == Device::kCuda) {
      // CUDA: the pool gets what --mem-fraction-static leaves after the weights and the activation reserve.
      MemPlanInput mi;
      DS_RETURN_IF_ERROR(query_gpu_memory(&mi.free_bytes, &mi.total_bytes));
      mi.weights_bytes = std::max<int64_t>(free_before - mi.free_bytes, 0);
      mi.kv_bytes_per_token = kv_bytes_per_token(*ops_, cfg_, o.page_size, kv_dtype, mtp_cache_layers);
      mi.page_size = o.page_size;
      mi.mem_fraction_static = o.mem_fraction_static;
      mi.chunked_prefill_size = o.chunked_prefill_size;
      mi.max_prefill_tokens = o.max_prefill_tokens;
      // Graphs are captured up to the running limit at most (below), e.g. 48 with speculative decoding.
      mi.cuda_graph_max_bs = o.disable_cuda_graph ? 0 : (o.cuda_graph_max_bs > 0 ? o.cuda_graph_max_bs : 256);
      mi.cuda_graph_max_bs = static_cast<int32_t>(std::min<int64_t>(mi.cuda_graph_max_bs, o.max_running_requests));
      mi.rows_per_request = o.speculative_num_steps + 1;  // verification samples every draft's row
      mi.max_running_requests =
          reserved_running_rows(o.max_running_requests, mi.free_bytes, cfg_.vocab_size, mi.rows_per_request);
      running_cap = mi.max_running_requests;
      mi.vocab = cfg_.vocab_size;
      mi.min_tokens = std::min<int64_t>(context_length_, std::max(o.chunked_prefill_size, 1));
      DS_ASSIGN_OR_RETURN(MemPlan plan, plan_kv_memory(mi));
      if (o.verbose) DS_INFO(describe_mem_plan(mi, plan));
      max_tokens = plan.max_total_tokens;
    } else if (max_tokens == 0) {
      // CPU: a 2 GiB budget for the latent cache, at most 256K tokens.
      const int64_t per_token =
          (cfg_.num_hidden_layers + mtp_cache_layers) * (cfg_.kv_cache_dim() + cfg_.index_head_dim) * 4;
      max_tokens = std::min<int64_t>((int64_t{2} << 30) / std::max<int64_t>(per_token, 1), 256 * 1024);
    }
    SchedulerConfig sc;
    sc.page_size = o.page_size;
    sc.num_pages = Scheduler::pages_for_max_total_tokens(max_tokens, o.page_size);
    sc.chunked_prefill_size = o.chunked_prefill_size;
    sc.max_prefill_tokens = o.max_prefill_tokens;
    // Every running request holds a page at least: a limit past the pool's pages is the pool's (as SGLang caps its
    // max_running_requests by the pool), not a million idle rows. On CUDA also the rows the memory plan reserved
    // logits for (reserved_running_rows), so a huge limit neither refuses to start nor outgrows the reserve.
    const int32_t by_pages = std::max(sc.num_pages, 1);
    sc.max_running_requests =
        static_cast<int32_t>(std::min<int64_t>({o.max_running_requests, by_pages, running_cap}));
    if (o.verbose && sc.max_running_requests < o.max_running_requests)
      DS_INFO("--max-running-requests ", o.max_running_requests, " capped at ", sc.max_running_requests,
              sc.max_running_requests == by_pages ? " (the pool's pages)" : " (the memory plan's logits rows)");
    DS_ASSIGN_OR_RETURN(sc.policy, parse_schedule_policy(o.schedule_policy));
    sc.disable_radix_cache = o.disable_radix_cache;
    sc.context_length = static_cast<int32_t>(std::min<int64_t>(context_length_, INT32_MAX));
    sc.speculative_num_steps = o.speculative_num_steps;
    spec_steps_ = o.speculative_num_steps;
    return_hidden_states_ = o.enable_return_hidden_states;
    test_draft_hook_ = o.test_draft_hook;
    for (int64_t e : cfg_.eos_token_ids) sc.eos_token_ids.push_back(static_cast<TokenId>(e));
    DS_ASSIGN_OR_RETURN(sched_, Scheduler::create(sc));
    max_total_tokens_ = static_cast<int64_t>(sc.num_pages) * sc.page_size;
    // CUDA graphs: one extra cache page (never handed out) takes the padding rows' writes.
    // (Data-parallel attention: its MLP gathers read the ranks' token counts on the host inside the forward, which a
    // graph cannot; its steps run eager.)
    // The expert counts are made before any graph is captured (the graphs count with them).
    if (!o.expert_recorder_mode.empty()) {
      DS_RETURN_IF_ERROR(check_expert_recorder_flags(o.expert_recorder_mode, -1, false));
      if (cfg_.n_routed_experts <= 0)
        return error("--expert-distribution-recorder-mode: ", o.model_path, " has no routed experts to record");
      ops_->bind_thread();
      model_->enable_expert_counts();
      recorder_ = std::make_unique<ExpertRecorder>(cfg_.num_hidden_layers, cfg_.n_routed_experts, expert_recorder_dir());
    }
    const bool graphs = ops_->device() == Device::kCuda && !o.disable_cuda_graph && !dp_;
    // Routed-expert capture, before any graph is captured (they record too): a buffer for the largest graph batch and
    // a chunk (larger eager steps record into a fresh one).
    if (o.enable_return_routed_experts) {
      if (cfg_.n_routed_experts <= 0)
        return error("--enable-return-routed-experts: ", o.model_path, " has no routed experts");
      const int64_t graph_rows = graphs ? int64_t{sc.max_running_requests} * (spec_steps_ + 1) : 0;
      ops_->bind_thread();
      model_->enable_routed_capture(std::max<int64_t>(
          {graph_rows, std::min<int64_t>(std::max(o.chunked_prefill_size, 1), 16384), 256}));
      return_routed_experts_ = true;
    }
    if (dp_ && ops_->device() == Device::kCuda && !o.disable_cuda_graph && o.verbose && o.dp_rank == 0)
      DS_INFO("CUDA graphs off with --enable-dp-attention (its steps run eager so far)");
    // Speculative decoding: the MTP layer's latent cache beside the main layers' (same pages).
    KvCache cache = make_kv_cache(*ops_, cfg_, sc.page_size, sc.num_pages + (graphs ? 1 : 0), mtp_cache_layers,
                                  kv_dtype);
    runner_ = std::make_unique<BatchRunner>(*model_, *ops_, cache, sc.max_running_requests);
    std::vector<BatchRunner*> others;
    for (size_t r = 0; r < rank_models_.size(); ++r) {  // each rank its own latent cache (MLA TP keeps it whole)
      rank_ops_[r]->bind_thread();
      KvCache c = make_kv_cache(*rank_ops_[r], rank_cfg, sc.page_size, sc.num_pages + (graphs ? 1 : 0),
                                mtp_cache_layers, kv_dtype);
      rank_caches_.push_back(c);
      rank_runners_.push_back(std::make_unique<BatchRunner>(*rank_models_[r], *rank_ops_[r], c, sc.max_running_requests));
      rank_runners_.back()->set_reports_rows(false);
      if (spec_steps_ > 0) rank_runners_.back()->enable_speculative(spec_steps_, o.speculative_ngram ? &o.ngram : nullptr);
      others.push_back(rank_runners_.back().get());
    }
    ops_->bind_thread();
    if (!others.empty()) tp_ = std::make_unique<TpRanks>(std::move(others), abort_group_);
    if (spec_steps_ > 0) {
      runner_->enable_speculative(spec_steps_, o.speculative_ngram ? &o.ngram : nullptr);
      if (o.verbose)
        DS_INFO("speculative decoding: ", spec_steps_, o.speculative_ngram ? " n-gram" : " MTP",
                " draft tokens a step (topk 1); overlap scheduling off");
    }
    if (graphs) {
      CudaGraphOptions go;
      go.max_bs = o.cuda_graph_max_bs;
      go.batch_sizes = o.cuda_graph_bs;
      if (go.max_bs < 0) return error("--cuda-graph-max-bs must be >= 0");
      go.max_context = context_length_;
      go.dummy_page = sc.num_pages;
      go.verbose = o.verbose;
      go.tokens_per_seq = spec_steps_ + 1;  // speculative decoding: verify graphs (the token and its drafts)
      go.keep_hidden = o.enable_return_hidden_states;
      // Every rank captures its own graphs at once (their warm-up forwards meet in the all-reduces), and replays
      // them or none: a padded graph batch on one rank and an eager one on another would all-reduce unequal rows.
      const int n = 1 + static_cast<int>(rank_runners_.size());
      std::vector<std::string> failed(static_cast<size_t>(n));
      std::vector<RankGraphs> made(static_cast<size_t>(n));
      auto capture = [&](int r) {
        made[r] = capture_rank_graphs(r == 0 ? *model_ : *rank_models_[r - 1], r == 0 ? *ops_ : *rank_ops_[r - 1],
                                      r == 0 ? cache : rank_caches_[r - 1],
                                      r == 0 ? *runner_ : *rank_runners_[r - 1], go, sc.max_running_requests,
                                      spec_steps_ > 0 && !o.speculative_ngram, &failed[r]);
      };
      if (tp_) {
        try {
          tp_->run_all(capture);
        } catch (const std::exception& e) {
          return error("capturing the tensor-parallel ranks' CUDA graphs: ", e.what());
        }
      } else {
        capture(0);
      }
      bool all = true, all_drafts = true;
      for (int r = 0; r < n; ++r) {
        all = all && made[r].verify;
        all_drafts = all_drafts && made[r].drafts;
        if (!failed[r].empty() && o.verbose) DS_WARN(n > 1 ? "rank " + std::to_string(r) + ": " : "", failed[r]);
      }
      for (int r = 0; r < n && all; ++r) {
        BatchRunner& br = r == 0 ? *runner_ : *rank_runners_[r - 1];
        br.set_cuda_graphs(std::move(made[r].verify));
        if (all_drafts && made[r].drafts) br.set_draft_graphs(std::move(made[r].drafts));
      }
    }
    if (o.verbose) DS_INFO("KV cache: ", sc.num_pages, " pages of ", sc.page_size, " tokens (", max_total_tokens_, " tokens)");
    on_fatal_ = o.on_fatal;
    // Drafts are host values of the previous step; tensor-parallel ranks run each step together, start to end.
    overlap_ = !o.disable_overlap_schedule && spec_steps_ == 0 && !tp_ && !dp_;
    loop_ = std::thread([this] { run_loop_guarded(); });
    return Status::ok();
  }

  Status submit(EngineRequest req, Callback on_event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return error("the server is shutting down");
    for (size_t i = 0; i < req.input_ids.size(); ++i)
      if (req.input_ids[i] < 0 || req.input_ids[i] >= cfg_.vocab_size)
        return error("token id ", req.input_ids[i], " at index ", i, " is outside the vocabulary [0, ", cfg_.vocab_size, ")");
    if (req.grammar && req.grammar->num_ids() != cfg_.vocab_size)
      return error("the grammar was made for ", req.grammar->num_ids(), " token ids, the model has ", cfg_.vocab_size);
    for (const auto& [t, bias] : req.sampling.logit_bias)
      if (t < 0 || t >= cfg_.vocab_size)
        return error("logit_bias token id ", t, " is outside the vocabulary [0, ", cfg_.vocab_size, ")");
    if (req.top_logprobs_num < 0) return error("top_logprobs_num must be >= 0");
    for (size_t i = 0; i < req.token_ids_logprob.size(); ++i)
      if (req.token_ids_logprob[i] < 0 || req.token_ids_logprob[i] >= cfg_.vocab_size)
        return error("token_ids_logprob[", i, "] = ", req.token_ids_logprob[i], " is outside the vocabulary [0, ",
                     cfg_.vocab_size, ")");
    if (req.logprob_start_len >= static_cast<int32_t>(req.input_ids.size()))
      return error("logprob_start_len ", req.logprob_start_len, " must be smaller than the prompt length ", req.input_ids.size());
    const int32_t num_prompt = static_cast<int32_t>(req.input_ids.size());
    std::vector<TokenId> prompt(req.input_ids.begin(), req.input_ids.end());
    if (req.return_hidden_states && !return_hidden_states_)
      return error(Engine::kHiddenStatesOff);
    if (req.return_routed_experts && !return_routed_experts_)
      return error(Engine::kRoutedExpertsOff);
    // Prompt logprobs from k need the rows before k computed; hidden states every prompt row.
    const int32_t reuse = req.return_hidden_states || req.return_routed_experts ? 0
                          : req.return_logprob && req.logprob_start_len >= 0 ? req.logprob_start_len
                                                                              : INT32_MAX;
    DS_RETURN_IF_ERROR(sched_->add_request(req.rid, std::move(prompt), req.sampling, reuse));
    Live& l = live_[req.rid];
    l.callback = std::move(on_event);
    l.info = RunnerRequestInfo{req.return_logprob, req.logprob_start_len, req.top_logprobs_num, req.grammar,
                               req.token_ids_logprob, req.return_hidden_states, req.return_routed_experts};
    if (req.return_hidden_states) l.hidden.resize(num_prompt);
    // (Penalties and grammars read the output so far on the host: such steps are not overlapped.)
    l.penalized = req.sampling.frequency_penalty != 0.0f || req.sampling.presence_penalty != 0.0f ||
                  req.sampling.repetition_penalty != 1.0f || req.grammar;
    if (req.return_logprob && req.logprob_start_len >= 0) l.input_logprobs.resize(num_prompt);
    ++num_requests_total_;
    wake_locked();
    return Status::ok();
  }

  void abort(const std::string& rid) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.count(rid) && sched_->abort(rid, "aborted by client").is_ok()) events_pending_ = true;
    wake_locked();
  }

  void finish_with_stop(const std::string& rid, std::string matched) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(rid);
    if (it == live_.end()) return;
    it->second.stop_matched = std::move(matched);
    it->second.stopped = true;
    if (sched_->abort(rid, "stop string").is_ok()) events_pending_ = true;
    wake_locked();
  }

  void abort_all() override {
    std::lock_guard<std::mutex> lock(mu_);
    abort_all_locked("aborted by client (abort_all)");
  }

  void pause(PauseMode mode) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode == PauseMode::kAbort) abort_all_locked("aborted: generation paused (/pause_generation)");
    paused_ = true;
    retract_pending_ = mode == PauseMode::kRetract;  // done by the loop between steps
    wake_locked();
  }

  void resume() override {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
    retract_pending_ = false;
    wake_locked();
  }

  Status flush_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (paused_ && retract_pending_) return error("flush_cache refused: the running requests are being retracted; retry");
    return sched_->flush_cache(/*allow_waiting=*/paused_);
  }

  Status start_profile(const ProfileOptions& options) override { return profiler_.start(options); }
  Status stop_profile(std::vector<std::string>* paths) override { return profiler_.stop(paths); }

  // Queued for the loop, which runs it between steps (the device counts are read in stream order there).
  Status expert_distribution(ExpertRecordOp op, std::string* path) override {
    if (!recorder_) return error(kNoExpertRecorder);
    return run_task(false, 300, [this, op](std::string* file) {
      return recorder_->apply(op, [&] { return drain_expert_counts(); }, file);
    }, path);
  }

  Status update_weights_from_disk(const std::string& model_path, bool flush_cache, bool keep_pause) override {
    if (dp_) return error("/update_weights_from_disk with --dp-size > 1 is not supported yet");
    if (!std::filesystem::is_directory(model_path)) return error("model_path '", model_path, "' is not a directory");
    DS_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(model_path));
    if (Status st = check_same_architecture(loaded_cfg_, cfg); !st) return error(model_path, ": ", st.message());
    return run_task(true, 3600, [this, model_path, cfg, flush_cache, keep_pause](std::string*) -> Status {
      if (verbose_) DS_INFO("updating the weights from ", model_path);
      ModelConfig c = cfg;
      DS_ASSIGN_OR_RETURN(ModelWeights w, load_weights(model_path, c));
      DS_RETURN_IF_ERROR(apply_quantization_flag(quantization_, &w, &c));
      if (!tp_) {
        DS_RETURN_IF_ERROR(model_->update_weights(w));
      } else {  // each rank its shard, cut as at start, on the rank's own thread (its device)
        const int n = 1 + static_cast<int>(rank_models_.size());
        std::vector<Status> st(static_cast<size_t>(n));
        tp_->run_all([&](int r) {
          Result<TpShard> shard = shard_for_tensor_parallel(c, w, r, n, expert_parallel_);
          DeepseekModel& m = r == 0 ? *model_ : *rank_models_[static_cast<size_t>(r) - 1];
          st[static_cast<size_t>(r)] = shard ? m.update_weights(shard->weights) : shard.status();
        });
        for (int r = 0; r < n; ++r)
          if (!st[static_cast<size_t>(r)]) return error("rank ", r, ": ", st[static_cast<size_t>(r)].message());
      }
      // Waits for the queued copies, so that a device error is this update's answer, not the next step's.
      (void)ops_->to_host(ops_->upload(Tensor::zeros({1}, DType::kF32)));
      std::lock_guard<std::mutex> lock(mu_);
      if (flush_cache)  // (refused while paused requests hold KV pages, as in SGLang: their KV stays)
        if (Status f = sched_->flush_cache(/*allow_waiting=*/true); !f) DS_WARN("weight update: ", f.message());
      if (paused_ && !keep_pause) {  // SGLang's default: generation resumes after an update made while paused
        paused_ = false;
        retract_pending_ = false;
      }
      if (verbose_) DS_INFO("weights updated from ", model_path);
      return Status::ok();
    }, nullptr);
  }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    SchedulerStats s = sched_->stats();
    EngineStats e;
    e.num_running = s.num_running;
    e.num_waiting = s.num_waiting;
    e.max_total_tokens = max_total_tokens_;
    e.max_running_requests = sched_->config().max_running_requests;
    const int64_t page = sched_->config().page_size;
    e.used_tokens = (static_cast<int64_t>(sched_->config().num_pages) - s.free_pages) * page;
    e.cached_tokens = static_cast<int64_t>(s.cached_pages) * page;
    e.prompt_tokens_total = s.prompt_tokens_admitted;
    e.cached_tokens_total = s.cached_tokens_total;
    e.generation_tokens_total = generation_tokens_total_;
    e.num_requests_total = num_requests_total_;
    e.num_retractions = s.num_retractions;
    e.paused = paused_;
    e.num_steps = s.num_steps;
    e.num_steps_planned_ahead = planned_ahead_;
    e.num_graph_steps = runner_ ? runner_->graph_steps() : 0;
    e.speculative_num_steps = spec_steps_;
    e.spec_verify_steps = spec_verify_steps_;
    e.spec_draft_tokens = spec_draft_tokens_;
    e.spec_accepted_tokens = spec_accepted_tokens_;
    return e;
  }

  const ModelConfig& model_config() const override { return cfg_; }
  int64_t context_length() const override { return context_length_; }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && !loop_.joinable()) return;
      stopping_ = true;
      cv_.notify_all();
      if (dp_) group_->ring();
    }
    if (loop_.joinable()) loop_.join();
  }

 private:
  struct Live {
    Callback callback;
    RunnerRequestInfo info;
    std::vector<TokenLogprob> input_logprobs;  // by prompt position, filled as prefill chunks run
    bool input_sent = false;
    // return_hidden_states: rows by position (prompt, then fed output tokens), filled as steps complete (a retracted
    // request's recomputed rows land on their own positions again), and the first position not yet in an event.
    std::vector<std::vector<float>> hidden;
    int32_t hidden_sent = 0;
    std::vector<std::vector<int32_t>> routed;  // return_routed_experts: picks by position, as `hidden`
    bool stopped = false;
    std::string stop_matched;
    std::string error;  // the runner failed this request (non-finite logits)
    bool penalized = false;  // frequency / presence / repetition penalty: its steps are not overlapped
    int32_t verify_ct = 0;         // speculative decoding: decode steps (each verified the drafts it fed)
    int32_t accepted_drafts = 0;
    int32_t proposed_drafts = 0;
    std::vector<int32_t> accept_histogram;  // [n]: verify steps that accepted n drafts
  };
  struct Outgoing {
    Callback callback;
    EngineEvent event;
  };

  void abort_all_locked(const std::string& why) {
    for (const auto& [rid, l] : live_)
      if (sched_->abort(rid, why).is_ok()) events_pending_ = true;
    wake_locked();
  }
  // Steps may be planned: not paused, and something to run.
  bool runnable_locked() const { return !paused_ && sched_->has_work(); }
  // A pause in mode retract, once no step is in flight.
  void retract_if_pending_locked() {
    if (!retract_pending_ || sched_->step_in_flight()) return;
    sched_->retract_all();
    retract_pending_ = false;
  }

  // DS_CHECK failures (CUDA errors included) on this thread throw (core/check.h), so a broken invariant
  // anywhere in a step fails every live request with its file:line message before the server exits,
  // instead of aborting with clients left waiting.
  void run_loop_guarded() {
    ScopedCheckThrows checks_throw;
    try {
      ops_->bind_thread();  // the engine's GPU (a data-parallel rank's loop makes collectives outside the runner)
      if (dp_)
        run_loop_dp();
      else
        run_loop();
    } catch (const std::exception& e) {
      fail_all(StepPlan{}, e.what());
    }
    std::deque<std::shared_ptr<EngineTask>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      loop_ended_ = true;
      left.swap(tasks_);
    }
    for (auto& t : left) t->done.set_value({error("the engine has stopped"), ""});
  }

  // A task for the loop's thread, run between steps (needs_idle: also with no request running and no step in
  // flight; admissions are held meanwhile, so the running requests drain). The caller waits up to `seconds`.
  Status run_task(bool needs_idle, int seconds, std::function<Status(std::string*)> fn, std::string* out) {
    auto t = std::make_shared<EngineTask>();
    t->needs_idle = needs_idle;
    t->run = std::move(fn);
    std::future<std::pair<Status, std::string>> done = t->done.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || loop_ended_) return error("the engine has stopped");
      tasks_.push_back(t);
      if (needs_idle) sched_->hold_new_admissions();
      wake_locked();
    }
    if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
      // Not taken yet: withdrawn (with its hold on new requests); taken: it finishes unseen.
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = std::find(tasks_.begin(), tasks_.end(), t); it != tasks_.end()) {
        tasks_.erase(it);
        if (std::none_of(tasks_.begin(), tasks_.end(), [](const auto& x) { return x->needs_idle; }))
          sched_->release_admissions();
        wake_locked();
      }
      return error("the engine loop did not finish the request within ", seconds, " s");
    }
    auto [st, text] = done.get();
    if (out) *out = text;
    return st;
  }
  // Every request from before the held admissions is done, or generation is paused, and no step is in flight (called
  // with mu_ held; `in_flight`: the loop's own step).
  bool idle_locked(bool in_flight) const {
    return !in_flight && (paused_ ? !sched_->step_in_flight() : !sched_->busy_before_hold());
  }
  bool task_ready_locked(bool idle) const {
    for (const auto& t : tasks_)
      if (!t->needs_idle || idle) return true;
    return false;
  }
  // The tasks that can run now, in order (an idle task waits, and the ones after it too, until the engine is idle).
  void serve_tasks(bool in_flight) {
    std::deque<std::shared_ptr<EngineTask>> now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool idle = idle_locked(in_flight);
      while (!tasks_.empty() && (!tasks_.front()->needs_idle || idle)) {
        now.push_back(tasks_.front());
        tasks_.pop_front();
      }
    }
    for (size_t i = 0; i < now.size(); ++i) {
      std::string text;
      try {
        Status st = now[i]->run(&text);
        now[i]->done.set_value({st, text});
      } catch (const std::exception& e) {  // a device error: this and the rest fail, then the loop does
        for (size_t j = i; j < now.size(); ++j) now[j]->done.set_value({error(e.what()), ""});
        throw;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    bool held = false;
    for (const auto& t : tasks_) held = held || t->needs_idle;
    if (!held) sched_->release_admissions();
    if (!now.empty()) wake_locked();
  }
  // The model's device counts, read (waiting for the steps queued before) and zeroed.
  std::vector<int64_t> drain_expert_counts() {
    Tensor& c = model_->expert_counts();
    Tensor h = ops_->to_host(c);  // (the CPU backend's is the tensor itself: copied out before the zeroing)
    std::vector<int64_t> v(static_cast<size_t>(h.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = h.data_as<int32_t>()[i];
    ops_->zero_(c);
    return v;
  }

  // DSERVE_FAULT_INJECT's step faults for the plan's requests: an exception, or a failed internal check.
  static void inject_step_faults(const StepPlan& plan) {
    for (const auto& sq : plan.seqs)
      if (fault_injected(FaultKind::kStepError, sq.req->rid))
        throw std::runtime_error("injected step_error fault (DSERVE_FAULT_INJECT) for request " + sq.req->rid);
      else if (fault_injected(FaultKind::kCheckError, sq.req->rid))
        DS_CHECK(false, "injected check_error fault (DSERVE_FAULT_INJECT) for request ", sq.req->rid);
  }

  // Data-parallel attention: every rank makes one forward a round (the MLPs' collectives meet there), so each
  // round starts with an agreement over the group: all stop, all wait (nobody has work), or all step, those with
  // nothing planned in a zero-token step. Steps run serially (no overlap).
  // The loop wakes for new work: its own condition variable, and with data-parallel attention the group's doorbell,
  // since every rank must join the step of a request that reached any one of them.
  void wake_locked() {
    cv_.notify_one();
    if (dp_) group_->ring();
  }

  void run_loop_dp() {
    for (;;) {
      serve_tasks(false);
      const uint64_t rings = group_->rings();  // before looking for work: a ring after it ends the idle wait below
      Tensor flags = Tensor::empty({2}, DType::kF32);
      {
        std::lock_guard<std::mutex> lock(mu_);
        flags.f32()[0] = runnable_locked() || events_pending_ || retract_pending_ ? 1.0f : 0.0f;
        flags.f32()[1] = stopping_ ? 1.0f : 0.0f;
      }
      Tensor agreed = ops_->upload(flags);
      ops_->all_reduce_(agreed);
      agreed = ops_->to_host(agreed);
      std::vector<Outgoing> out;
      if (agreed.f32()[1] > 0) {  // a rank is shutting down: all do
        {
          std::lock_guard<std::mutex> lock(mu_);
          stopping_ = true;
          for (auto& [rid, l] : live_) (void)sched_->abort(rid, "server shutting down");
          append(out, convert(sched_->take_events(), {}, nullptr));
        }
        deliver(out);
        return;
      }
      if (agreed.f32()[0] == 0) {  // nobody has work: sleep until a rank is given some (its ring wakes every rank)
        group_->wait_ring(rings, std::chrono::milliseconds(kDpIdleWaitMs));
        continue;
      }
      StepPlan plan;
      std::unordered_map<std::string, RunnerRequestInfo> info;
      {
        std::lock_guard<std::mutex> lock(mu_);
        events_pending_ = false;
        retract_if_pending_locked();  // (steps are serial here: none in flight)
        if (runnable_locked()) plan = sched_->next_step();
        if (!plan.empty()) profiler_.step_planned(plan.step_id);
        for (const auto& sq : plan.seqs)
          if (auto it = live_.find(sq.req->rid); it != live_.end()) info.emplace(sq.req->rid, it->second.info);
        if (plan.empty()) {
          if (sched_->step_in_flight()) append(out, convert(sched_->complete_step(plan, {}), {}, nullptr));
          append(out, convert(sched_->take_events(), {}, nullptr));
        }
      }
      deliver(out);
      out.clear();
      std::vector<SeqOutput> outputs;
      try {
        inject_step_faults(plan);
        if (plan.empty())
          runner_->idle_step();
        else
          outputs = runner_->execute(plan, info);
      } catch (const std::exception& e) {
        fail_all(plan, e.what());
        return;
      }
      if (plan.empty()) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        out = complete_locked(std::move(plan), std::move(outputs));
      }
      deliver(out);
    }
  }

  // A launched step waiting for complete_step. With overlap scheduling the next step is planned and launched
  // before this one is finished (its decodes feed placeholder tokens the runner resolves on the device), so
  // the host work of completing a step, delivering its events and planning and launching the next one runs
  // while the device computes: the host waits for a step's sampled ids only when the step after it is queued.
  struct Done {
    StepPlan plan;
    LaunchedStep step;
    std::optional<std::vector<SeqOutput>> outputs;  // set once finished (serial steps finish right away)
  };

  // Overlap needs no host knowledge of the step in flight's tokens, except for penalties over previous tokens:
  // while a request uses them, steps run one at a time.
  bool overlap_now() const {
    if (!overlap_) return false;
    for (const auto& [rid, l] : live_)
      if (l.penalized) return false;
    return true;
  }

  void run_loop() {
    std::optional<Done> prev;
    while (true) {
      serve_tasks(prev.has_value());
      bool serial_step = false;  // finish this step before completing under the lock (nothing overlaps it)
      StepPlan plan;
      std::unordered_map<std::string, RunnerRequestInfo> info;
      std::vector<Outgoing> out;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!prev)
          cv_.wait(lock, [&] {
            return stopping_ || events_pending_ || runnable_locked() || retract_pending_ ||
                   task_ready_locked(idle_locked(false));
          });
        events_pending_ = false;
        if (stopping_) {
          if (prev) out = complete_locked(std::move(*prev));
          prev.reset();
          for (auto& [rid, l] : live_) (void)sched_->abort(rid, "server shutting down");
          append(out, convert(sched_->take_events(), {}, nullptr));
          lock.unlock();
          deliver(out);
          return;
        }
        if (prev && (!overlap_now() || !runnable_locked())) {  // serial mode, or nothing to plan ahead of it
          out = complete_locked(std::move(*prev));
          prev.reset();
        }
        retract_if_pending_locked();
        if (!runnable_locked()) {  // nothing to run: only events from outside a step (an abort while queued)
          append(out, convert(sched_->take_events(), {}, nullptr));
          lock.unlock();
          deliver(out);
          continue;
        }
        plan = sched_->next_step();
        if (!plan.empty()) profiler_.step_planned(plan.step_id);
        if (prev && !plan.empty()) ++planned_ahead_;
        serial_step = !overlap_now();
        if (plan.empty()) {
          // Steps complete in order: the one in flight first. Even an empty plan is completed (the scheduler
          // counts it as a step: DP ranks idle in lockstep).
          if (prev) append(out, complete_locked(std::move(*prev)));
          prev.reset();
          std::vector<RequestEvent> events = sched_->complete_step(plan, {});
          std::vector<RequestEvent> more = sched_->take_events();
          events.insert(events.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
          append(out, convert(std::move(events), {}, nullptr));
          if (out.empty()) {  // nothing can run now (should not happen: the scheduler always admits the oldest)
            cv_.wait_for(lock, std::chrono::milliseconds(5));
            continue;
          }
        } else {
          for (const auto& s : plan.seqs) {
            auto it = live_.find(s.req->rid);
            if (it != live_.end()) info.emplace(s.req->rid, it->second.info);
          }
        }
      }
      deliver(out);
      out.clear();
      if (plan.empty()) continue;
      LaunchedStep launched;
      std::vector<SeqOutput> prev_outputs;
      std::optional<std::vector<SeqOutput>> outputs;
      try {
        inject_step_faults(plan);
        if (prev && runner_->launch_waits(plan, info)) {
          // This launch waits for the device itself: the older step's tokens go out first, not after it.
          std::vector<SeqOutput> o = finish(*prev);
          std::vector<Outgoing> early;
          {
            std::lock_guard<std::mutex> lock(mu_);
            early = complete_locked(std::move(prev->plan), std::move(o));
          }
          prev.reset();
          deliver(early);
        }
        if (tp_) {
          DS_CHECK(serial_step && !prev, "tensor-parallel steps do not overlap");
          outputs = tp_->execute(*runner_, plan, info);
        } else {
          launched = runner_->launch(plan, info);
        }
        // Overlap: the older step's ids, waited for while this step is queued behind it on the device.
        if (prev) prev_outputs = finish(*prev);
        if (serial_step && !tp_) outputs = runner_->finish(std::move(launched));
      } catch (const std::exception& e) {
        fail_all(plan, e.what());
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (prev) out = complete_locked(std::move(prev->plan), std::move(prev_outputs));
        prev = Done{std::move(plan), std::move(launched), std::move(outputs)};
        // Nothing left to plan ahead of it (every request in it finished one step late): complete it before
        // the events go out, so a client that saw its last token finds the pool idle.
        if (!sched_->has_work()) {
          append(out, complete_locked(std::move(*prev)));
          prev.reset();
        }
      }
      deliver(out);
    }
  }

  static void append(std::vector<Outgoing>& out, std::vector<Outgoing> more) {
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }

  // A launched step's outputs: kept from a serial finish, else waited for now.
  std::vector<SeqOutput> finish(Done& d) {
    return d.outputs ? std::move(*d.outputs) : runner_->finish(std::move(d.step));
  }
  // complete_step of a launched step (waiting for the device) and its events (called with mu_ held).
  std::vector<Outgoing> complete_locked(Done d) {
    std::vector<SeqOutput> outputs = finish(d);
    return complete_locked(std::move(d.plan), std::move(outputs));
  }
  std::vector<Outgoing> complete_locked(StepPlan plan, std::vector<SeqOutput> outputs) {
    std::vector<SeqResult> results(plan.seqs.size());
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      results[i].token = outputs[i].token;
      results[i].accepted_drafts = outputs[i].accepted_drafts;
      results[i].next_drafts = std::move(outputs[i].next_drafts);
      const StepPlan::SeqStep& sq = plan.seqs[i];
      const auto accepted = static_cast<int32_t>(outputs[i].accepted_drafts.size());
      if (test_draft_hook_ && !results[i].next_drafts.empty())
        test_draft_hook_(sq.req->rid, sq.req->num_output() + accepted + 1, results[i].next_drafts);
      if (spec_steps_ == 0 || !sq.is_decode || !sq.needs_sample || !outputs[i].error.empty()) continue;
      ++spec_verify_steps_;
      spec_draft_tokens_ += static_cast<uint64_t>(sq.num_draft);
      spec_accepted_tokens_ += static_cast<uint64_t>(accepted);
      auto it = live_.find(sq.req->rid);
      if (it == live_.end()) continue;
      ++it->second.verify_ct;
      it->second.accepted_drafts += accepted;
      it->second.proposed_drafts += sq.num_draft;
      auto& hist = it->second.accept_histogram;
      if (hist.size() <= static_cast<size_t>(accepted)) hist.resize(static_cast<size_t>(accepted) + 1, 0);
      ++hist[static_cast<size_t>(accepted)];
    }
    // Requests whose logits were not finite: recorded now, finished with the error after this step.
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (outputs[i].error.empty()) continue;
      auto it = live_.find(plan.seqs[i].req->rid);
      if (it == live_.end()) continue;
      DS_ERROR("request ", it->first, ": ", outputs[i].error, "; failing it, the batch goes on");
      it->second.error = outputs[i].error;
    }
    // Input logprobs of prompt positions computed in this step.
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      auto it = live_.find(plan.seqs[i].req->rid);
      if (it == live_.end()) continue;
      for (auto& [pos, lp] : outputs[i].input_logprobs)
        if (pos < static_cast<int32_t>(it->second.input_logprobs.size())) it->second.input_logprobs[pos] = lp;
      const auto store = [](auto& by_pos, auto& rows) {  // hidden / routed rows, each at its position
        for (auto& [pos, row] : rows) {
          if (pos >= static_cast<int32_t>(by_pos.size())) by_pos.resize(static_cast<size_t>(pos) + 1);
          by_pos[static_cast<size_t>(pos)] = std::move(row);
        }
      };
      store(it->second.hidden, outputs[i].hidden_rows);
      store(it->second.routed, outputs[i].routed_rows);
    }
    if (profiler_.active()) {
      StepSpan span{plan.step_id, plan.num_seqs(), plan.num_tokens(), plan.num_decode_seqs, plan.num_prefill_tokens, 0};
      for (const auto& sq : plan.seqs) span.num_draft_tokens += sq.num_draft;
      profiler_.step_completed(span);
    }
    // Request pointers in the plan die in complete_step: keep the rids.
    std::vector<std::string> rids;
    for (const auto& sq : plan.seqs) rids.push_back(sq.req->rid);
    std::vector<RequestEvent> events = sched_->complete_step(plan, results);
    for (size_t i = 0; i < rids.size(); ++i)
      if (!outputs[i].error.empty() && live_.count(rids[i])) (void)sched_->abort(rids[i], outputs[i].error);
    std::vector<RequestEvent> more = sched_->take_events();
    events.insert(events.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    return convert(std::move(events), outputs, &rids);
  }

  // Scheduler events -> engine events (called with mu_ held). outputs[i] belongs to (*rids)[i] when non-null.
  std::vector<Outgoing> convert(std::vector<RequestEvent> events, const std::vector<SeqOutput>& outputs,
                                const std::vector<std::string>* rids) {
    std::unordered_map<std::string, size_t> seq_of;
    if (rids)
      for (size_t i = 0; i < rids->size(); ++i) seq_of.emplace((*rids)[i], i);
    std::vector<Outgoing> out;
    for (RequestEvent& ev : events) {
      auto it = live_.find(ev.rid);
      if (it == live_.end()) continue;
      Live& l = it->second;
      EngineEvent e;
      e.rid = ev.rid;
      e.new_tokens.assign(ev.new_tokens.begin(), ev.new_tokens.end());
      e.finished = ev.finished;
      e.reason = ev.reason;
      e.prompt_tokens = ev.prompt_tokens;
      e.completion_tokens = ev.completion_tokens;
      e.cached_tokens = ev.cached_tokens;
      generation_tokens_total_ += ev.new_tokens.size();
      if (spec_steps_ > 0) {
        e.spec_verify_ct = l.verify_ct;
        e.spec_accepted_drafts = l.accepted_drafts;
        e.spec_proposed_drafts = l.proposed_drafts;
        e.spec_accept_histogram = l.accept_histogram;
      }
      if (l.info.return_logprob && !e.new_tokens.empty()) {
        auto s = seq_of.find(ev.rid);
        if (s != seq_of.end()) {  // the accepted drafts', then the last token's (a stop may end the list early)
          const SeqOutput& o = outputs[s->second];
          for (size_t j = 0; j < e.new_tokens.size(); ++j)
            e.output_logprobs.push_back(j < o.accepted_logprobs.size() ? o.accepted_logprobs[j] : o.logprob);
        }
      }
      if (!l.input_sent && l.info.return_logprob && l.info.logprob_start_len >= 0 &&
          (!e.new_tokens.empty() || e.finished)) {
        e.input_logprobs.assign(l.input_logprobs.begin() + l.info.logprob_start_len, l.input_logprobs.end());
        l.input_sent = true;
      }
      if (l.info.return_hidden_states) add_hidden_states(l, ev, e);
      if (l.info.return_routed_experts && e.finished && l.error.empty()) add_routed_experts(l, ev, e);
      if (e.finished && l.stopped) e.reason = FinishReason{FinishReason::Kind::kStop, -1, l.stop_matched};
      if (!l.error.empty()) {  // a failed sequence: its placeholder token is not output
        e.new_tokens.clear();
        e.output_logprobs.clear();
        if (e.finished) {
          e.error = l.error;
          e.reason = FinishReason{FinishReason::Kind::kAbort, -1, l.error};
        }
      }
      out.push_back(Outgoing{l.callback, std::move(e)});
      if (ev.finished) {
        runner_->release(ev.rid);
        if (tp_) tp_->release(ev.rid);
        live_.erase(it);
      }
    }
    return out;
  }

  // return_hidden_states: the prompt's rows with the first token (or the end), then the rows of the output tokens fed
  // before this event's last one: each row made the token after it, so an event up to n tokens reports rows < n - 1.
  static void add_hidden_states(Live& l, const RequestEvent& ev, EngineEvent& e) {
    const int32_t num_prompt = ev.prompt_tokens;
    const int32_t end = num_prompt + ev.completion_tokens - 1;  // rows [0, end) made the tokens so far
    if (l.hidden_sent == 0 && (end >= num_prompt || ev.finished)) {
      // (A request ended before its prefill completed, e.g. aborted, sends no prompt rows: some were never computed.)
      const bool whole = static_cast<int32_t>(l.hidden.size()) >= num_prompt &&
                         std::none_of(l.hidden.begin(), l.hidden.begin() + num_prompt, [](const auto& r) { return r.empty(); });
      if (whole)
        e.hidden_prompt.assign(std::make_move_iterator(l.hidden.begin()),
                               std::make_move_iterator(l.hidden.begin() + num_prompt));
      l.hidden_sent = num_prompt;
    }
    for (; l.hidden_sent >= num_prompt && l.hidden_sent < end; ++l.hidden_sent) {
      if (l.hidden_sent >= static_cast<int32_t>(l.hidden.size())) break;
      e.hidden_output.push_back(std::move(l.hidden[static_cast<size_t>(l.hidden_sent)]));
    }
  }

  // return_routed_experts, at the end: the picks of positions [0, n - 1) (n = prompt + output), flat.
  void add_routed_experts(Live& l, const RequestEvent& ev, EngineEvent& e) const {
    const int32_t fed = ev.prompt_tokens + ev.completion_tokens - 1;
    const size_t width = static_cast<size_t>(cfg_.num_hidden_layers) * static_cast<size_t>(cfg_.num_experts_per_tok);
    e.routed_experts.assign(static_cast<size_t>(std::max(fed, 0)) * width, 0);
    for (int32_t p = 0; p < fed && p < static_cast<int32_t>(l.routed.size()); ++p)
      if (l.routed[static_cast<size_t>(p)].size() == width)
        std::copy(l.routed[static_cast<size_t>(p)].begin(), l.routed[static_cast<size_t>(p)].end(),
                  e.routed_experts.begin() + static_cast<std::ptrdiff_t>(p * width));
  }

  // An engine step threw (an internal check, a CUDA error, an injected fault): the KV cache and the
  // scheduler may be inconsistent, so every live request fails with the cause, the loop ends, and
  // on_fatal tells the server to exit non-zero.
  void fail_all(const StepPlan& plan, const std::string& what) {
    std::vector<Outgoing> out;
    std::string msg;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::string rids;
      for (size_t i = 0; i < plan.seqs.size() && i < 8; ++i) rids += (i ? "," : "") + plan.seqs[i].req->rid;
      DS_ERROR("engine step ", sched_->stats().num_steps, " failed (", plan.num_seqs(), " sequences, ", plan.num_tokens(),
               " tokens; rids ", rids, plan.seqs.size() > 8 ? ",..." : "", "): ", what,
               "; failing ", live_.size(), " live requests and stopping");
      msg = "engine step failed: " + what;
      for (auto& [rid, l] : live_) {
        EngineEvent e;
        e.rid = rid;
        e.finished = true;
        e.error = msg;
        e.reason = FinishReason{FinishReason::Kind::kAbort, -1, msg};
        out.push_back(Outgoing{l.callback, std::move(e)});
      }
      live_.clear();
      stopping_ = true;  // submit() refuses from now on
    }
    if (abort_group_) abort_group_(msg);  // ranks waiting for this one in a collective fail too, instead of hanging
    deliver(out);
    if (on_fatal_) on_fatal_(msg);
  }

  static void deliver(std::vector<Outgoing>& out) {
    for (Outgoing& o : out)
      if (o.callback) o.callback(std::move(o.event));
  }

  ModelConfig cfg_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<DeepseekModel> model_;
  std::unique_ptr<BatchRunner> runner_;
  // Tensor parallelism: ranks 1..n-1 (rank 0 is ops_ / model_ / runner_); tp_ is declared last among them so
  // that its threads stop before their runners go.
  std::shared_ptr<LocalGroup> group_;  // CPU ranks and data-parallel attention (its doorbell)
  std::function<void(const std::string&)> abort_group_;  // breaks the ranks' collectives (LocalGroup or NCCL)
  std::vector<std::unique_ptr<Ops>> rank_ops_;
  std::vector<KvCache> rank_caches_;
  std::vector<std::unique_ptr<DeepseekModel>> rank_models_;
  std::vector<std::unique_ptr<BatchRunner>> rank_runners_;
  std::unique_ptr<TpRanks> tp_;
  int64_t context_length_ = 0;
  int64_t max_total_tokens_ = 0;

  mutable std::mutex mu_;  // guards sched_, live_ and the counters
  StepProfiler profiler_;  // its own lock: /start_profile and /stop_profile come from API threads
  std::condition_variable cv_;
  std::unique_ptr<Scheduler> sched_;
  std::unordered_map<std::string, Live> live_;
  uint64_t generation_tokens_total_ = 0;
  uint64_t num_requests_total_ = 0;
  bool stopping_ = false;
  bool events_pending_ = false;  // an abort produced events outside a step
  bool paused_ = false;          // pause(): no step is planned until resume()
  bool retract_pending_ = false;  // pause(kRetract): the loop retracts the running requests once no step is in flight
  bool overlap_ = true;          // --disable-overlap-schedule turns it off
  uint64_t planned_ahead_ = 0;
  int32_t spec_steps_ = 0;  // speculative decoding's draft tokens a step (0: off)
  bool return_hidden_states_ = false;  // --enable-return-hidden-states
  bool return_routed_experts_ = false;  // --enable-return-routed-experts
  bool dp_ = false;         // one rank of data-parallel attention (run_loop_dp)
  std::function<void(const std::string&, int32_t, std::vector<int32_t>&)> test_draft_hook_;
  uint64_t spec_verify_steps_ = 0, spec_draft_tokens_ = 0, spec_accepted_tokens_ = 0;
  std::function<void(const std::string&)> on_fatal_;
  // --expert-distribution-recorder-mode's recorder (used on the loop's thread).
  std::unique_ptr<ExpertRecorder> recorder_;
  // Work for the loop's thread from API threads (run_task): the recorder's requests, weight updates.
  struct EngineTask {
    bool needs_idle = false;
    std::function<Status(std::string*)> run;
    std::promise<std::pair<Status, std::string>> done;
  };
  std::deque<std::shared_ptr<EngineTask>> tasks_;  // guarded by mu_
  bool loop_ended_ = false;                        // guarded by mu_
  ModelConfig loaded_cfg_;   // the checkpoint's config as read (before --quantization): what an update must match
  std::string quantization_;  // --quantization, applied to updates too
  bool expert_parallel_ = false;  // --ep-size > 1: updates are cut as the start's weights were
  bool verbose_ = true;
  std::thread loop_;
};

}  // namespace

Result<std::unique_ptr<Engine>> make_dp_engine(const BatchEngineOptions& opts);  // runner/dp_engine.cpp

Result<std::vector<int>> rank_gpus(const BatchEngineOptions& o, int first, int n) {
  if (o.base_gpu_id < 0 || o.gpu_id_step < 1)
    return error("--base-gpu-id must be >= 0 and --gpu-id-step >= 1, got ", o.base_gpu_id, " and ", o.gpu_id_step);
  std::vector<int> out;
  for (int r = first; r < first + n; ++r) out.push_back(o.base_gpu_id + r * o.gpu_id_step);
  return out;
}

Result<std::unique_ptr<Engine>> make_batch_engine(const BatchEngineOptions& opts) {
  if (opts.dp_size > 1) return make_dp_engine(opts);
  if (opts.dp_size < 1) return error("--dp-size must be >= 1, got ", opts.dp_size);
  auto e = std::make_unique<BatchEngine>();
  DS_RETURN_IF_ERROR(e->init(opts));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace ds
