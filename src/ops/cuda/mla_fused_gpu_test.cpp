// CUDA-vs-CPU consistency of the fused absorbed-MLA input ops (ops.h mla_store_latent, mla_absorb_q; kernels
// in kernels/mla_fused.cu): the CPU runs the ops' default chain (slice / rms_norm / rope / concat / store,
// bmm_heads) and is the reference. The cache is NaN-poisoned: rows not written must stay NaN, written rows must
// hold no NaN; V2-Lite (16 heads) and V3 (128 heads) dims, 1 token, ragged and 4096-token batches, positions past
// the original rope window, bf16 and fp32 norm weights, skipped slots.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::i32_tensor;
using test::randn;
using test::to_device;
using test::to_host_f32;

class MlaFusedTest : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{4242};

  Tensor inv_freq(int64_t rope) {
    Tensor inv = Tensor::empty({rope / 2}, DType::kF32);
    for (int64_t i = 0; i < rope / 2; ++i)
      inv.f32()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rope) * (i < rope / 4 ? 1.0 : 0.25));
    return inv;
  }
  std::vector<int32_t> positions(int64_t T) {
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>((t * 7919 + 13) % 40000);  // past 4K windows too
    return pos;
  }
};

TEST_F(MlaFusedTest, StoreLatentMatchesTheChain) {
  const int64_t lora = 512, rope = 64, D = lora + rope, slots = 5000;
  for (int64_t T : {1, 3, 64, 4096}) {
    for (DType wt : {DType::kBF16, DType::kF32}) {
      Tensor kv = randn({T, D}, rng_, 1.5f), w = randn({lora}, rng_, 0.1f, 1.0f), inv = inv_freq(rope);
      const std::vector<int32_t> pos = positions(T);
      std::vector<int32_t> slot(T);
      for (int64_t t = 0; t < T; ++t) slot[t] = static_cast<int32_t>((t * 37 + 11) % slots);
      if (T > 2) slot[1] = -1;  // a padding row: skipped
      // Distinct slots (the modulus is prime to 37 and T < slots, except the 4096 case which stays distinct).
      Tensor want = Tensor::empty({slots, D}, DType::kF32);
      cpu().fill(want, std::numeric_limits<float>::quiet_NaN());
      // The CPU chain with bf16 inputs rounded as the device sees them; slot -1 rows are dropped for the CPU.
      std::vector<int32_t> keep;
      for (int64_t t = 0; t < T; ++t)
        if (slot[t] >= 0) keep.push_back(static_cast<int32_t>(t));
      Tensor kv_k = Tensor::empty({static_cast<int64_t>(keep.size()), D}, DType::kF32);
      std::vector<int32_t> pos_k, slot_k;
      for (size_t i = 0; i < keep.size(); ++i) {
        std::copy(kv.f32() + keep[i] * D, kv.f32() + (keep[i] + 1) * D, kv_k.f32() + i * D);
        pos_k.push_back(pos[keep[i]]);
        slot_k.push_back(slot[keep[i]]);
      }
      cpu().mla_store_latent(kv_k, w, 1e-6f, i32_tensor(pos_k), inv, 1.3f, want, i32_tensor(slot_k), KvCacheDtype::kAuto);
      Tensor cache = gpu().empty({slots, D}, DType::kBF16);
      gpu().fill(cache, std::numeric_limits<float>::quiet_NaN());
      gpu().mla_store_latent(to_device(kv), to_device(w, wt), 1e-6f, cuda_upload(i32_tensor(pos)), cuda_upload(inv), 1.3f,
                             cache, cuda_upload(i32_tensor(slot)), KvCacheDtype::kAuto);
      Tensor got = to_host_f32(cache);
      int64_t nan_rows = 0, stray = 0;
      std::vector<char> written(slots, 0);
      for (int32_t s : slot_k) written[s] = 1;
      for (int64_t r = 0; r < slots; ++r)
        for (int64_t c = 0; c < D; ++c) {
          const bool nan = std::isnan(got.f32()[r * D + c]);
          nan_rows += written[r] && nan;
          stray += !written[r] && !nan;
        }
      EXPECT_EQ(nan_rows, 0) << "unwritten values in stored rows, T " << T;
      EXPECT_EQ(stray, 0) << "values outside the stored slots, T " << T;
      DS_EXPECT_CLOSE(got, want, 1e-2, 5e-3, test::shape_name("mla_store_latent", {T, wt == DType::kF32 ? 32 : 16}));
    }
  }
}

// FP8 KV dtypes on CUDA hold the packed format's values in bf16: equal to the CPU's rounding (fp32 storage)
// rounded once more to bf16, bit for bit; the rope part untouched (e4m3) and every value cast (e5m2).
TEST_F(MlaFusedTest, Fp8KvValuesMatchTheCpuRounding) {
  const int64_t lora = 512, rope = 64, D = lora + rope, slots = 300;
  for (KvCacheDtype dt : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
    for (int64_t T : {1, 7, 256}) {
      Tensor rows = randn({T, D}, rng_, 3.0f);
      for (int64_t j = 0; j < 128; ++j) rows.f32()[j] *= 64.0f;  // one outlier block (bf16-exact scaling)
      std::vector<int32_t> slot(T);
      for (int64_t t = 0; t < T; ++t) slot[t] = static_cast<int32_t>((t * 7 + 3) % slots);
      Tensor want = Tensor::empty({slots, D}, DType::kF32);
      cpu().fill(want, std::numeric_limits<float>::quiet_NaN());
      cpu().store_latent_rows(want, rows, i32_tensor(slot), lora, dt);
      Tensor cache = gpu().empty({slots, D}, DType::kBF16);
      gpu().fill(cache, std::numeric_limits<float>::quiet_NaN());
      gpu().store_latent_rows(cache, to_device(rows), cuda_upload(i32_tensor(slot)), lora, dt);
      Tensor got = to_host_f32(cache);
      int64_t bad = 0, checked = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float w = want.f32()[i], g = got.f32()[i];
        if (std::isnan(w)) {
          bad += !std::isnan(g);  // unwritten slot
        } else {
          bad += g != round_bf16(w);
          ++checked;
        }
      }
      EXPECT_EQ(checked, T * D);
      EXPECT_EQ(bad, 0) << (dt == KvCacheDtype::kFp8E4M3 ? "e4m3" : "e5m2") << " T " << T;
    }
  }
}

TEST_F(MlaFusedTest, AbsorbQMatchesTheChain) {
  struct Case {
    int64_t T, H;
  };
  const int64_t nope = 128, rope = 64, lora = 512;
  for (Case c : {Case{1, 16}, Case{5, 16}, Case{1, 128}, Case{64, 128}, Case{300, 16}}) {
    Tensor q = randn({c.T, c.H, nope + rope}, rng_, 1.0f), w_kc = randn({c.H, nope, lora}, rng_, 0.05f);
    Tensor inv = inv_freq(rope);
    const std::vector<int32_t> pos = positions(c.T);
    Tensor want = cpu().mla_absorb_q(q, w_kc, i32_tensor(pos), inv, 0.9f);
    Tensor dq = to_device(q);
    Tensor got = to_host_f32(gpu().mla_absorb_q(dq, to_device(w_kc), cuda_upload(i32_tensor(pos)), cuda_upload(inv), 0.9f));
    DS_EXPECT_CLOSE(got, want, 1e-2, 5e-3, test::shape_name("mla_absorb_q", {c.T, c.H}));
    // q itself is not modified (the MHA form rotates its own copy).
    Tensor q_after = to_host_f32(dq);
    int64_t changed = 0;
    for (int64_t i = 0; i < q.numel(); ++i) changed += q_after.f32()[i] != q.f32()[i];
    EXPECT_EQ(changed, 0);
  }
}

}  // namespace
}  // namespace ds
