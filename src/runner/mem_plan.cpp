// KV pool sizing from --mem-fraction-static (see mem_plan.h for the rule and the reserve estimate).
#include "runner/mem_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#ifdef DSERVE_WITH_CUDA
#include "ops/cuda/cuda_runtime.h"
#endif

namespace ds {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes / kGiB);
  return buf;
}

// One running request's logits and sampling work rows (fp32, vocab wide each).
int64_t logits_row_bytes(int64_t vocab) { return 2 * vocab * 4; }

}  // namespace

int64_t activation_reserve_bytes(const MemPlanInput& in) {
  const int64_t step_tokens = in.chunked_prefill_size > 0 ? in.chunked_prefill_size : in.max_prefill_tokens;
  const int64_t chunk = std::max<int64_t>(step_tokens, 2048);
  const int64_t per_request = std::max(in.rows_per_request, 1);
  int64_t r = 512 * kMiB + chunk * 3 * kMiB / 2 + int64_t{in.cuda_graph_max_bs} * per_request * 2 * kMiB;
  r += int64_t{std::max(in.max_running_requests, 1)} * per_request * logits_row_bytes(in.vocab);
  r += 16 * in.vocab * 12;  // one sort chunk (keys, ids x 2)
  return r;
}

int32_t reserved_running_rows(int64_t max_running_requests, int64_t free_bytes, int64_t vocab,
                              int32_t rows_per_request) {
  const int64_t rows = std::max<int64_t>(free_bytes, 0) / 4 /
                       (logits_row_bytes(std::max<int64_t>(vocab, 1)) * std::max(rows_per_request, 1));
  return static_cast<int32_t>(std::clamp<int64_t>(std::min(max_running_requests, rows), 1, INT32_MAX));
}

Result<MemPlan> plan_kv_memory(const MemPlanInput& in) {
  if (in.total_bytes <= 0 || in.free_bytes < 0 || in.free_bytes > in.total_bytes)
    return error("GPU memory info is inconsistent (total ", in.total_bytes, ", free ", in.free_bytes, ")");
  if (in.kv_bytes_per_token <= 0 || in.page_size <= 0) return error("KV bytes per token must be positive");
  if (in.mem_fraction_static < 0 || in.mem_fraction_static >= 1)
    return error("--mem-fraction-static must be in (0, 1), got ", in.mem_fraction_static);
  MemPlan p;
  p.reserve_bytes = activation_reserve_bytes(in);
  const double total = static_cast<double>(in.total_bytes);
  if (in.mem_fraction_static > 0) {
    p.fraction = in.mem_fraction_static;
  } else {  // SGLang's default: everything but the reserve (at least 10 GiB on GPUs over 60 GiB)
    double reserve = static_cast<double>(p.reserve_bytes);
    if (total > 60.0 * kGiB) reserve = std::max(reserve, 10.0 * kGiB);
    p.fraction = std::clamp((total - reserve) / total, 0.05, 0.95);
  }
  const double used = static_cast<double>(in.total_bytes - in.free_bytes);
  const double by_fraction = p.fraction * total - used;
  const double by_free = static_cast<double>(in.free_bytes) - static_cast<double>(p.reserve_bytes);
  const double budget = std::min(by_fraction, by_free);
  const int64_t page_bytes = in.kv_bytes_per_token * in.page_size;
  const int64_t min_pages = std::max<int64_t>((in.min_tokens + in.page_size - 1) / in.page_size, 1);
  const double need = static_cast<double>(min_pages) * static_cast<double>(page_bytes);
  if (budget < need) {
    const double missing = need - budget;
    if (by_fraction <= by_free)
      return error("the model does not fit: weights and runtime use ", gib(used), " GiB of the ", gib(p.fraction * total),
                   " GiB static budget (--mem-fraction-static ", p.fraction, " of ", gib(total), " GiB); the KV cache needs ",
                   gib(need), " GiB for ", min_pages * in.page_size, " tokens: ", gib(missing), " GiB missing");
    return error("the model does not fit: ", gib(static_cast<double>(in.free_bytes)), " GiB free after the weights (",
                 gib(static_cast<double>(in.weights_bytes)), " GiB), ", gib(static_cast<double>(p.reserve_bytes)),
                 " GiB reserved for activations; the KV cache needs ", gib(need), " GiB for ", min_pages * in.page_size,
                 " tokens: ", gib(missing), " GiB missing");
  }
  const double pages = std::floor(budget / static_cast<double>(page_bytes));
  p.num_pages = static_cast<int32_t>(std::min(pages, static_cast<double>(INT32_MAX - 1)));
  p.max_total_tokens = static_cast<int64_t>(p.num_pages) * in.page_size;
  p.kv_bytes = static_cast<int64_t>(p.num_pages) * page_bytes;
  return p;
}

std::string describe_mem_plan(const MemPlanInput& in, const MemPlan& p) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "Memory plan: total %s GiB, weights %s GiB, free after weights %s GiB, mem_fraction_static %.3f, "
                "activation reserve %s GiB\nKV Cache is allocated. #tokens: %lld, #pages: %d (page size %d), "
                "KV size: %s GiB (%lld bytes per token)",
                gib(static_cast<double>(in.total_bytes)).c_str(), gib(static_cast<double>(in.weights_bytes)).c_str(),
                gib(static_cast<double>(in.free_bytes)).c_str(), p.fraction, gib(static_cast<double>(p.reserve_bytes)).c_str(),
                static_cast<long long>(p.max_total_tokens), p.num_pages, in.page_size,
                gib(static_cast<double>(p.kv_bytes)).c_str(), static_cast<long long>(in.kv_bytes_per_token));
  return buf;
}

int64_t kv_bytes_per_token(Ops& ops, const ModelConfig& cfg, int page_size, KvCacheDtype dtype, int num_mtp_layers) {
  KvCache one = make_kv_cache(ops, cfg, page_size, 1, num_mtp_layers, dtype);
  int64_t bytes = 0;
  for (const Tensor& t : one.latent) bytes += t.nbytes();
  for (const Tensor& t : one.index_k) bytes += t.nbytes();
  return (bytes + page_size - 1) / page_size;
}

Status check_kv_pool_fits(Ops& ops, const ModelConfig& cfg, int page_size, KvCacheDtype dtype, int64_t tokens,
                          const std::string& what, int num_mtp_layers) {
  if (page_size < 1) return error("--page-size must be >= 1");
  const int64_t pages = (tokens + page_size - 1) / page_size;
  if (pages >= INT32_MAX - 1)
    return error(what, " is too large: ", pages, " pages of ", page_size,
                 " tokens (at most ", INT32_MAX - 2, " pages)");
  const double need = static_cast<double>(kv_bytes_per_token(ops, cfg, page_size, dtype, num_mtp_layers)) *
                      static_cast<double>(pages + 1) * static_cast<double>(page_size);  // + the graphs' dummy page
  double free_bytes = -1;
  const char* where = "";
  if (ops.device() == Device::kCuda) {
    int64_t f = 0, t = 0;
    DS_RETURN_IF_ERROR(query_gpu_memory(&f, &t));
    free_bytes = static_cast<double>(f);
    where = "on the GPU";
  } else {
    free_bytes = available_host_memory();
    where = "in host memory";
  }
  if (free_bytes >= 0 && need > free_bytes)
    return error(what, ": the KV cache of ", tokens, " tokens needs ", gib(need), " GiB, ", gib(free_bytes),
                 " GiB is free ", where);
  return Status::ok();
}

double available_host_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024.0;
    f.ignore(64, '\n');
  }
  return -1;
}

Status query_gpu_memory(int64_t* free_bytes, int64_t* total_bytes) {
#ifdef DSERVE_WITH_CUDA
  if (cudaError_t e = cudaStreamSynchronize(cuda_stream()); e != cudaSuccess)
    return error("cudaStreamSynchronize: ", cudaGetErrorString(e));
  int dev = 0;
  cudaMemPool_t pool;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetMemPool(&pool, dev) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
  size_t f = 0, t = 0;
  if (cudaError_t e = cudaMemGetInfo(&f, &t); e != cudaSuccess) return error("cudaMemGetInfo: ", cudaGetErrorString(e));
  *free_bytes = static_cast<int64_t>(f);
  *total_bytes = static_cast<int64_t>(t);
  return Status::ok();
#else
  (void)free_bytes;
  (void)total_bytes;
  return error("GPU memory planning needs the CUDA backend");
#endif
}

}  // namespace ds
