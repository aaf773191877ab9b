// BatchEngine: the Engine (engine.h) that runs the real model: one loop thread plans steps with the
// Scheduler, executes them with DeepseekModel over the paged latent cache, samples, and reports events.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "dist/local_group.h"
#include "runner/engine.h"
#include "runner/ngram_drafter.h"
#include "sched/scheduler.h"

namespace ds {

struct BatchEngineOptions {
  std::string model_path;
  std::string device = "cpu";
  std::string load_format = "auto";  // auto | dummy
  uint64_t seed = 0;                 // dummy weights
  int32_t page_size = 64;
  int64_t max_total_tokens = 0;      // KV capacity in tokens; 0 = derived from a memory budget
  double mem_fraction_static = 0;    // CUDA: weights + KV pool share of GPU memory (0: SGLang's default)
  int32_t chunked_prefill_size = 8192;  // -1: no chunking
  int32_t max_prefill_tokens = 16384;   // without chunking: the prompt tokens of a step (SchedulerConfig)
  int32_t max_running_requests = 256;
  std::string schedule_policy = "fcfs";
  bool disable_radix_cache = false;
  int64_t context_length = 0;        // 0 = the model's max_position_embeddings
  std::string quantization;          // "" or "fp8" (--quantization)
  std::string kv_cache_dtype = "auto";
  bool disable_shared_experts_fusion = false;  // --disable-shared-experts-fusion (ModelOptions)
  bool disable_chunked_prefix_cache = false;   // --disable-chunked-prefix-cache (ModelOptions::mha_chunk_bytes)
  bool disable_cuda_graph = false;   // --disable-cuda-graph: eager decode on CUDA
  bool disable_overlap_schedule = false;  // --disable-overlap-schedule: complete each step before planning the next
  int32_t cuda_graph_max_bs = 0;     // --cuda-graph-max-bs (0: SGLang's default from GPU memory)
  std::vector<int> cuda_graph_bs;    // --cuda-graph-bs: the sizes captured (empty: SGLang's list up to the max)
  // Speculative decoding: draft tokens verified per decode step, 0 = off. Drafted by the checkpoint's MTP layer
  // (--speculative-algorithm EAGLE / NEXTN with topk 1: needs the layer) or, with ngram, from each request's own
  // tokens (NGRAM: any checkpoint). Turns overlap scheduling off; CUDA graphs become verify graphs.
  int32_t speculative_num_steps = 0;
  bool speculative_ngram = false;
  NgramOptions ngram;
  // Tensor parallelism (--tp-size): ranks as threads of this process, each with its weight shard; on CUDA one GPU a
  // rank, all-reduced over NCCL: rank r on GPU base_gpu_id + r * gpu_id_step (--base-gpu-id, --gpu-id-step).
  int32_t tp_size = 1;
  int32_t base_gpu_id = 0;
  int32_t gpu_id_step = 1;
  int32_t ep_size = 1;  // --ep-size: 1 (experts cut like the MLPs) or tp_size (routed experts dealt out whole)
  // Data-parallel attention (--enable-dp-attention --dp-size N = --tp-size N): N engines, each with its own
  // scheduler, KV pool and requests, whose attention is their own and whose MLPs are sharded over all N
  // (ModelOptions::dp_attention); they step in lockstep (an idle rank makes zero-token steps) and a controller
  // gives each new request to the least loaded one. make_batch_engine builds them when dp_size > 1. On CUDA rank r
  // runs on GPU base_gpu_id + r * gpu_id_step, its collectives NCCL's (eager steps: no CUDA graphs yet).
  int32_t dp_size = 1;
  // Set by that controller for each of its engines (not by callers): the rank and the group it belongs to (its
  // doorbell; on the CPU its collectives too), and on CUDA the rank's NCCL member and the NCCL group's abort.
  int32_t dp_rank = 0;
  std::shared_ptr<LocalGroup> dp_group;
  std::shared_ptr<Collective> dp_collective;
  std::function<void(const std::string&)> dp_abort;
  // Tests of verification only: may rewrite the drafts made for request `rid` whose output will hold `num_output`
  // tokens when they are verified (random fixtures' MTP layers draft nothing a target accepts).
  std::function<void(const std::string& rid, int32_t num_output, std::vector<int32_t>& drafts)> test_draft_hook;
  // --expert-distribution-recorder-mode: "" (off) or "stat" (checked by check_expert_recorder_flags): the main
  // model counts its routed picks (its CUDA graphs with them) for Engine::expert_distribution.
  std::string expert_recorder_mode;
  // --enable-return-hidden-states: requests may ask for their hidden states (EngineRequest::return_hidden_states;
  // refused otherwise, as SGLang). On CUDA the decode graphs then keep their hidden rows (one copy a replay).
  bool enable_return_hidden_states = false;
  // --enable-return-routed-experts: requests may ask for the experts their tokens were routed to
  // (EngineRequest::return_routed_experts). The model then records every forward's picks (one small kernel a MoE
  // layer, in the CUDA graphs too).
  bool enable_return_routed_experts = false;
  bool verbose = true;               // loading progress on stderr
  // Called once on the engine thread after a step failed (every live request already got an error event);
  // the server should exit non-zero. Unset: the engine just stops.
  std::function<void(const std::string&)> on_fatal;
};

Result<std::unique_ptr<Engine>> make_batch_engine(const BatchEngineOptions& opts);

// The GPUs of ranks first .. first + n - 1: base_gpu_id + r * gpu_id_step each (one rule for the tensor-parallel
// ranks, a data-parallel rank and the DP controller's NCCL group). Errors name a negative base or a step below 1.
Result<std::vector<int>> rank_gpus(const BatchEngineOptions& opts, int first, int n);

}  // namespace ds
