// The packed row layouts of the FP8 latent KV cache (--kv-cache-dtype), shared by the host code that sizes the
// cache and by the store, gather and attention kernels that write and read it.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define DS_HD __host__ __device__
#else
#define DS_HD
#endif

namespace ds::kernels {

// How a latent cache row [c (nope values) | k_pe (rope values)] is stored.
//  kBf16: nope + rope bf16 values.
//  kE4M3: FlashMLA's layout: nope e4m3 bytes | ceil(nope / 128) fp32 scales (value = e4m3 * scale of its
//         128-value block) | rope bf16 values (rope is even), the scales and the rope part starting on 16-byte
//         boundaries (512 / 64 dims: bytes [0, 512) | [512, 528) | [528, 656)).
//  kE5M2: nope + rope e5m2 bytes, no scale (SGLang's plain cast).
// Rows are not padded at the end, so the row size and nope determine rope (kv_rope_of).
enum KvFormat : int { kKvBf16 = 0, kKvE4M3 = 1, kKvE5M2 = 2 };

struct KvRowLayout {
  int64_t scale_off;  // kE4M3: byte offset of the fp32 scales
  int64_t rope_off;   // kE4M3: byte offset of the bf16 rope values
  int64_t row_bytes;
};

DS_HD constexpr int64_t kv_round16(int64_t x) { return (x + 15) / 16 * 16; }

DS_HD constexpr KvRowLayout kv_row_layout(int format, int64_t nope, int64_t rope) {
  if (format == kKvE4M3) {
    const int64_t scale_off = kv_round16(nope);
    const int64_t rope_off = kv_round16(scale_off + 4 * ((nope + 127) / 128));
    return {scale_off, rope_off, rope_off + 2 * rope};
  }
  if (format == kKvE5M2) return {0, 0, nope + rope};
  return {0, 0, 2 * (nope + rope)};
}

// The rope dims of a row of `row_bytes` (inverse of kv_row_layout; -1 when no rope fits).
DS_HD constexpr int64_t kv_rope_of(int format, int64_t nope, int64_t row_bytes) {
  const int64_t rest = row_bytes - kv_row_layout(format, nope, 0).row_bytes;
  if (rest < 0) return -1;
  return format == kKvE5M2 ? rest : (rest % 2 == 0 ? rest / 2 : -1);
}

static_assert(kv_row_layout(kKvE4M3, 512, 64).row_bytes == 656 && kv_row_layout(kKvE4M3, 512, 64).rope_off == 528,
              "FlashMLA's 656-byte FP8 row");

}  // namespace ds::kernels

#undef DS_HD
