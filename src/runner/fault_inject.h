// Test-only fault injection for the reliability tests (RELIABILITY.md): DSERVE_FAULT_INJECT, read once at
// first use, is a comma-separated list of KIND:SUBSTRING; a fault fires for requests whose rid contains
// SUBSTRING. Kinds: nan_logits (the request's logits row becomes NaN), step_error (the engine step that
// runs the request throws), check_error (a DS_CHECK fails inside that step, as a failed CUDA call does).
// Unset (production): every query is false after one getenv.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds {

enum class FaultKind { kNanLogits, kStepError, kCheckError };

// Parses a DSERVE_FAULT_INJECT value into (kind, substring) pairs; unknown kinds are skipped.
std::vector<std::pair<FaultKind, std::string>> parse_fault_spec(std::string_view spec);

// Whether the environment's DSERVE_FAULT_INJECT injects `kind` into the request `rid`.
bool fault_injected(FaultKind kind, std::string_view rid);

}  // namespace ds
