// Parsing of the FP8 GEMM dispatch table (see fp8_tuning.h).
#include "ops/fp8_tuning.h"

#include <nlohmann/json.hpp>

namespace ds {
namespace {

constexpr int64_t kSmallMLimit = 64;  // kernels::kFp8SmallMMax (kept CUDA-free here)

Result<int64_t> int_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return error(where, ": missing \"", key, "\"");
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer()) return error(where, ": \"", key, "\" must be an integer");
  return v.get<int64_t>();
}

}  // namespace

Result<Fp8GemmTuning> parse_fp8_gemm_tuning(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("FP8 GEMM tuning file is not valid JSON");
  if (!j.is_object()) return error("FP8 GEMM tuning file must hold a JSON object");
  Fp8GemmTuning t;
  if (j.contains("device")) {
    if (!j["device"].is_string()) return error("FP8 GEMM tuning: \"device\" must be a string");
    t.device = j["device"].get<std::string>();
  }
  if (j.contains("default_small_m_max")) {
    DS_ASSIGN_OR_RETURN(t.default_small_m_max, int_field(j, "default_small_m_max", "FP8 GEMM tuning"));
    if (t.default_small_m_max < 0 || t.default_small_m_max > kSmallMLimit)
      return error("FP8 GEMM tuning: default_small_m_max must be in [0, ", kSmallMLimit, "], got ", t.default_small_m_max);
  }
  if (!j.contains("shapes")) return t;
  if (!j["shapes"].is_array()) return error("FP8 GEMM tuning: \"shapes\" must be an array");
  for (size_t i = 0; i < j["shapes"].size(); ++i) {
    const nlohmann::json& s = j["shapes"][i];
    const std::string where = "FP8 GEMM tuning: shapes[" + std::to_string(i) + "]";
    if (!s.is_object()) return error(where, " must be an object");
    DS_ASSIGN_OR_RETURN(int64_t n, int_field(s, "N", where));
    DS_ASSIGN_OR_RETURN(int64_t k, int_field(s, "K", where));
    DS_ASSIGN_OR_RETURN(int64_t m, int_field(s, "small_m_max", where));
    if (n <= 0 || k <= 0 || n % 128 != 0 || k % 128 != 0)
      return error(where, ": N and K must be positive multiples of 128 (padded shapes), got ", n, " x ", k);
    if (m < 0 || m > kSmallMLimit) return error(where, ": small_m_max must be in [0, ", kSmallMLimit, "], got ", m);
    if (!t.small_m_max.emplace(std::make_pair(n, k), m).second) return error(where, ": shape ", n, " x ", k, " repeated");
  }
  return t;
}

Result<MoeFp8Tuning> parse_moe_fp8_tuning(const std::string& json_text) {
  constexpr int64_t kMaxTokens = int64_t{1} << 20;
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("FP8 MoE tuning file is not valid JSON");
  if (!j.is_object()) return error("FP8 MoE tuning file must hold a JSON object");
  MoeFp8Tuning t;
  auto tokens_ok = [&](int64_t v) { return v >= MoeFp8Tuning::kMinGroupedMax && v <= kMaxTokens; };
  if (j.contains("device")) {
    if (!j["device"].is_string()) return error("FP8 MoE tuning: \"device\" must be a string");
    t.device = j["device"].get<std::string>();
  }
  if (j.contains("default_grouped_max_tokens")) {
    DS_ASSIGN_OR_RETURN(t.default_grouped_max, int_field(j, "default_grouped_max_tokens", "FP8 MoE tuning"));
    if (!tokens_ok(t.default_grouped_max))
      return error("FP8 MoE tuning: default_grouped_max_tokens must be in [16, ", kMaxTokens, "], got ",
                   t.default_grouped_max);
  }
  if (!j.contains("shapes")) return t;
  if (!j["shapes"].is_array()) return error("FP8 MoE tuning: \"shapes\" must be an array");
  for (size_t i = 0; i < j["shapes"].size(); ++i) {
    const nlohmann::json& s = j["shapes"][i];
    const std::string where = "FP8 MoE tuning: shapes[" + std::to_string(i) + "]";
    if (!s.is_object()) return error(where, " must be an object");
    DS_ASSIGN_OR_RETURN(int64_t e, int_field(s, "experts", where));
    DS_ASSIGN_OR_RETURN(int64_t d, int_field(s, "hidden", where));
    DS_ASSIGN_OR_RETURN(int64_t inter, int_field(s, "inter", where));
    DS_ASSIGN_OR_RETURN(int64_t m, int_field(s, "grouped_max_tokens", where));
    if (e <= 0 || d <= 0 || d % 128 != 0 || inter <= 0 || inter % 128 != 0)
      return error(where, ": experts must be positive, hidden and inter positive multiples of 128, got ", e, ", ",
                   d, ", ", inter);
    if (!tokens_ok(m)) return error(where, ": grouped_max_tokens must be in [16, ", kMaxTokens, "], got ", m);
    if (!t.grouped_max.emplace(std::make_tuple(e, d, inter), m).second)
      return error(where, ": shape ", e, " x ", d, " x ", inter, " repeated");
    if (s.contains("walk_stages")) {
      DS_ASSIGN_OR_RETURN(int64_t st, int_field(s, "walk_stages", where));
      if (st != 4 && st != 6 && st != 8) return error(where, ": walk_stages must be 4, 6 or 8, got ", st);
      t.walk_stages[std::make_tuple(e, d, inter)] = static_cast<int>(st);
    }
  }
  return t;
}

Result<std::string> merge_moe_fp8_tuning(const std::string& existing, const std::string& device,
                                         const std::string& entry_json) {
  nlohmann::json out = {{"device", device},
                        {"default_grouped_max_tokens", MoeFp8Tuning{}.default_grouped_max},
                        {"shapes", nlohmann::json::array()}};
  nlohmann::json entry = nlohmann::json::parse(entry_json, nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object()) return error("FP8 MoE tuning entry is not a JSON object");
  if (!existing.empty()) {
    if (Result<MoeFp8Tuning> t = parse_moe_fp8_tuning(existing); !t) return t.status();
    const nlohmann::json old = nlohmann::json::parse(existing);  // valid: parsed above
    if (old.contains("default_grouped_max_tokens")) out["default_grouped_max_tokens"] = old["default_grouped_max_tokens"];
    for (const auto& s : old.value("shapes", nlohmann::json::array())) {
      if (s["experts"] != entry.value("experts", -1) || s["hidden"] != entry.value("hidden", -1) ||
          s["inter"] != entry.value("inter", -1))
        out["shapes"].push_back(s);
      else if (s.contains("walk_stages") && !entry.contains("walk_stages"))  // measured in the model, not by tune-moe
        entry["walk_stages"] = s["walk_stages"];
    }
  }
  out["shapes"].push_back(entry);
  std::string text = out.dump(1) + "\n";
  if (Result<MoeFp8Tuning> t = parse_moe_fp8_tuning(text); !t) return t.status();
  return text;
}

}  // namespace ds
