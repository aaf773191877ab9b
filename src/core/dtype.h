// Element types of checkpoints, caches and activations, and exact scalar conversions to and from fp32.
// Conversions round to nearest even; fp8 e4m3fn saturates to +-448 (it has no infinities).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ds {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kF8E5M2, kI32, kI64, kU8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // safetensors spelling: "F32", "BF16", "F8_E4M3", ...
bool dtype_from_name(std::string_view name, DType* out);

inline float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = f32_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>((b + rounding) >> 16);
}
// Round an fp32 value to the nearest bf16 value (kept as fp32).
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float fp8e4m3_to_f32(uint8_t v);
// The 256 e4m3 decodings, indexed by code (fp8e4m3_to_f32 reads it): for loops that decode whole weights.
const float* fp8e4m3_table();
uint8_t f32_to_fp8e4m3(float f);
float fp8e5m2_to_f32(uint8_t v);
uint8_t f32_to_fp8e5m2(float f);

constexpr float kFp8E4M3Max = 448.0f;

// Reads element i of a buffer of dtype t as fp32 (float types only).
float load_as_f32(const void* data, DType t, size_t i);

}  // namespace ds
