// Scalar dtype conversions (the CPU reference's ground truth for every reduced-precision format).
#include "core/dtype.h"

#include <array>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace ds {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kU8: return 1;
    case DType::kI64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
  }
  return "?";
}

bool dtype_from_name(std::string_view name, DType* out) {
  static const struct { const char* n; DType t; } kTable[] = {
      {"F32", DType::kF32},         {"BF16", DType::kBF16},       {"F16", DType::kF16},
      {"F8_E4M3", DType::kF8E4M3},  {"F8_E5M2", DType::kF8E5M2},  {"I32", DType::kI32},
      {"I64", DType::kI64},         {"U8", DType::kU8}};
  for (const auto& e : kTable)
    if (name == e.n) { *out = e.t; return true; }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

namespace {
// Generic round-to-nearest-even encoder for small float formats with `ebits` exponent bits and
// `mbits` mantissa bits. `max_finite` saturates (e4m3fn) when `saturate` is set, else overflow -> inf.
uint32_t encode_small(float f, int ebits, int mbits, bool saturate, float max_finite, uint32_t nan_code,
                      uint32_t inf_code) {
  uint32_t sign = std::signbit(f) ? 1u : 0u;
  uint32_t sbit = sign << (ebits + mbits);
  if (std::isnan(f)) return sbit | nan_code;
  float a = std::fabs(f);
  if (a > max_finite) {
    // Values that round to max_finite are handled below; beyond the rounding midpoint saturate/inf.
    float next = std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(max_finite)))) *
                 std::ldexp(1.0f, -mbits);  // ulp at max
    if (a >= max_finite + next * 0.5f || std::isinf(a)) return sbit | (saturate ? (nan_code - 1) : inf_code);
  }
  const int bias = (1 << (ebits - 1)) - 1;
  const int min_exp = 1 - bias;  // exponent of the smallest normal
  if (a == 0.0f) return sbit;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.x * 2^exp
  if (exp < min_exp) exp = min_exp;  // subnormal range: fixed quantum
  float quantum = std::ldexp(1.0f, exp - mbits);
  float q = std::nearbyint(a / quantum);  // round half to even (default rounding mode)
  float r = q * quantum;
  // Re-encode r exactly.
  if (r == 0.0f) return sbit;
  std::frexp(r, &e);
  int rexp = e - 1;
  uint32_t code;
  if (rexp < min_exp) {
    code = static_cast<uint32_t>(r / std::ldexp(1.0f, min_exp - mbits));  // subnormal mantissa
  } else {
    uint32_t man = static_cast<uint32_t>(r / std::ldexp(1.0f, rexp - mbits)) - (1u << mbits);
    code = (static_cast<uint32_t>(rexp + bias) << mbits) | man;
  }
  if (saturate && code > nan_code - 1) code = nan_code - 1;
  return sbit | code;
}
}  // namespace

uint16_t f32_to_f16(float f) {
  return static_cast<uint16_t>(encode_small(f, 5, 10, false, 65504.0f, 0x7e00, 0x7c00));
}

namespace {
float decode_e4m3(uint8_t v) {
  uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
  if (exp == 15 && man == 7) return NAN;
  float r = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                     : std::ldexp(static_cast<float>(man | 8), static_cast<int>(exp) - 10);
  return sign ? -r : r;
}
}  // namespace

// A table of the 256 decodings: the CPU backend dequantizes whole FP8 checkpoints through this, and the two ldexp
// calls a value were most of a --quantization fp8 CPU load.
const float* fp8e4m3_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = decode_e4m3(static_cast<uint8_t>(c));
    return t;
  }();
  return table.data();
}
float fp8e4m3_to_f32(uint8_t v) { return fp8e4m3_table()[v]; }
// On the float's bits, without the generic encoder's frexp / ldexp / division (~25 ns a value: the scalar cost
// that dominated --quantization fp8 loads and dummy FP8 weights); the same codes for every float (checked against
// encode_small on all 2^32 bit patterns when written). 0x7f is NaN; 0x7e = 448 is the largest finite value, and
// everything beyond it saturates there (e4m3fn has no infinities).
uint8_t f32_to_fp8e4m3(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  const uint32_t sign = (b >> 24) & 0x80u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448, inf included
  if (a >= 0x3c800000u) {  // >= 2^-6: normal; round the 23-bit mantissa to 3 bits, half to even
    const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;  // f32 exponent << 3 | mantissa (carry included)
    return static_cast<uint8_t>(sign | (r - (120u << 3)));          // rebias 127 -> 7
  }
  // Subnormal (quantum 2^-9): a * 2^9 < 8 is exact; adding and removing 2^23 rounds it half to even.
  float m;
  std::memcpy(&m, &a, sizeof m);
  const float q = (m * 512.0f + 8388608.0f) - 8388608.0f;
  return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
}

float fp8e5m2_to_f32(uint8_t v) { return f16_to_f32(static_cast<uint16_t>(v) << 8); }
uint8_t f32_to_fp8e5m2(float f) {
  return static_cast<uint8_t>(encode_small(f, 5, 2, false, 57344.0f, 0x7e, 0x7c));
}

float load_as_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF8E4M3: return fp8e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
    case DType::kF8E5M2: return fp8e5m2_to_f32(static_cast<const uint8_t*>(data)[i]);
    default: DS_CHECK(false, "load_as_f32 on non-float dtype ", dtype_name(t));
  }
  return 0;
}

}  // namespace ds
