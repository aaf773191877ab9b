// The per-GPU dispatch table of native block-FP8 linears (issue 7): for a weight of padded shape [Np, Kp], the
// largest token count M that still runs the small-M kernel (above it: cuBLASLt block-scaled FP8). Measured by
// `dserve tune-gemm`, stored as JSON (one file per GPU model, like SGLang's per-device configs).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
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

// The FP8 MoE dispatch table (`dserve tune-moe`): per routed-expert shape (experts, hidden size, padded
// intermediate size), the largest token count that runs the device-driven grouped kernels; larger eager batches
// run cuBLASLt block-FP8 per expert over counts read back to the host. Up to 16 tokens (the small-M kernel) and
// inside CUDA graphs the grouped kernels run regardless.
struct MoeFp8Tuning {
  static constexpr int64_t kMinGroupedMax = 16;
  std::string device;
  int64_t default_grouped_max = 1024;  // shapes not in the table
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> grouped_max;  // (experts, hidden, inter) -> tokens
  // (experts, hidden, inter) -> the FP8 walks' ring depth (4, 6 or 8; absent: the kernels' choice by token columns):
  // measured in the model (bench-one-batch), since it moves the walks beside their neighbours more than alone.
  std::map<std::tuple<int64_t, int64_t, int64_t>, int> walk_stages;

  int64_t lookup(int64_t experts, int64_t hidden, int64_t inter) const {
    auto it = grouped_max.find({experts, hidden, inter});
    return it == grouped_max.end() ? default_grouped_max : it->second;
  }
  int walk_stages_for(int64_t experts, int64_t hidden, int64_t inter) const {
    auto it = walk_stages.find({experts, hidden, inter});
    return it == walk_stages.end() ? 0 : it->second;
  }
};

// {"device": "...", "default_grouped_max_tokens": 1024, "shapes": [{"experts": 64, "hidden": 2048, "inter": 1408,
// "grouped_max_tokens": 512, "walk_stages": 8 (optional), ...}]} (extra keys ignored). Token counts in [16, 2^20],
// inter a multiple of 128, walk_stages 4, 6 or 8.
Result<MoeFp8Tuning> parse_moe_fp8_tuning(const std::string& json_text);

// The table text with `entry_json` (one shapes[] object) added to `existing` (a table's text, or "" for none):
// an entry of the same (experts, hidden, inter) is replaced (its walk_stages kept unless the new entry has one),
// other shapes kept; "device" becomes `device`.
// Errors when `existing` or the result is not a valid table.
Result<std::string> merge_moe_fp8_tuning(const std::string& existing, const std::string& device,
                                         const std::string& entry_json);

}  // namespace ds
