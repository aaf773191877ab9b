// The MLA attention entry points of ops/cuda/attention.h: shape checks, the split-KV plan, one allocation
// for output + scratch, and the choice between the tensor-core kernels (real DeepSeek head dims) and the
// reference kernels (any other dims, e.g. the tiny test checkpoints).
#include "ops/cuda/attention.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/env.h"
#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"
#include "kernels/mla_prefill.h"
#include "ops/cuda/cuda_runtime.h"

namespace ds {
namespace {

const int32_t* dev_i32(const Tensor& t, const char* what) {
  DS_CHECK(t.defined() && t.dtype() == DType::kI32 && t.device() == Device::kCuda, "attention metadata ", what,
           " must be an I32 cuda tensor, got ", t.defined() ? t.describe() : std::string("undefined"));
  return t.data_as<int32_t>();
}

void check_bf16(const Tensor& t, const char* what) {
  DS_CHECK(t.dtype() == DType::kBF16 && t.device() == Device::kCuda, "attention ", what, " must be bf16 on cuda, got ",
           t.describe());
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int num_sms() {
  static int n = [] {
    int dev = 0, count = 0;
    DS_CUDA_CHECK(cudaGetDevice(&dev));
    DS_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev));
    return count;
  }();
  return n;
}

// A bf16 [shape] output followed by `scratch_bytes` of scratch in one allocation: the scratch lives exactly as
// long as the output (its kernels are stream-ordered before any use of the output), so nothing is freed
// while they may still run and nothing else needs a host sync.
Tensor output_with_scratch(Shape shape, size_t scratch_bytes, void** scratch) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t out_bytes = (static_cast<size_t>(n) * 2 + 255) & ~size_t{255};
  if (scratch_bytes == 0) {
    *scratch = nullptr;
    return Tensor::empty(std::move(shape), DType::kBF16, Device::kCuda);
  }
  Tensor buf = Tensor::empty({static_cast<int64_t>(out_bytes + scratch_bytes)}, DType::kU8, Device::kCuda);
  *scratch = static_cast<uint8_t*>(buf.data()) + out_bytes;
  void* data = buf.data();
  return Tensor::wrap(data, std::move(shape), DType::kBF16, Device::kCuda, std::make_shared<Tensor>(std::move(buf)));
}

}  // namespace

int latent_cache_format(const Tensor& cache) {
  return cache.dtype() == DType::kF8E4M3   ? kernels::kKvE4M3
         : cache.dtype() == DType::kF8E5M2 ? kernels::kKvE5M2
                                           : kernels::kKvBf16;
}

namespace {

// The absorbed attention; with w_vc, the split combine fused with the W_UV product when that applies (returns
// [T, H, w_vc.dim(2)], *fused = true), else the attention alone ([T, H, v_dim], *fused = false).
Tensor absorbed_impl(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m, float scale,
                     const Tensor* topk, const Tensor* w_vc, bool* fused, cudaStream_t stream,
                     Fp8Act* xq = nullptr, bool xq_ue8m0 = false) {
  *fused = false;
  if (xq) *xq = Fp8Act{};
  // Packed FP8 caches: latent = v_dim, rope = the rest of q.
  const int format = latent_cache_format(cache);
  DS_CHECK(q.ndim() == 3 && cache.ndim() == 2 && v_dim > 0 && v_dim <= q.dim(2) &&
               cache.dim(1) * static_cast<int64_t>(dtype_size(cache.dtype())) ==
                   kernels::kv_row_layout(format, v_dim, q.dim(2) - v_dim).row_bytes,
           "absorbed attention q ", q.describe(), " cache ", cache.describe(), " v_dim ", v_dim);
  check_bf16(q, "q");
  if (format == kernels::kKvBf16) check_bf16(cache, "cache");
  DS_CHECK(cache.device() == Device::kCuda, "attention cache must be on cuda, got ", cache.describe());
  const int64_t T = q.dim(0), H = q.dim(1), D = q.dim(2);
  DS_CHECK(T == m.num_tokens && m.page_size > 0, "absorbed attention q ", q.describe(), " vs metadata num_tokens ",
           m.num_tokens, " page_size ", m.page_size);
  if (topk) {
    DS_CHECK(topk->ndim() == 2 && topk->dim(0) == T, "absorbed attention topk ", topk->describe(), " for q ",
             q.describe());
  }

  kernels::MlaDecodeParams p;
  p.q = q.data();
  p.cache = cache.data();
  p.q_starts = dev_i32(m.q_starts, "q_starts");
  p.seq_lens = dev_i32(m.seq_lens, "seq_lens");
  p.positions = dev_i32(m.positions, "positions");
  p.block_table = dev_i32(m.block_table, "block_table");
  p.topk = topk && topk->dim(1) > 0 ? dev_i32(*topk, "topk") : nullptr;
  p.num_seqs = m.num_seqs;
  p.num_tokens = static_cast<int>(T);
  p.num_heads = static_cast<int>(H);
  p.head_dim = static_cast<int>(D);
  p.v_dim = static_cast<int>(v_dim);
  p.num_slots = cache.dim(0);
  p.max_pages = static_cast<int>(m.block_table.dim(1));
  p.page_size = m.page_size;
  p.topk_k = p.topk ? static_cast<int>(topk->dim(1)) : 0;
  p.max_q_len = m.max_q_len;
  p.scale = scale;
  p.cache_format = format;

  // Packed caches: the tensor-core kernels dequantise tiles in shared memory (16 query rows per block when a
  // sequence's rows fit, else 64; top-k lists (V3.2) take the 64-row kernel, its rows gathered).
  // For packed caches the mma.sync kernel's choice does not depend on the split plan, so it can size the plan.
  const bool packed = format != kernels::kKvBf16;
  const bool rows16 = packed && kernels::mla_decode_m16_supported(p);
  const bool fast = kernels::mla_decode_fast_supported(p.head_dim, p.v_dim) && aligned16(q.data()) &&
                    aligned16(cache.data());
  if (fast) {
    const int context = p.topk ? p.topk_k : m.max_seq_len;
    p.num_splits = kernels::mla_decode_num_splits(p.num_seqs, p.num_tokens, p.max_q_len, p.num_heads, context,
                                                  p.topk != nullptr, num_sms(), rows16 ? 16 : 64);
    // A/B knob: DSERVE_MLA_SPLITS=n replaces the plan's split count (capped by the context's 64-row units and
    // kMlaMaxSplits; any count the plan could pick is one the kernels take). Session 54, for the batch 32-128 steps
    // whose decode sits at ~0.35 of copy (two splits of ~2.3 tiles at V2-Lite batch 64, context ~288).
    // The plan's 256 MB bound on the split partials holds here too (prefill-sized calls keep the plan).
    static const int64_t forced = env_int("DSERVE_MLA_SPLITS", 0);
    if (forced > 0) {
      const int64_t units = (static_cast<int64_t>(context) + kernels::kMlaSplitUnit - 1) / kernels::kMlaSplitUnit;
      const int64_t n = std::max<int64_t>(1, std::min<int64_t>({forced, units, kernels::kMlaMaxSplits}));
      if (kernels::mla_decode_scratch_bytes(static_cast<int>(n), p.num_tokens, p.num_heads) <= (size_t{256} << 20))
        p.num_splits = static_cast<int>(n);
    }
    p.plan_context = context;
  }
  // Decode-sized split steps: the combine and the W_UV product in one kernel (the combine's bf16 O never exists).
  static const bool vc_off = !env_flag("DSERVE_MLA_COMBINE_VC", true);
  const bool vc = w_vc && !vc_off && fast && p.num_splits > 1 && T <= kernels::kMlaCombineVcMaxTokens &&
                  w_vc->ndim() == 3 && w_vc->dtype() == DType::kBF16 && w_vc->device() == Device::kCuda &&
                  w_vc->dim(0) == H && w_vc->dim(1) == v_dim && v_dim == kernels::kMlaValueDim &&
                  w_vc->dim(2) % 32 == 0 && aligned16(w_vc->data());
  void* scratch = nullptr;
  const size_t scratch_bytes = fast ? kernels::mla_decode_scratch_bytes(p.num_splits, p.num_tokens, p.num_heads) : 0;
  Tensor out = output_with_scratch({T, H, vc ? w_vc->dim(2) : v_dim}, scratch_bytes, &scratch);
  *fused = vc;
  if (T == 0) return out;
  p.out = out.data();
  p.skip_combine = vc;
  if (scratch) {
    p.part_o = static_cast<float*>(scratch);
    p.part_lse = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) +
                                          kernels::mla_decode_lse_offset(p.num_splits, p.num_tokens, p.num_heads));
  }
  DS_CUDA_CHECK(fast ? kernels::launch_mla_decode(p, stream) : kernels::launch_mla_decode_reference(p, stream));
  if (vc) {
    kernels::MlaCombineVcParams c;
    c.part_o = p.part_o;
    c.part_lse = p.part_lse;
    c.w_vc = w_vc->data();
    c.out = out.data();
    c.tokens = p.num_tokens;
    c.heads = p.num_heads;
    c.splits = p.num_splits;
    c.v = static_cast<int>(w_vc->dim(2));
    // The step's positions let the combine count the splits that attend something (one round under a graph's
    // longer plan). DSERVE_MLA_COMBINE_COUNT=0: every planned split is merged (A/B switch).
    static const bool count_off = !env_flag("DSERVE_MLA_COMBINE_COUNT", true);
    if (!count_off && !p.topk && m.max_q_len == 1 && m.num_seqs == p.num_tokens) {  // token t: sequence t's only row
      c.positions = p.positions;
      c.seq_lens = p.seq_lens;
    }
    // The output's block-FP8 quantization in the same launch where the combine's blocks fit one an SM: V2-Lite's 16
    // heads (64 blocks: H200, V2-Lite --quantization fp8, batch 1 / 4 1.63-1.64 / 2.70 vs 1.66-1.67 / 2.73-2.75 ms
    // with the quant_act launch), not V3's 128 (512 blocks in clusters of 4: a 5-layer V3 FP8 model lost 2%, 1.61 /
    // 2.76 vs 1.58 / 2.71 ms; session 36, BENCHMARKS.md). V3 under TP 8 has 16 heads a GPU.
    if (xq && c.v % 128 == 0 && int64_t{c.heads} * (c.v / 32) <= num_sms()) {
      const int64_t K = H * c.v;
      Tensor xq_q = Tensor::empty({T, K}, DType::kF8E4M3, Device::kCuda);     // [T, H * v]
      Tensor xq_s = Tensor::empty({T, K / 128}, DType::kF32, Device::kCuda);  // [T, H * v / 128]
      c.q = xq_q.data_as<uint8_t>();
      c.q_scales = xq_s.data_as<float>();
      c.q_ue8m0 = xq_ue8m0;
      *xq = Fp8Act{xq_q, xq_s, xq_ue8m0};
    }
    DS_CUDA_CHECK(kernels::launch_mla_combine_vc(c, stream));
  }
  return out;
}

}  // namespace

Tensor cuda_mla_attention_absorbed(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                   float scale, const Tensor* topk, cudaStream_t stream) {
  bool fused;
  return absorbed_impl(q, cache, v_dim, m, scale, topk, nullptr, &fused, stream);
}

Tensor cuda_mla_attention_absorbed_vc(const Tensor& q, const Tensor& cache, int64_t v_dim, const AttnMetadata& m,
                                      float scale, const Tensor* topk, const Tensor& w_vc, bool* fused,
                                      cudaStream_t stream, Fp8Act* xq, bool xq_ue8m0) {
  return absorbed_impl(q, cache, v_dim, m, scale, topk, &w_vc, fused, stream, xq, xq_ue8m0);
}


Tensor cuda_mla_attention_mha(const Tensor& q, const Tensor& kv, const Tensor& ctx, int64_t rope_offset,
                              const AttnMetadata& m, float scale, const Tensor* topk, cudaStream_t stream, Tensor* lse) {
  DS_CHECK(q.ndim() == 3 && kv.ndim() == 3 && ctx.ndim() == 2, "mha attention q ", q.describe(), " kv ",
           kv.describe(), " ctx ", ctx.describe());
  check_bf16(q, "q");
  check_bf16(kv, "kv");
  check_bf16(ctx, "ctx");
  const int64_t T = q.dim(0), H = q.dim(1), dqk = q.dim(2);
  const int64_t rope = ctx.dim(1) - rope_offset;
  const int64_t nope = dqk - rope, v = kv.dim(2) - nope;
  DS_CHECK(kv.dim(1) == H && ctx.dim(0) == kv.dim(0) && rope > 0 && nope >= 0 && v > 0 && T == m.num_tokens,
           "mha attention q ", q.describe(), " kv ", kv.describe(), " ctx ", ctx.describe(), " rope_offset ",
           rope_offset, " num_tokens ", m.num_tokens);
  if (topk) {
    DS_CHECK(topk->ndim() == 2 && topk->dim(0) == T, "mha attention topk ", topk->describe(), " for q ", q.describe());
  }

  kernels::MlaPrefillParams p;
  p.q = q.data();
  p.kv = kv.data();
  p.ctx = ctx.data();
  p.q_starts = dev_i32(m.q_starts, "q_starts");
  p.seq_lens = dev_i32(m.seq_lens, "seq_lens");
  p.positions = dev_i32(m.positions, "positions");
  p.num_seqs = m.num_seqs;
  p.num_tokens = static_cast<int>(T);
  p.num_heads = static_cast<int>(H);
  p.max_q_len = m.max_q_len;
  p.nope = static_cast<int>(nope);
  p.rope = static_cast<int>(rope);
  p.v = static_cast<int>(v);
  p.ctx_dim = ctx.dim(1);
  p.rope_offset = rope_offset;
  p.ctx_rows = kv.dim(0);
  p.scale = scale;

  // DSA: the per-token top-k lists become bitmasks over positions [0, max_seq_len).
  const bool use_topk = topk && topk->dim(1) > 0;
  p.allow_words = use_topk ? (m.max_seq_len + 31) / 32 : 0;
  const size_t scratch_bytes = static_cast<size_t>(T) * p.allow_words * 4;
  void* scratch = nullptr;
  Tensor out = output_with_scratch({T, H, v}, scratch_bytes, &scratch);
  if (lse) {
    *lse = Tensor::empty({T, H}, DType::kF32, Device::kCuda);
    p.lse = lse->data_as<float>();
  }
  if (T == 0) return out;
  p.out = out.data();
  if (use_topk) {
    p.allow = static_cast<const uint32_t*>(scratch);
    DS_CUDA_CHECK(kernels::launch_mla_topk_bitmask(dev_i32(*topk, "topk"), p.num_tokens,
                                                   static_cast<int>(topk->dim(1)), static_cast<uint32_t*>(scratch),
                                                   p.allow_words, stream));
  }
  const bool fast = kernels::mla_prefill_fast_supported(p.nope, p.rope, p.v, p.ctx_dim, p.rope_offset) &&
                    aligned16(q.data()) && aligned16(kv.data()) && aligned16(ctx.data());
  // The wgmma kernel's key tiles: 128 keys past 2K of context, else 64 (H100, session 61: V3 128 heads x 4,096
  // tokens 185.5 vs 177.7 TFLOP/s, x 512 96.3 vs 98.4). DSERVE_MLA_PREFILL_KEYS=64 / 128 forces one,
  // DSERVE_MLA_PREFILL_WGMMA=0 the mma.sync kernel (A/B runs and tests, read per call).
  const bool wgmma = env_flag("DSERVE_MLA_PREFILL_WGMMA", true);
  const int keys = static_cast<int>(env_int("DSERVE_MLA_PREFILL_KEYS", m.max_seq_len >= 2048 ? 128 : 64));
  // The stages filled by a producer warp's TMA boxes (H100, session 64: V3 128 heads x 4,096 459.5 vs 370.0 TFLOP/s,
  // V3 4 layers 32K prefill 0.52 vs 0.62 s); DSERVE_MLA_PREFILL_TMA=0 every thread's cp.async instead.
  const bool tma = env_flag("DSERVE_MLA_PREFILL_TMA", true);
  DS_CUDA_CHECK(!fast    ? kernels::launch_mla_prefill_reference(p, stream)
                : wgmma ? kernels::launch_mla_prefill_wgmma(p, stream, keys, tma)
                        : kernels::launch_mla_prefill(p, stream));
  return out;
}

void cuda_merge_attention_parts(Tensor& o, Tensor& lse, const Tensor& o_part, const Tensor& lse_part,
                                cudaStream_t stream) {
  DS_CHECK(o.ndim() == 3 && o.shape() == o_part.shape() && lse.ndim() == 2 && lse.shape() == lse_part.shape() &&
               lse.dim(0) == o.dim(0) && lse.dim(1) == o.dim(1),
           "merge_attention_parts_ o ", o.describe(), " lse ", lse.describe(), " parts ", o_part.describe(), " ",
           lse_part.describe());
  check_bf16(o, "o");
  check_bf16(o_part, "o_part");
  DS_CHECK(lse.dtype() == DType::kF32 && lse_part.dtype() == DType::kF32 && lse.device() == Device::kCuda &&
               lse_part.device() == Device::kCuda,
           "merge_attention_parts_ lse ", lse.describe(), " ", lse_part.describe());
  DS_CUDA_CHECK(kernels::launch_mla_merge_parts(o.data(), lse.data_as<float>(), o_part.data(),
                                                lse_part.data_as<float>(), lse.numel(), static_cast<int>(o.dim(2)),
                                                stream));
}

}  // namespace ds
