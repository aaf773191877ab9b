// The CPU backend: plain fp32 reference implementations of every op in ops/ops.h. Clarity over speed;
// this is the oracle the CUDA backend is checked against.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "core/env.h"
#include "ops/fp8.h"
#include "ops/ops.h"

namespace ds {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

const int32_t* i32(const Tensor& t) {
  DS_CHECK(t.dtype() == DType::kI32 && t.device() == Device::kCpu, "expected I32 cpu tensor, got ", t.describe());
  return t.data_as<int32_t>();
}

float dot(const float* a, const float* b, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Dequantizes a block-FP8 (or any float) weight to fp32 into o (out_features x in_features floats).
void dequantize_into(const LinearWeight& w, float* o) {
  const int64_t rows = w.out_features(), cols = w.in_features();
  to_f32_into(w.weight, o);
  if (!w.is_block_fp8()) return;
  Tensor scale = to_f32(w.scale_inv);
  const int64_t scale_cols = scale.dim(1);
  const float* s = scale.f32();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) o[i * cols + j] *= s[(i / w.block_n) * scale_cols + j / w.block_k];
}
Tensor dequantize(const LinearWeight& w) {
  Tensor out = Tensor::empty({w.out_features(), w.in_features()}, DType::kF32);
  dequantize_into(w, out.f32());
  return out;
}

// Context position s of sequence seq -> cache slot.
struct SlotLookup {
  const int32_t* table;
  int64_t max_pages;
  int page_size;
  int64_t operator()(int seq, int64_t pos) const {
    return static_cast<int64_t>(table[seq * max_pages + pos / page_size]) * page_size + pos % page_size;
  }
};
SlotLookup slots_of(const AttnMetadata& m) {
  return SlotLookup{i32(m.block_table), m.block_table.dim(1), m.page_size};
}

// Softmax-weighted attention of one query over `n` scores (already scaled, -inf = masked) in place.
void softmax_inplace(std::vector<float>& s) {
  float mx = kNegInf;
  for (float v : s) mx = std::max(mx, v);
  double sum = 0;
  for (float& v : s) {
    v = (v == kNegInf) ? 0.0f : std::exp(v - mx);
    sum += v;
  }
  for (float& v : s) v = sum > 0 ? static_cast<float>(v / sum) : 0.0f;  // nothing attended: zeros
}

// ln sum exp(s) over the scores softmax_inplace would weigh (-inf where all are masked or there are none).
float log_sum_exp(const std::vector<float>& s) {
  float mx = kNegInf;
  for (float v : s) mx = std::max(mx, v);
  if (mx == kNegInf) return kNegInf;
  double sum = 0;
  for (float v : s) sum += v == kNegInf ? 0.0 : std::exp(static_cast<double>(v - mx));
  return mx + static_cast<float>(std::log(sum));
}

// allowed[s] for one query from its DSA top-k list (all allowed when topk is null).
void allowed_positions(const Tensor* topk, int64_t t, int64_t ctx_len, std::vector<char>* allowed) {
  allowed->assign(ctx_len, topk ? 0 : 1);
  if (!topk) return;
  const int32_t* idx = i32(*topk) + t * topk->dim(1);
  for (int64_t k = 0; k < topk->dim(1); ++k)
    if (idx[k] >= 0 && idx[k] < ctx_len) (*allowed)[idx[k]] = 1;
}

class CpuOps final : public Ops {
 public:
  // DSERVE_FP8_NATIVE=1: the linears CUDA runs natively (prepare_linear with 128x128 block scales; MLPs and
  // experts where fp8_mlp_is_native) run with W8A8 semantics (ops/fp8.h linear_w8a8_reference), so the CPU is the
  // oracle of the native CUDA path (CUDA's default). Unset, the CPU dequantizes: the transformers reference's
  // semantics, and the fp32 reference backend's default.
  CpuOps() {
    w8a8_ = env_flag("DSERVE_FP8_NATIVE", false);
    // DSERVE_FP8_FUSED_NORM=0: no FP8 activations from the norms (rms_norm_q), each linear quantizes for itself.
    fused_norm_ = env_flag("DSERVE_FP8_FUSED_NORM", true);
  }
  Device device() const override { return Device::kCpu; }
  DType activation_dtype() const override { return DType::kF32; }

  Tensor prepare_param(const Tensor& host) override { return to_f32(host); }
  LinearWeight prepare_linear(const LinearWeight& host) override {
    if (w8a8_ && host.is_block_fp8() && host.block_n == 128 && host.block_k == 128) return host;
    LinearWeight w;
    w.weight = dequantize(host);
    return w;
  }
  PreparedMlp prepare_mlp(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& down) override {
    DS_CHECK(gate.out_features() == up.out_features() && gate.in_features() == up.in_features());
    if (w8a8_ && fp8_mlp_is_native(gate, up, down)) {
      Fp8Mlp m = stack_mlp_fp8(gate, up, down);
      return {m.gate_up, m.down};
    }
    // [gate; up], each dequantized in place (no fp32 copy of each to stack).
    Tensor gu = Tensor::empty({2 * gate.out_features(), gate.in_features()}, DType::kF32);
    dequantize_into(gate, gu.f32());
    dequantize_into(up, gu.f32() + gate.out_features() * gate.in_features());
    PreparedMlp m;
    m.gate_up.weight = gu;
    m.down = prepare_linear(down);
    return m;
  }
  void prepare_absorbed(const LinearWeight& kv_b, int heads, int64_t nope, int64_t v, Tensor* w_kc,
                        Tensor* w_vc) override {
    Tensor w = dequantize(kv_b);  // [H * (nope + v), kv_lora]
    const int64_t lora = w.dim(1);
    DS_CHECK(w.dim(0) == heads * (nope + v), "kv_b_proj rows ", w.dim(0));
    *w_kc = Tensor::empty({heads, nope, lora}, DType::kF32);
    *w_vc = Tensor::empty({heads, lora, v}, DType::kF32);
    const float* src = w.f32();
    for (int h = 0; h < heads; ++h) {
      const float* blk = src + h * (nope + v) * lora;
      std::memcpy(w_kc->f32() + h * nope * lora, blk, sizeof(float) * nope * lora);  // W_UK[h]: [nope, lora]
      float* vc = w_vc->f32() + h * lora * v;
      for (int64_t r = 0; r < v; ++r)  // W_UV[h]: [v, lora] -> transposed [lora, v]
        for (int64_t c = 0; c < lora; ++c) vc[c * v + r] = blk[(nope + r) * lora + c];
    }
  }

  bool prepare_absorbed_fp8(const LinearWeight& kv_b, int heads, int64_t nope, int64_t v, HeadsFp8* w_kc,
                            HeadsFp8* w_vc) override {
    if (!w8a8_ || !fp8_bmm_opted_in()) return false;
    return split_absorbed_fp8(kv_b, heads, nope, v, w_kc, w_vc);
  }
  Tensor bmm_heads_fp8(const Tensor& x, const HeadsFp8& w) override { return bmm_heads_w8a8_reference(to_f32(x), w); }

  Tensor empty(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype); }
  Tensor upload(const Tensor& host) override {
    Tensor t = Tensor::empty(host.shape(), host.dtype());
    std::memcpy(t.data(), host.data(), host.nbytes());
    return t;
  }
  Tensor to_host(const Tensor& t) override { return t; }
  void fill(Tensor& t, float value) override {
    float* p = t.f32();
    std::fill(p, p + t.numel(), value);
  }
  void zero_(Tensor& t) override { std::memset(t.data(), 0, t.nbytes()); }
  void copy_(Tensor& dst, const Tensor& src) override {
    DS_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "copy_ of ", src.describe(), " into ",
             dst.describe());
    std::memcpy(dst.data(), src.data(), src.nbytes());
  }

  Tensor embedding(const Tensor& table, const Tensor& ids) override {
    DS_CHECK_SHAPE(table, {-1, -1});
    const int64_t n = ids.numel(), d = table.dim(1);
    Tensor out = Tensor::empty({n, d}, DType::kF32);
    const int32_t* id = i32(ids);
    for (int64_t t = 0; t < n; ++t) {
      DS_CHECK(id[t] >= 0 && id[t] < table.dim(0), "token id ", id[t], " out of range");
      std::memcpy(out.f32() + t * d, table.f32() + id[t] * d, sizeof(float) * d);
    }
    return out;
  }

  Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) override {
    DS_CHECK_SHAPE(x, {-1, w.dim(0)});
    const int64_t rows = x.dim(0), n = x.dim(1);
    Tensor out = Tensor::empty({rows, n}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
      float* o = out.f32() + r * n;
      for (int64_t i = 0; i < n; ++i) o[i] = w.f32()[i] * (xr[i] * inv);
    }
    return out;
  }
  Tensor add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps) override {
    add_(residual, x);
    return rms_norm(residual, w, eps);
  }
  Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) override {
    DS_CHECK_SHAPE(x, {-1, w.dim(0)});
    const int64_t rows = x.dim(0), n = x.dim(1);
    Tensor out = Tensor::empty({rows, n}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * n;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= n;
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      var /= n;
      float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
      float* o = out.f32() + r * n;
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(xr[i] - mean) * inv * w.f32()[i] + b.f32()[i];
    }
    return out;
  }
  void add_(Tensor& acc, const Tensor& x) override {
    DS_CHECK(acc.numel() == x.numel(), acc.describe(), " += ", x.describe());
    float* a = acc.f32();
    const float* b = x.f32();
    for (int64_t i = 0; i < acc.numel(); ++i) a[i] += b[i];
  }
  Tensor silu_mul(const Tensor& gate_up) override {
    const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
    DS_CHECK(gate_up.dim(1) == 2 * inter);
    Tensor out = Tensor::empty({rows, inter}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) {
      const float* g = gate_up.f32() + r * 2 * inter;
      const float* u = g + inter;
      float* o = out.f32() + r * inter;
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
    return out;
  }
  Tensor concat_cols(const Tensor& a, const Tensor& b) override {
    DS_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.dim(0) == b.dim(0), a.describe(), " | ", b.describe());
    const int64_t rows = a.dim(0), n = a.dim(1), m = b.dim(1);
    Tensor out = Tensor::empty({rows, n + m}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out.f32() + r * (n + m), a.f32() + r * n, sizeof(float) * n);
      std::memcpy(out.f32() + r * (n + m) + n, b.f32() + r * m, sizeof(float) * m);
    }
    return out;
  }
  Tensor slice_cols(const Tensor& x, int64_t begin, int64_t end) override {
    DS_CHECK(x.ndim() == 2 && 0 <= begin && begin <= end && end <= x.dim(1), "slice_cols ", begin, ":", end,
             " of ", x.describe());
    const int64_t rows = x.dim(0), n = x.dim(1), w = end - begin;
    Tensor out = Tensor::empty({rows, w}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out.f32() + r * w, x.f32() + r * n + begin, sizeof(float) * w);
    return out;
  }
  Tensor select_rows(const Tensor& x, const std::vector<int64_t>& rows) override {
    DS_CHECK(x.ndim() == 2 && (x.dtype() == DType::kF32 || x.dtype() == DType::kI32), "select_rows of ", x.describe());
    const int64_t n = x.dim(1);
    Tensor out = Tensor::empty({static_cast<int64_t>(rows.size()), n}, x.dtype());
    const size_t row_bytes = sizeof(float) * static_cast<size_t>(n);  // (both dtypes are 4 bytes)
    for (size_t i = 0; i < rows.size(); ++i) {
      DS_CHECK(rows[i] >= 0 && rows[i] < x.dim(0));
      std::memcpy(static_cast<char*>(out.data()) + i * row_bytes, static_cast<const char*>(x.data()) + rows[i] * row_bytes,
                  row_bytes);
    }
    return out;
  }

  // The FP8 activations (W8A8 mode): the normed output quantized as linear_w8a8_reference would quantize it,
  // and the _q ops read it wherever the weight takes the same scales, so the plumbing is checked here too.
  Tensor rms_norm_q(Tensor* residual, const Tensor& x, const Tensor& w, float eps, const LinearWeight& consumer,
                    Fp8Act* xq) override {
    Tensor out = residual ? add_rms_norm(*residual, x, w, eps) : rms_norm(x, w, eps);
    *xq = Fp8Act{};
    if (w8a8_ && fused_norm_ && consumer.is_block_fp8()) {
      xq->ue8m0 = fp8_scales_are_pow2(consumer.scale_inv);
      quantize_activations_fp8(out, 128, xq->ue8m0, &xq->q, &xq->scales);
    }
    return out;
  }
  void linear_pair_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w1, const LinearWeight& w2, Tensor* y1,
                     Tensor* y2) override {
    *y1 = linear_q(x, xq, w1);
    *y2 = linear_q(x, xq, w2);
  }
  Tensor linear_silu_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& gate_up) override {
    return silu_mul(linear_q(x, xq, gate_up));
  }
  Tensor moe_experts_q(const Tensor& x, const Fp8Act& xq, const Tensor& topk_ids, const Tensor& topk_weights,
                       const std::vector<PreparedMlp>& experts) override {
    return moe_experts_impl(x, &xq, topk_ids, topk_weights, experts);
  }
  // linear(x, w) from x's quantization where it was made for w's activation scales.
  Tensor linear_q(const Tensor& x, const Fp8Act& xq, const LinearWeight& w) override {
    if (w8a8_ && w.is_block_fp8() && xq.defined() && xq.ue8m0 == fp8_scales_are_pow2(w.scale_inv)) {
      DS_CHECK(xq.q.dim(0) == x.dim(0) && xq.q.dim(1) == x.dim(1), "fp8 activation ", xq.q.describe(), " for x ",
               x.describe());
      return linear_w8a8_quantized(xq.q, xq.scales, w);
    }
    return linear(x, w);
  }

  Tensor linear(const Tensor& x, const LinearWeight& w) override {
    if (w8a8_ && w.is_block_fp8()) return linear_w8a8_reference(to_f32(x), w, fp8_scales_are_pow2(w.scale_inv));
    DS_CHECK(!w.is_block_fp8(), "cpu linear expects a prepared (dequantized) weight");
    return linear_f32(x, w.weight);
  }
  Tensor linear_f32(const Tensor& x, const Tensor& w) override {
    DS_CHECK(x.ndim() == 2 && w.ndim() == 2, "linear ", x.describe(), " x ", w.describe());
    Tensor out = Tensor::empty({x.dim(0), w.dim(0)}, DType::kF32);
    linear_f32_into(x, w, out);
    return out;
  }
  void linear_f32_into(const Tensor& x, const Tensor& w, Tensor& out) override {
    DS_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1), "linear ", x.describe(), " x ", w.describe());
    const int64_t rows = x.dim(0), in = x.dim(1), out_n = w.dim(0);
    DS_CHECK(out.dtype() == DType::kF32 && out.ndim() == 2 && out.dim(0) == rows && out.dim(1) == out_n,
             "linear_f32 output ", out.describe(), " for ", x.describe(), " x ", w.describe());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * in;
      float* o = out.f32() + r * out_n;
      for (int64_t j = 0; j < out_n; ++j) o[j] = dot(xr, w.f32() + j * in, in);
    }
  }
  Tensor bmm_heads(const Tensor& x, const Tensor& w) override {
    DS_CHECK(x.ndim() == 3 && w.ndim() == 3 && x.dim(1) == w.dim(0) && x.dim(2) == w.dim(1), "bmm_heads ",
             x.describe(), " x ", w.describe());
    const int64_t T = x.dim(0), H = x.dim(1), K = x.dim(2), N = w.dim(2);
    Tensor out = Tensor::empty({T, H, N}, DType::kF32);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const float* xv = x.f32() + (t * H + h) * K;
        const float* wh = w.f32() + h * K * N;
        float* o = out.f32() + (t * H + h) * N;
        std::fill(o, o + N, 0.0f);
        for (int64_t k = 0; k < K; ++k) {
          const float xk = xv[k];
          const float* wr = wh + k * N;
          for (int64_t n = 0; n < N; ++n) o[n] += xk * wr[n];
        }
      }
    return out;
  }

  void rope_(Tensor& x, int64_t off, int64_t dim, const Tensor& positions, const Tensor& inv_freq,
             float attn_factor, RopeStyle style) override {
    DS_CHECK(x.ndim() == 3 && off + dim <= x.dim(2) && inv_freq.numel() == dim / 2, "rope on ", x.describe());
    const int64_t T = x.dim(0), H = x.dim(1), hd = x.dim(2), half = dim / 2;
    const int32_t* pos = i32(positions);
    std::vector<float> cs(half), sn(half);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        float angle = static_cast<float>(pos[t]) * inv_freq.f32()[i];  // fp32 product, as transformers
        cs[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * attn_factor;
        sn[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * attn_factor;
      }
      for (int64_t h = 0; h < H; ++h) {
        float* v = x.f32() + (t * H + h) * hd + off;
        for (int64_t i = 0; i < half; ++i) {
          float* a = style == RopeStyle::kInterleaved ? &v[2 * i] : &v[i];
          float* b = style == RopeStyle::kInterleaved ? &v[2 * i + 1] : &v[i + half];
          float x0 = *a, x1 = *b;
          *a = x0 * cs[i] - x1 * sn[i];
          *b = x1 * cs[i] + x0 * sn[i];
        }
      }
    }
  }

  void store_rows(Tensor& cache, const Tensor& rows, const Tensor& slot_mapping) override {
    DS_CHECK(cache.ndim() == 2 && rows.ndim() == 2 && cache.dim(1) == rows.dim(1) &&
             slot_mapping.numel() == rows.dim(0), "store_rows ", rows.describe(), " into ", cache.describe());
    const int64_t d = cache.dim(1);
    const int32_t* slots = i32(slot_mapping);
    for (int64_t t = 0; t < rows.dim(0); ++t) {
      DS_CHECK(slots[t] >= 0 && slots[t] < cache.dim(0), "slot ", slots[t]);
      std::memcpy(cache.f32() + slots[t] * d, rows.f32() + t * d, sizeof(float) * d);
    }
  }
  // The CPU cache stays fp32; the stored values are rounded exactly as the packed formats would hold them.
  void store_latent_rows(Tensor& cache, const Tensor& rows, const Tensor& slot_mapping, int64_t nope,
                         KvCacheDtype dtype) override {
    if (dtype == KvCacheDtype::kAuto) return store_rows(cache, rows, slot_mapping);
    Tensor r = to_f32(rows);
    if (dtype == KvCacheDtype::kBf16) {
      for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = round_bf16(r.f32()[i]);
    } else if (dtype == KvCacheDtype::kFp8E4M3) {
      fp8_kv_round_trip(r, nope, /*ue8m0=*/false);
    } else {  // e5m2: SGLang's plain cast of the whole row (no scale)
      for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = fp8e5m2_to_f32(f32_to_fp8e5m2(r.f32()[i]));
    }
    store_rows(cache, r, slot_mapping);
  }
  Tensor gather_context(const Tensor& cache, const AttnMetadata& m) override {
    const int32_t* lens = i32(m.seq_lens);
    int64_t total = 0;
    for (int s = 0; s < m.num_seqs; ++s) total += lens[s];
    const int64_t d = cache.dim(1);
    Tensor out = Tensor::empty({total, d}, DType::kF32);
    SlotLookup slot = slots_of(m);
    int64_t row = 0;
    for (int s = 0; s < m.num_seqs; ++s)
      for (int64_t p = 0; p < lens[s]; ++p, ++row)
        std::memcpy(out.f32() + row * d, cache.f32() + slot(s, p) * d, sizeof(float) * d);
    return out;
  }

  Tensor mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                           const AttnMetadata& m, float scale, const Tensor* topk, Tensor* lse) override {
    const int64_t T = q.dim(0), H = q.dim(1), dqk = q.dim(2);
    const int64_t S = kv.dim(0), dkv = kv.dim(2);
    const int64_t rope = ctx.dim(1) - rope_offset;
    const int64_t nope = dqk - rope, v = dkv - nope;
    DS_CHECK(kv.dim(1) == H && ctx.dim(0) == S && rope > 0 && v > 0, "mla_attention_mha q ", q.describe(),
             " kv ", kv.describe(), " ctx ", ctx.describe());
    const int32_t* qs = i32(m.q_starts);
    const int32_t* lens = i32(m.seq_lens);
    const int32_t* pos = i32(m.positions);
    Tensor out = Tensor::empty({T, H, v}, DType::kF32);
    if (lse) *lse = Tensor::empty({T, H}, DType::kF32);
    std::vector<float> sc;
    std::vector<char> allowed;
    int64_t ctx_base = 0;
    for (int s = 0; s < m.num_seqs; ++s) {
      const int64_t L = lens[s];
      for (int64_t t = qs[s]; t < qs[s + 1]; ++t) {
        allowed_positions(topk, t, L, &allowed);
        for (int64_t h = 0; h < H; ++h) {
          const float* qv = q.f32() + (t * H + h) * dqk;
          sc.assign(L, kNegInf);
          for (int64_t j = 0; j <= pos[t] && j < L; ++j) {
            if (!allowed[j]) continue;
            const float* kn = kv.f32() + ((ctx_base + j) * H + h) * dkv;
            const float* kr = ctx.f32() + (ctx_base + j) * ctx.dim(1) + rope_offset;
            sc[j] = (dot(qv, kn, nope) + dot(qv + nope, kr, rope)) * scale;
          }
          if (lse) lse->f32()[t * H + h] = log_sum_exp(sc);
          softmax_inplace(sc);
          float* o = out.f32() + (t * H + h) * v;
          std::fill(o, o + v, 0.0f);
          for (int64_t j = 0; j < L; ++j) {
            if (sc[j] == 0.0f) continue;
            const float* vv = kv.f32() + ((ctx_base + j) * H + h) * dkv + nope;
            for (int64_t c = 0; c < v; ++c) o[c] += sc[j] * vv[c];
          }
        }
      }
      ctx_base += L;
    }
    return out;
  }

  void merge_attention_parts_(Tensor& o, Tensor& lse, const Tensor& o_part, const Tensor& lse_part) override {
    DS_CHECK(o.ndim() == 3 && o.shape() == o_part.shape() && lse.ndim() == 2 && lse.shape() == lse_part.shape() &&
                 lse.dim(0) == o.dim(0) && lse.dim(1) == o.dim(1),
             "merge_attention_parts_ o ", o.describe(), " lse ", lse.describe(), " parts ", o_part.describe(), " ",
             lse_part.describe());
    const int64_t rows = lse.numel(), v = o.dim(2);
    for (int64_t r = 0; r < rows; ++r) {
      const float la = lse.f32()[r], lb = lse_part.f32()[r];
      const float mx = std::max(la, lb);
      if (mx == kNegInf) continue;
      const float wa = la == kNegInf ? 0.0f : std::exp(la - mx), wb = lb == kNegInf ? 0.0f : std::exp(lb - mx);
      float* a = o.f32() + r * v;
      const float* b = o_part.f32() + r * v;
      for (int64_t c = 0; c < v; ++c) a[c] = ((wa == 0.0f ? 0.0f : wa * a[c]) + (wb == 0.0f ? 0.0f : wb * b[c])) / (wa + wb);
      lse.f32()[r] = mx + std::log(wa + wb);
    }
  }

  Tensor mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                float scale, const Tensor* topk) override {
    const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2);
    DS_CHECK(cache.dim(1) == D && v_dim <= D, "absorbed attention q ", q.describe(), " cache ", cache.describe());
    const int32_t* qs = i32(m.q_starts);
    const int32_t* lens = i32(m.seq_lens);
    const int32_t* pos = i32(m.positions);
    SlotLookup slot = slots_of(m);
    Tensor out = Tensor::empty({T, H, v_dim}, DType::kF32);
    std::vector<float> sc;
    std::vector<const float*> rows;
    std::vector<char> allowed;
    for (int s = 0; s < m.num_seqs; ++s) {
      const int64_t L = lens[s];
      rows.resize(L);
      for (int64_t j = 0; j < L; ++j) rows[j] = cache.f32() + slot(s, j) * D;
      for (int64_t t = qs[s]; t < qs[s + 1]; ++t) {
        allowed_positions(topk, t, L, &allowed);
        for (int64_t h = 0; h < H; ++h) {
          const float* qv = q.f32() + (t * H + h) * D;
          sc.assign(L, kNegInf);
          for (int64_t j = 0; j <= pos[t] && j < L; ++j)
            if (allowed[j]) sc[j] = dot(qv, rows[j], D) * scale;
          softmax_inplace(sc);
          float* o = out.f32() + (t * H + h) * v_dim;
          std::fill(o, o + v_dim, 0.0f);
          for (int64_t j = 0; j < L; ++j) {
            if (sc[j] == 0.0f) continue;
            for (int64_t c = 0; c < v_dim; ++c) o[c] += sc[j] * rows[j][c];
          }
        }
      }
    }
    return out;
  }

  Tensor indexer_topk(const Tensor& q, const Tensor& w, const Tensor& k_cache, const AttnMetadata& m, int topk,
                      float scale, float w_scale) override {
    const int64_t T = q.dim(0), Hi = q.dim(1), D = q.dim(2);
    DS_CHECK(w.dim(0) == T && w.dim(1) == Hi && k_cache.dim(1) == D, "indexer q ", q.describe(), " w ",
             w.describe(), " k ", k_cache.describe());
    const int32_t* qs = i32(m.q_starts);
    const int32_t* pos = i32(m.positions);
    SlotLookup slot = slots_of(m);
    Tensor out = Tensor::empty({T, topk}, DType::kI32);
    int32_t* o = out.data_as<int32_t>();
    std::fill(o, o + T * topk, -1);
    std::vector<float> score;
    std::vector<int32_t> order;
    for (int s = 0; s < m.num_seqs; ++s)
      for (int64_t t = qs[s]; t < qs[s + 1]; ++t) {
        const int64_t n = pos[t] + 1;
        score.assign(n, 0.0f);
        for (int64_t j = 0; j < n; ++j) {
          const float* k = k_cache.f32() + slot(s, j) * D;
          float acc = 0;
          for (int64_t h = 0; h < Hi; ++h)
            acc += (w.f32()[t * Hi + h] * w_scale) * std::max(0.0f, dot(q.f32() + (t * Hi + h) * D, k, D) * scale);
          score[j] = acc;
        }
        const int64_t keep = std::min<int64_t>(topk, n);
        order.resize(n);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
          return score[a] > score[b] || (score[a] == score[b] && a < b);
        });
        std::sort(order.begin(), order.begin() + keep);  // the chosen positions in ascending order
        for (int64_t k = 0; k < keep; ++k) o[t * topk + k] = order[k];
      }
    return out;
  }

  void moe_count_experts(const Tensor& topk_ids, int num_experts, const Tensor& real_rows, Tensor& counts) override {
    DS_CHECK_SHAPE(topk_ids, {-1, -1});
    DS_CHECK_SHAPE(counts, {num_experts});
    (void)i32(counts);  // checks the dtype and device
    int32_t* count = counts.data_as<int32_t>();
    int64_t rows = topk_ids.dim(0);
    if (real_rows.defined()) rows = std::min<int64_t>(rows, std::max<int32_t>(i32(real_rows)[0], 0));
    const int32_t* id = i32(topk_ids);
    for (int64_t i = 0; i < rows * topk_ids.dim(1); ++i)
      if (id[i] >= 0 && id[i] < num_experts) ++count[id[i]];
  }

  void moe_record_ids(const Tensor& topk_ids, int k, int64_t column, Tensor& out) override {
    DS_CHECK_SHAPE(topk_ids, {-1, -1});
    DS_CHECK_SHAPE(out, {-1, -1});
    const int64_t T = topk_ids.dim(0), W = topk_ids.dim(1), n = out.dim(1);
    DS_CHECK(k >= 0 && k <= W && column >= 0 && column + k <= n && T <= out.dim(0), "moe_record_ids: ",
             topk_ids.describe(), " k ", k, " at column ", column, " of ", out.describe());
    const int32_t* id = i32(topk_ids);
    int32_t* o = out.data_as<int32_t>();
    (void)i32(out);
    for (int64_t t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) o[t * n + column + j] = id[t * W + j];
  }

  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, Tensor* topk_ids,
                 Tensor* topk_weights) override {
    const int64_t T = logits.dim(0), E = logits.dim(1);
    DS_CHECK(E == r.num_experts && E % r.n_group == 0, "router logits ", logits.describe());
    const int W = r.width();
    *topk_ids = Tensor::empty({T, W}, DType::kI32);
    *topk_weights = Tensor::empty({T, W}, DType::kF32);
    const int64_t per_group = E / r.n_group;
    std::vector<float> scores(E), choice(E), group_score(r.n_group);
    std::vector<int> idx(std::max<int64_t>(E, r.n_group));
    for (int64_t t = 0; t < T; ++t) {
      const float* z = logits.f32() + t * E;
      if (r.sigmoid) {
        for (int64_t e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-z[e]));
      } else {
        float mx = *std::max_element(z, z + E);
        double sum = 0;
        for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(z[e] - mx));
        for (int64_t e = 0; e < E; ++e) scores[e] = static_cast<float>(std::exp(static_cast<double>(z[e] - mx)) / sum);
      }
      for (int64_t e = 0; e < E; ++e) choice[e] = scores[e] + (bias.defined() ? bias.f32()[e] : 0.0f);
      if (r.method != MoeRouting::Method::kGreedy) {
        // Group score: max (V2 group_limited_greedy) or sum of the top two (V3 noaux_tc).
        for (int g = 0; g < r.n_group; ++g) {
          std::vector<float> v(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
          std::sort(v.begin(), v.end(), std::greater<float>());
          group_score[g] = r.method == MoeRouting::Method::kNoauxTc ? v[0] + (v.size() > 1 ? v[1] : 0.0f) : v[0];
        }
        std::iota(idx.begin(), idx.begin() + r.n_group, 0);
        // Ties go to the lower index (partial_sort is not stable; the CUDA kernels break ties this way).
        std::partial_sort(idx.begin(), idx.begin() + r.topk_group, idx.begin() + r.n_group, [&](int a, int b) {
          return group_score[a] > group_score[b] || (group_score[a] == group_score[b] && a < b);
        });
        std::vector<char> keep(r.n_group, 0);
        for (int g = 0; g < r.topk_group; ++g) keep[idx[g]] = 1;
        for (int64_t e = 0; e < E; ++e)
          if (!keep[e / per_group]) choice[e] = kNegInf;
      }
      std::iota(idx.begin(), idx.begin() + E, 0);
      std::partial_sort(idx.begin(), idx.begin() + r.top_k, idx.begin() + E,
                        [&](int a, int b) { return choice[a] > choice[b] || (choice[a] == choice[b] && a < b); });
      int32_t* ids = topk_ids->data_as<int32_t>() + t * W;
      float* wts = topk_weights->f32() + t * W;
      double sum = 0;
      for (int k = 0; k < r.top_k; ++k) {
        ids[k] = idx[k];
        wts[k] = scores[idx[k]];  // weights use the unbiased scores
        sum += wts[k];
      }
      for (int k = 0; k < r.top_k; ++k) {
        if (r.norm_topk_prob) wts[k] = static_cast<float>(wts[k] / (sum + 1e-20));
        wts[k] *= r.routed_scaling_factor;
      }
      for (int k = 0; k < r.shared_experts; ++k) {  // the shared experts, added unweighted
        ids[r.top_k + k] = static_cast<int32_t>(E + k);
        wts[r.top_k + k] = 1.0f;
      }
    }
  }

  Tensor moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                     const std::vector<PreparedMlp>& experts) override {
    return moe_experts_impl(x, nullptr, topk_ids, topk_weights, experts);
  }
  Tensor moe_experts_impl(const Tensor& x, const Fp8Act* xq, const Tensor& topk_ids, const Tensor& topk_weights,
                          const std::vector<PreparedMlp>& experts) {
    const int64_t T = x.dim(0), d = x.dim(1), K = topk_ids.dim(1);
    Tensor out = Tensor::zeros({T, d}, DType::kF32);
    const int32_t* ids = i32(topk_ids);
    for (int64_t t = 0; t < T; ++t) {
      Tensor xt = x.rows(t, t + 1);
      Fp8Act xqt;
      if (xq && xq->defined()) xqt = Fp8Act{xq->q.rows(t, t + 1), xq->scales.rows(t, t + 1), xq->ue8m0};
      for (int64_t k = 0; k < K; ++k) {
        const int e = ids[t * K + k];
        DS_CHECK(e >= 0 && e < static_cast<int>(experts.size()), "expert id ", e);
        if (!experts[e].down.defined()) continue;  // expert parallelism: another rank's expert (its all-reduce)
        Tensor y = linear(silu_mul(linear_q(xt, xqt, experts[e].gate_up)), experts[e].down);
        const float wk = topk_weights.f32()[t * K + k];
        float* o = out.f32() + t * d;
        for (int64_t c = 0; c < d; ++c) o[c] += wk * y.f32()[c];
      }
    }
    return out;
  }

  Tensor log_softmax(const Tensor& logits) override {
    const int64_t rows = logits.dim(0), n = logits.dim(1);
    Tensor out = Tensor::empty({rows, n}, DType::kF32);
    for (int64_t r = 0; r < rows; ++r) {
      const float* z = logits.f32() + r * n;
      float mx = *std::max_element(z, z + n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(z[i] - mx));
      const double lse = mx + std::log(sum);
      for (int64_t i = 0; i < n; ++i) out.f32()[r * n + i] = static_cast<float>(z[i] - lse);
    }
    return out;
  }

  std::unique_ptr<PendingSample> sample_async(const Tensor& logits, const SampleBatch& batch,
                                              const Tensor& token_store) override {
    DS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && logits.device() == Device::kCpu, "sample of ",
             logits.describe());
    for (const SampleRow& r : batch.rows)
      DS_CHECK(r.logits_row >= 0 && r.logits_row < logits.dim(0), "sample row ", r.logits_row, " of ", logits.describe());
    SampleResult res = sample_reference(logits.f32(), logits.dim(1), batch);
    for (size_t b = 0; b < batch.rows.size(); ++b) {
      const int32_t at = batch.rows[b].store_index;
      if (at < 0) continue;
      DS_CHECK(token_store.defined() && token_store.dtype() == DType::kI32 && at < token_store.numel(),
               "token store index ", at, " outside ", token_store.describe());
      token_store.data_as<int32_t>()[at] = res.tokens[b];
    }
    struct Ready final : PendingSample {
      SampleResult r;
      SampleResult wait() override { return std::move(r); }
    };
    auto ready = std::make_unique<Ready>();
    ready->r = std::move(res);
    return ready;
  }

  void resolve_tokens_(Tensor& ids, const Tensor& store) override {
    DS_CHECK(ids.dtype() == DType::kI32 && ids.ndim() == 1 && store.dtype() == DType::kI32, "resolve_tokens_ of ",
             ids.describe(), " from ", store.describe());
    int32_t* p = ids.data_as<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i)
      if (p[i] < 0) {
        const int64_t at = -static_cast<int64_t>(p[i]) - 1;
        DS_CHECK(at < store.numel(), "placeholder token for store row ", at, " outside ", store.describe());
        p[i] = store.data_as<int32_t>()[at];
      }
  }
  void greedy_to_store_(const Tensor& logits, int64_t vocab, Tensor& store) override {
    DS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && logits.device() == Device::kCpu && vocab >= 1 &&
                 vocab <= logits.dim(1),
             "greedy_to_store_ of ", logits.describe(), " over ", vocab, " columns");
    DS_CHECK(store.dtype() == DType::kI32 && store.ndim() == 1 && store.numel() == logits.dim(0),
             "greedy_to_store_ into ", store.describe(), " for ", logits.describe());
    // The sampler's own greedy rows: the first maximum, token 0 where the row is not finite.
    SampleBatch greedy;
    greedy.vocab = vocab;
    for (int64_t r = 0; r < logits.dim(0); ++r) greedy.rows.push_back(SampleRow{.logits_row = static_cast<int32_t>(r)});
    const SampleResult res = sample_reference(logits.f32(), logits.dim(1), greedy);
    std::copy(res.tokens.begin(), res.tokens.end(), store.data_as<int32_t>());
  }

 private:
  bool w8a8_ = false;
  bool fused_norm_ = true;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() { return std::make_unique<CpuOps>(); }

}  // namespace ds
