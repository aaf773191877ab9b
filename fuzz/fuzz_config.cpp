// libFuzzer target: config.json parsing and the values derived from a parsed config.
#include <cstdint>
#include <string>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cfg = ds::parse_model_config(std::string(reinterpret_cast<const char*>(data), size));
  if (!cfg.is_ok()) return 0;
  volatile double sink = cfg->softmax_scale() + cfg->rope_attention_factor();
  if (cfg->qk_rope_head_dim <= 4096) {
    auto freq = cfg->rope_inv_freq();
    for (float v : freq) sink = sink + v;
  }
  return 0;
}
