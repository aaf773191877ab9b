// Block-FP8 reference implementations (see fp8.h).
#include "ops/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/env.h"

namespace ds {

float fp8_block_scale(float amax, bool ue8m0) {
  const float s = std::max(amax, kFp8ScaleFloor) / kFp8E4M3Max;
  return ue8m0 ? std::exp2(std::ceil(std::log2(s))) : s;
}

namespace {
// quantize_weight_fp8 over values read by at(i) (an index into the row-major [rows, cols] weight).
template <class At>
void quantize_blocks(At at, int64_t rows, int64_t cols, int bn, int bk, bool ue8m0, LinearWeight* out) {
  const int64_t gr = (rows + bn - 1) / bn, gc = (cols + bk - 1) / bk;
  uint8_t* q = out->weight.data_as<uint8_t>();
  for (int64_t bi = 0; bi < gr; ++bi)
    for (int64_t bj = 0; bj < gc; ++bj) {
      const int64_t r1 = std::min<int64_t>(rows, (bi + 1) * bn), c1 = std::min<int64_t>(cols, (bj + 1) * bk);
      float amax = 0;
      for (int64_t i = bi * bn; i < r1; ++i)
        for (int64_t j = bj * bk; j < c1; ++j) amax = std::max(amax, std::fabs(at(i * cols + j)));
      const float s = fp8_block_scale(amax, ue8m0);
      out->scale_inv.f32()[bi * gc + bj] = s;
      for (int64_t i = bi * bn; i < r1; ++i)
        for (int64_t j = bj * bk; j < c1; ++j) q[i * cols + j] = f32_to_fp8e4m3(at(i * cols + j) / s);
    }
}
}  // namespace

LinearWeight quantize_weight_fp8(const Tensor& w, int bn, int bk, bool ue8m0) {
  DS_CHECK(w.ndim() == 2 && bn > 0 && bk > 0 && w.device() == Device::kCpu, "quantize_weight_fp8 of ", w.describe());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const int64_t gr = (rows + bn - 1) / bn, gc = (cols + bk - 1) / bk;
  LinearWeight out;
  out.block_n = bn;
  out.block_k = bk;
  out.weight = Tensor::empty({rows, cols}, DType::kF8E4M3);
  out.scale_inv = Tensor::empty({gr, gc}, DType::kF32);
  if (w.dtype() == DType::kBF16) {  // checkpoints' dtype: read in place, no fp32 copy of the whole weight
    const uint16_t* v = w.data_as<uint16_t>();
    quantize_blocks([v](int64_t i) { return bf16_to_f32(v[i]); }, rows, cols, bn, bk, ue8m0, &out);
  } else {
    const Tensor f = to_f32(w);
    const float* v = f.f32();
    quantize_blocks([v](int64_t i) { return v[i]; }, rows, cols, bn, bk, ue8m0, &out);
  }
  return out;
}

void quantize_activations_fp8(const Tensor& x, int group, bool ue8m0, Tensor* q, Tensor* scales) {
  const int64_t T = x.dim(0), K = x.dim(1), G = (K + group - 1) / group;
  *q = Tensor::empty({T, K}, DType::kF8E4M3);
  *scales = Tensor::empty({T, G}, DType::kF32);
  const float* xv = x.f32();  // checked once, not per value (the accessor checks dtype and device)
  float* sv = scales->f32();
  uint8_t* qv = q->data_as<uint8_t>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t k0 = g * group, k1 = std::min<int64_t>(K, k0 + group);
      float amax = 0;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(xv[t * K + k]));
      const float s = fp8_block_scale(amax, ue8m0);
      sv[t * G + g] = s;
      for (int64_t k = k0; k < k1; ++k) qv[t * K + k] = f32_to_fp8e4m3(xv[t * K + k] / s);
    }
}

Tensor linear_w8a8_reference(const Tensor& x, const LinearWeight& w, bool ue8m0) {
  DS_CHECK(w.is_block_fp8() && w.block_k == 128, "linear_w8a8_reference needs a 128-block FP8 weight");
  DS_CHECK(x.ndim() == 2 && x.dim(1) == w.in_features(), "linear_w8a8 ", x.describe(), " x ", w.weight.describe());
  Tensor qx, sx;
  quantize_activations_fp8(x, 128, ue8m0, &qx, &sx);
  return linear_w8a8_quantized(qx, sx, w);
}

Tensor linear_w8a8_quantized(const Tensor& qx, const Tensor& sx, const LinearWeight& w) {
  DS_CHECK(w.is_block_fp8() && w.block_k == 128, "linear_w8a8_quantized needs a 128-block FP8 weight");
  const int64_t T = qx.dim(0), K = qx.dim(1), N = w.out_features();
  DS_CHECK(qx.ndim() == 2 && qx.dtype() == DType::kF8E4M3 && K == w.in_features() && sx.ndim() == 2 &&
               sx.dim(0) == T && sx.dim(1) == (K + 127) / 128 && sx.dtype() == DType::kF32,
           "linear_w8a8_quantized ", qx.describe(), " / ", sx.describe(), " x ", w.weight.describe());
  const int64_t G = sx.dim(1), gw = w.scale_inv.dim(1);
  Tensor y = Tensor::empty({T, N}, DType::kF32);
  // e4m3 decoded through the table (the tests run this at model sizes); the products are the same floats.
  const float* lut = fp8e4m3_table();
  std::vector<float> a(static_cast<size_t>(T * K));
  for (int64_t i = 0; i < T * K; ++i) a[i] = lut[qx.data_as<uint8_t>()[i]];
  const uint8_t* b = w.weight.data_as<uint8_t>();
  const float* sxv = sx.f32();
  const float* swv = w.scale_inv.f32();
  float* yv = y.f32();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0;
      for (int64_t g = 0; g < G; ++g) {
        float part = 0;
        for (int64_t k = g * 128; k < std::min<int64_t>(K, (g + 1) * 128); ++k) part += a[t * K + k] * lut[b[n * K + k]];
        acc += part * sxv[t * G + g] * swv[(n / w.block_n) * gw + g];
      }
      yv[t * N + n] = acc;
    }
  return y;
}

LinearWeight HeadsFp8::head(int64_t h) const {
  const int64_t H = heads(), N = out_features(), K = in_features();
  LinearWeight l;
  l.weight = w.reshape({H * N, K}).rows(h * N, (h + 1) * N);
  l.scale_inv = scale.reshape({H * N / 128, K / 128}).rows(h * N / 128, (h + 1) * N / 128);
  return l;
}

bool fp8_bmm_opted_in() {
  return env_flag("DSERVE_FP8_BMM", false);  // read per call: tests switch it around model loads
}

bool split_absorbed_fp8(const LinearWeight& kv_b, int64_t heads, int64_t nope, int64_t v, HeadsFp8* w_kc,
                        HeadsFp8* w_vc) {
  if (!kv_b.is_block_fp8() || kv_b.block_n != 128 || kv_b.block_k != 128 || kv_b.weight.dtype() != DType::kF8E4M3)
    return false;
  const int64_t lora = kv_b.in_features();
  if (nope % 128 != 0 || v % 128 != 0 || lora % 128 != 0 || heads <= 0) return false;
  DS_CHECK(kv_b.out_features() == heads * (nope + v), "kv_b_proj rows ", kv_b.out_features(), " for ", heads,
           " heads of ", nope, " + ", v);
  const int64_t lb = lora / 128, rb = (nope + v) / 128;  // scale blocks along lora; row blocks per head
  DS_CHECK(kv_b.scale_inv.dim(0) == heads * rb && kv_b.scale_inv.dim(1) == lb, "kv_b_proj scales ",
           kv_b.scale_inv.describe());
  HeadsFp8 kc, vc;
  kc.w = Tensor::empty({heads, lora, nope}, DType::kF8E4M3);
  kc.scale = Tensor::empty({heads, lb, nope / 128}, DType::kF32);
  vc.w = Tensor::empty({heads, v, lora}, DType::kF8E4M3);
  vc.scale = Tensor::empty({heads, v / 128, lb}, DType::kF32);
  kc.ue8m0 = vc.ue8m0 = fp8_scales_are_pow2(kv_b.scale_inv);
  const uint8_t* src = kv_b.weight.data_as<uint8_t>();
  const float* ss = kv_b.scale_inv.f32();
  for (int64_t h = 0; h < heads; ++h) {
    const uint8_t* uk = src + h * (nope + v) * lora;  // [nope, lora]
    uint8_t* kt = kc.w.data_as<uint8_t>() + h * lora * nope;
    for (int64_t r = 0; r < nope; ++r)
      for (int64_t c = 0; c < lora; ++c) kt[c * nope + r] = uk[r * lora + c];
    std::memcpy(vc.w.data_as<uint8_t>() + h * v * lora, uk + nope * lora, static_cast<size_t>(v * lora));
    // Block (row block rb_i of W_UK, column block c) is block (c, rb_i) of W_UK^T.
    for (int64_t c = 0; c < lb; ++c)
      for (int64_t r = 0; r < nope / 128; ++r)
        kc.scale.f32()[(h * lb + c) * (nope / 128) + r] = ss[(h * rb + r) * lb + c];
    for (int64_t r = 0; r < v / 128; ++r)
      for (int64_t c = 0; c < lb; ++c) vc.scale.f32()[(h * (v / 128) + r) * lb + c] = ss[(h * rb + nope / 128 + r) * lb + c];
  }
  *w_kc = std::move(kc);
  *w_vc = std::move(vc);
  return true;
}

Tensor bmm_heads_w8a8_reference(const Tensor& x, const HeadsFp8& w) {
  DS_CHECK(x.ndim() == 3 && x.dtype() == DType::kF32 && x.dim(1) == w.heads() && x.dim(2) == w.in_features(),
           "bmm_heads_w8a8_reference ", x.describe(), " x ", w.w.describe());
  const int64_t T = x.dim(0), H = x.dim(1), K = x.dim(2), N = w.out_features();
  Tensor out = Tensor::empty({T, H, N}, DType::kF32);
  Tensor xh = Tensor::empty({T, K}, DType::kF32);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < T; ++t) std::memcpy(xh.f32() + t * K, x.f32() + (t * H + h) * K, sizeof(float) * K);
    Tensor y = linear_w8a8_reference(xh, w.head(h), w.ue8m0);  // [T, N]
    for (int64_t t = 0; t < T; ++t) std::memcpy(out.f32() + (t * H + h) * N, y.f32() + t * N, sizeof(float) * N);
  }
  return out;
}

bool fp8_scales_are_pow2(const Tensor& scales) {
  for (int64_t i = 0; i < scales.numel(); ++i) {
    uint32_t b;
    std::memcpy(&b, scales.f32() + i, 4);
    if ((b & 0x7fffffu) != 0 || (b >> 23) == 0 || (b >> 31) != 0) return false;
  }
  return scales.numel() > 0;
}

bool fp8_mlp_is_native(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down) {
  for (const LinearWeight* w : {&gate, &up, &down})
    if (!w->is_block_fp8() || w->block_n != 128 || w->block_k != 128 || w->weight.dtype() != DType::kF8E4M3 ||
        w->scale_inv.dtype() != DType::kF32 || w->weight.ndim() != 2)
      return false;
  const int64_t inter = gate.out_features(), d = gate.in_features();
  return d % 128 == 0 && up.out_features() == inter && up.in_features() == d && down.out_features() == d &&
         down.in_features() == inter;
}

Fp8Mlp stack_mlp_fp8(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down) {
  DS_CHECK(fp8_mlp_is_native(gate, up, down), "stack_mlp_fp8 of ", gate.weight.describe(), " / ",
           down.weight.describe());
  const int64_t d = gate.in_features(), ip = (gate.out_features() + 127) / 128 * 128;
  return {stack_rows_fp8(pad_fp8(gate, ip, d), pad_fp8(up, ip, d)), pad_fp8(down, d, ip)};
}

LinearWeight pad_fp8(const LinearWeight& w, int64_t rows, int64_t cols) {
  const int64_t r0 = w.out_features(), c0 = w.in_features();
  DS_CHECK(w.is_block_fp8() && rows >= r0 && cols >= c0 && w.weight.device() == Device::kCpu &&
               w.scale_inv.device() == Device::kCpu && w.weight.dtype() == DType::kF8E4M3,
           "pad_fp8 of ", w.weight.describe(), " to ", rows, " x ", cols);
  if (rows == r0 && cols == c0) return w;
  LinearWeight out;
  out.block_n = w.block_n;
  out.block_k = w.block_k;
  out.weight = Tensor::empty({rows, cols}, DType::kF8E4M3);
  std::memset(out.weight.data(), 0, out.weight.nbytes());
  for (int64_t r = 0; r < r0; ++r)
    std::memcpy(out.weight.data_as<uint8_t>() + r * cols, w.weight.data_as<uint8_t>() + r * c0, static_cast<size_t>(c0));
  const int64_t gr0 = w.scale_inv.dim(0), gc0 = w.scale_inv.dim(1);
  const int64_t gr = (rows + w.block_n - 1) / w.block_n, gc = (cols + w.block_k - 1) / w.block_k;
  out.scale_inv = Tensor::empty({gr, gc}, DType::kF32);
  for (int64_t i = 0; i < gr; ++i)
    for (int64_t j = 0; j < gc; ++j)
      out.scale_inv.f32()[i * gc + j] = i < gr0 && j < gc0 ? w.scale_inv.f32()[i * gc0 + j] : 1.0f;
  return out;
}

LinearWeight stack_rows_fp8(const LinearWeight& a, const LinearWeight& b) {
  DS_CHECK(a.is_block_fp8() && b.is_block_fp8() && a.block_n == b.block_n && a.block_k == b.block_k &&
               a.in_features() == b.in_features() && a.out_features() % a.block_n == 0 &&
               a.weight.dtype() == b.weight.dtype() && a.scale_inv.dim(1) == b.scale_inv.dim(1),
           "stack_rows_fp8 of ", a.weight.describe(), " and ", b.weight.describe());
  for (const Tensor* t : {&a.weight, &b.weight, &a.scale_inv, &b.scale_inv})
    DS_CHECK(t->device() == Device::kCpu, "stack_rows_fp8 takes host tensors, got ", t->describe());
  LinearWeight out;
  out.block_n = a.block_n;
  out.block_k = a.block_k;
  out.weight = Tensor::empty({a.out_features() + b.out_features(), a.in_features()}, a.weight.dtype());
  std::memcpy(out.weight.data(), a.weight.data(), a.weight.nbytes());
  std::memcpy(static_cast<char*>(out.weight.data()) + a.weight.nbytes(), b.weight.data(), b.weight.nbytes());
  out.scale_inv = Tensor::empty({a.scale_inv.dim(0) + b.scale_inv.dim(0), a.scale_inv.dim(1)}, DType::kF32);
  std::memcpy(out.scale_inv.data(), a.scale_inv.data(), a.scale_inv.nbytes());
  std::memcpy(static_cast<char*>(out.scale_inv.data()) + a.scale_inv.nbytes(), b.scale_inv.data(),
              b.scale_inv.nbytes());
  return out;
}

LinearWeight random_e4m3_weight(int64_t n, int64_t k, uint64_t seed, float scale) {
  LinearWeight w;
  w.weight = Tensor::empty({n, k}, DType::kF8E4M3);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;  // xorshift needs a nonzero state
  uint8_t* b = w.weight.data_as<uint8_t>();
  for (int64_t i = 0; i < n * k; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b[i] = static_cast<uint8_t>(x >> 24) & 0xF7;
  }
  w.scale_inv = Tensor::empty({(n + 127) / 128, (k + 127) / 128}, DType::kF32);
  for (int64_t i = 0; i < w.scale_inv.numel(); ++i) w.scale_inv.f32()[i] = scale;
  return w;
}

void fp8_kv_round_trip(Tensor& rows, int64_t nope, bool ue8m0) {
  const int64_t T = rows.dim(0), D = rows.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    float* r = rows.f32() + t * D;
    for (int64_t g = 0; g < nope; g += 128) {
      const int64_t e = std::min<int64_t>(nope, g + 128);
      float amax = 0;
      for (int64_t k = g; k < e; ++k) amax = std::max(amax, std::fabs(r[k]));
      const float s = fp8_block_scale(amax, ue8m0);
      for (int64_t k = g; k < e; ++k) r[k] = fp8e4m3_to_f32(f32_to_fp8e4m3(r[k] / s)) * s;
    }
    for (int64_t k = nope; k < D; ++k) r[k] = round_bf16(r[k]);
  }
}

}  // namespace ds
