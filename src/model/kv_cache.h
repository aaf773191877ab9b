// KvCache: the tensors of the paged latent cache, one set per attention layer (main layers, then MTP
// layers). Page p holds slots [p * page_size, (p + 1) * page_size). Page ownership is the scheduler's
// business (cache/page_pool); this struct only holds memory.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"

#include "core/tensor.h"
#include "model/config.h"
#include "ops/ops.h"

namespace ds {

struct KvCache {
  int page_size = 0;
  int num_pages = 0;
  KvCacheDtype dtype = KvCacheDtype::kAuto;  // of `latent`
  std::vector<Tensor> latent;   // per layer: [num_pages * page_size, kv_lora_rank + qk_rope_head_dim]
  std::vector<Tensor> index_k;  // per layer (V3.2 only): [num_pages * page_size, index_head_dim]

  int64_t num_slots() const { return static_cast<int64_t>(page_size) * num_pages; }
};

// Allocates a cache for all main layers plus `num_mtp_layers` MTP layers on the ops' device.
KvCache make_kv_cache(Ops& ops, const ModelConfig& cfg, int page_size, int num_pages, int num_mtp_layers,
                      KvCacheDtype dtype = KvCacheDtype::kAuto);

// Parses --kv-cache-dtype: auto | bf16 | fp8_e4m3 | fp8_e5m2.
Result<KvCacheDtype> parse_kv_cache_dtype(const std::string& name);

}  // namespace ds
