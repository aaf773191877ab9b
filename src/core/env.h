// DSERVE_* environment switches (A/B runs, debugging and tuning knobs): one reading of their text for every layer.
// Unset and empty read as absent; a value that is not what the switch takes falls back to the default.
#pragma once
#include <cstdint>

namespace ds {

// The variable's text, or nullptr when unset or empty.
const char* env_text(const char* name);
// true for "1", false for "0", `dflt` for anything else (unset, empty, other text).
bool env_flag(const char* name, bool dflt);
// The variable as a whole decimal integer; `dflt` when unset, empty, not a number or out of range.
int64_t env_int(const char* name, int64_t dflt);

}  // namespace ds
