// GPU memory planning for the KV page pool (--mem-fraction-static, SGLang semantics): after the weights are
// loaded, the pool gets what is left of `fraction x total` GPU memory, while an activation/graph reserve
// stays free. Pure arithmetic, so it is unit-tested on the CPU; the engine feeds it cudaMemGetInfo.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/kv_cache.h"

namespace ds {

struct MemPlanInput {
  int64_t total_bytes = 0;         // GPU memory (cudaMemGetInfo total)
  int64_t free_bytes = 0;          // free after loading the weights (cudaMemGetInfo free)
  int64_t weights_bytes = 0;       // free before loading - free after (reported)
  int64_t kv_bytes_per_token = 0;  // all layers' cache rows of one token (latent + indexer keys)
  int32_t page_size = 64;
  double mem_fraction_static = 0;  // 0: SGLang's default, (total - reserve) / total
  int64_t chunked_prefill_size = 8192;  // -1: no chunking (a step's prompt tokens are max_prefill_tokens)
  int64_t max_prefill_tokens = 16384;
  int32_t cuda_graph_max_bs = 0;
  int32_t max_running_requests = 256;
  int32_t rows_per_request = 1;    // logits rows a running request samples a step (speculative: steps + 1)
  int64_t vocab = 0;
  int64_t min_tokens = 0;          // the pool must hold at least this many tokens (one context, one batch)
};

struct MemPlan {
  double fraction = 0;          // the fraction used (given or default)
  int64_t reserve_bytes = 0;    // activations + graphs + sampling, kept free
  int64_t kv_bytes = 0;         // the pool
  int32_t num_pages = 0;
  int64_t max_total_tokens = 0;  // num_pages * page_size
};

// Activations, CUDA graphs and sampling workspace, kept outside the static fraction (the estimate):
// SGLang's reserve (512 MiB + 1.5 MiB per token of max(chunked prefill, 2048) + 2 MiB per graph batch size;
// without chunking max(max_prefill_tokens, 2048) tokens, the most prompt tokens a step then takes)
// plus the logits and sampling work rows (2 x max_running_requests x rows_per_request x vocab fp32; the graph
// term also x rows_per_request) and the sort chunk (16 x vocab x 12 bytes).
int64_t activation_reserve_bytes(const MemPlanInput& in);

// The running requests the reserve holds logits and sampling rows for (MemPlanInput::max_running_requests):
// --max-running-requests, but at most as many rows as a quarter of the free memory holds, and at least 1. A limit
// past that is capped (the engine caps the running limit by these rows as it does by the pool's pages) instead of
// refusing to start for want of a reserve no batch could fill.
int32_t reserved_running_rows(int64_t max_running_requests, int64_t free_bytes, int64_t vocab,
                              int32_t rows_per_request = 1);

// The pool: min(fraction x total - used, free - reserve) bytes, used = total - free (weights, context and
// anything else already allocated), in whole pages. Errors name how many GiB are missing.
Result<MemPlan> plan_kv_memory(const MemPlanInput& in);

// The log lines (SGLang-like): "Memory plan: ..." and "KV Cache is allocated. #tokens: N, KV size: X GB".
std::string describe_mem_plan(const MemPlanInput& in, const MemPlan& plan);

// Bytes of one token's cache rows over all layers (the main ones, plus num_mtp_layers MTP layers: speculative
// decoding), measured on a one-page cache of the backend (any dtype).
int64_t kv_bytes_per_token(Ops& ops, const ModelConfig& cfg, int page_size, KvCacheDtype dtype, int num_mtp_layers = 0);

// A pool of `tokens` sized by the user (`what`: the flags that sized it, e.g. "--max-total-tokens 4096") checked
// before it is made: its pages must fit the page ids (int32) and its bytes the memory the backend has free now (CUDA:
// free GPU memory; CPU: MemAvailable of /proc/meminfo, unchecked where that cannot be read). The error starts with
// `what` and names the GiB needed and the GiB free.
Status check_kv_pool_fits(Ops& ops, const ModelConfig& cfg, int page_size, KvCacheDtype dtype, int64_t tokens,
                          const std::string& what, int num_mtp_layers = 0);

// MemAvailable from /proc/meminfo in bytes, or -1.
double available_host_memory();

// Free and total GPU memory (cudaMemGetInfo) after returning the allocator pool's unused memory to the
// driver, so freed temporaries do not count as used. An error in a build without CUDA.
Status query_gpu_memory(int64_t* free_bytes, int64_t* total_bytes);

}  // namespace ds
