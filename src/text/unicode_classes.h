// Unicode general-category code points missing from PCRE2's (older) Unicode tables, so regexes can
// match the classes \p{L} \p{M} \p{N} \p{P} \p{S} exactly as the Rust tokenizers crate does.
#pragma once
#include <cstdint>
#include <span>

namespace ds {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Ranges to add to PCRE2's \p{category} for category 'L', 'M', 'N', 'P' or 'S' (else empty).
std::span<const CodePointRange> unicode_class_additions(char category);

}  // namespace ds
