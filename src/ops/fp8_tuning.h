// The per-GPU dispatch table of native block-FP8 linears (issue 7): for a weight of padded shape [Np, Kp], the
// largest token count M that still runs the small-M kernel (above it: cuBLASLt block-scaled FP8). Measured by
// `dserve tune-gemm`, stored as JSON (one file per GPU model, like SGLang's per-device configs).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/status.h"

namespace ds {

struct Fp8GemmTuning {
  std::string device;                 // GPU name the table was measured on
  int64_t default_small_m_max = 16;   // shapes not in the table
  std::map<std::pair<int64_t, int64_t>, int64_t> small_m_max;  // (Np, Kp) -> M

  int64_t lookup(int64_t Np, int64_t Kp) const {
    auto it = small_m_max.find({Np, Kp});
    return it == small_m_max.end() ? default_small_m_max : it->second;
  }
};

// {"device": "...", "default_small_m_max": 16, "shapes": [{"N": 2176, "K": 7168, "small_m_max": 8, ...}, ...]}
// (extra keys, e.g. the measured times, are ignored). Errors name the offending field; M values must be in
// [0, 64] (the small-M kernel's limit), N and K positive multiples of 128.
Result<Fp8GemmTuning> parse_fp8_gemm_tuning(const std::string& json_text);

}  // namespace ds
