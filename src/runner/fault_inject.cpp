// DSERVE_FAULT_INJECT parsing (test-only fault injection, see fault_inject.h).
#include "runner/fault_inject.h"

#include <cstdlib>

#include "core/env.h"
#include "core/logging.h"

namespace ds {

std::vector<std::pair<FaultKind, std::string>> parse_fault_spec(std::string_view spec) {
  std::vector<std::pair<FaultKind, std::string>> out;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon + 1 >= item.size()) continue;  // an empty substring would hit all
    const std::string_view kind = item.substr(0, colon);
    std::string needle(item.substr(colon + 1));
    if (kind == "nan_logits") out.emplace_back(FaultKind::kNanLogits, std::move(needle));
    else if (kind == "step_error") out.emplace_back(FaultKind::kStepError, std::move(needle));
    else if (kind == "check_error") out.emplace_back(FaultKind::kCheckError, std::move(needle));
  }
  return out;
}

bool fault_injected(FaultKind kind, std::string_view rid) {
  static const std::vector<std::pair<FaultKind, std::string>> faults = [] {
    const char* env = env_text("DSERVE_FAULT_INJECT");
    auto f = env ? parse_fault_spec(env) : std::vector<std::pair<FaultKind, std::string>>{};
    if (!f.empty()) DS_WARN("DSERVE_FAULT_INJECT is set (test-only fault injection): ", env);
    return f;
  }();
  for (const auto& [k, needle] : faults)
    if (k == kind && rid.find(needle) != std::string_view::npos) return true;
  return false;
}

}  // namespace ds
