// Native block-FP8 linears on CUDA (see fp8_linear.h): weight preparation with padding, activation
// quantization, and the small-M kernel / cuBLASLt block-scaled dispatch.
#include "ops/cuda/fp8_linear.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/env.h"
#include "kernels/fp8_gemm.h"
#include "kernels/fp8_gemm_wgmma.h"
#include "kernels/pdl.cuh"
#include "ops/cuda/cuda_runtime.h"

#define DS_FP8_CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                              \
    cublasStatus_t ds_st_ = (expr);                                                                 \
    DS_CHECK(ds_st_ == CUBLAS_STATUS_SUCCESS, #expr, ": cublas status ", static_cast<int>(ds_st_)); \
  } while (0)

namespace ds {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

Fp8Weight prepare_fp8_weight(const LinearWeight& host) {
  DS_CHECK(host.is_block_fp8() && host.block_n == 128 && host.block_k == 128 &&
               host.weight.dtype() == DType::kF8E4M3 && host.scale_inv.dtype() == DType::kF32,
           "prepare_fp8_weight needs an e4m3 weight with 128x128 F32 block scales, got ", host.weight.describe());
  Fp8Weight w;
  w.N = host.out_features();
  w.K = host.in_features();
  w.Np = round_up(w.N, 128);
  w.Kp = round_up(w.K, 128);
  const int64_t nb = w.Np / 128, kb = w.Kp / 128;
  DS_CHECK(host.scale_inv.ndim() == 2 && host.scale_inv.dim(0) == nb && host.scale_inv.dim(1) == kb,
           "fp8 scale grid ", host.scale_inv.describe(), " for weight ", host.weight.describe());
  Tensor hw = host.weight.device() == Device::kCpu ? host.weight : cuda_download(host.weight);
  Tensor hs = host.scale_inv.device() == Device::kCpu ? host.scale_inv : cuda_download(host.scale_inv);
  // Padded to 128 x 128 blocks with zeros where a dimension is ragged (the fused q_a / kv_a's 2112 rows); the usual
  // weight is uploaded as it is (a padded host copy of every weight was a second pass over the checkpoint at load).
  Tensor pw = hw;
  if (w.Np != w.N || w.Kp != w.K) {
    pw = Tensor::empty({w.Np, w.Kp}, DType::kF8E4M3);
    std::memset(pw.data(), 0, pw.nbytes());
    for (int64_t r = 0; r < w.N; ++r)
      std::memcpy(pw.data_as<uint8_t>() + r * w.Kp, hw.data_as<uint8_t>() + r * w.K, static_cast<size_t>(w.K));
  }
  Tensor st = Tensor::empty({kb, nb}, DType::kF32);
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t j = 0; j < kb; ++j) st.f32()[j * nb + i] = hs.f32()[i * kb + j];
  // cuBLASLt reads the 128x128 grid with its K-block rows padded to 4 floats (seen on the H100: grids with
  // Kp / 128 = 14 gave garbage, 4 / 8 / 12 were right).
  const int64_t kb4 = round_up(kb, 4);
  Tensor sl = Tensor::empty({nb, kb4}, DType::kF32);
  std::memset(sl.data(), 0, sl.nbytes());
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t j = 0; j < kb; ++j) sl.f32()[i * kb4 + j] = hs.f32()[i * kb + j];
  w.w = cuda_upload(pw);
  w.sw = cuda_upload(hs);
  w.sw_t = cuda_upload(st);
  w.sw_lt = cuda_upload(sl);
  attach_fp8_weight_map(w);
  return w;
}

void attach_fp8_weight_map(Fp8Weight& w) {
  kernels::make_fp8_weight_map(w.w.data_as<uint8_t>(), w.Np, w.Kp, &w.map);
}

bool fp8_device_scales_are_pow2(const Tensor& scales) {
  return fp8_scales_are_pow2(scales.device() == Device::kCpu ? scales : cuda_download(scales));
}

LinearWeight Fp8Gemm::prepare(const LinearWeight& host) {
  Registered r;
  r.w = prepare_fp8_weight(host);
  r.ue8m0 = fp8_device_scales_are_pow2(host.scale_inv);
  LinearWeight out;
  auto keep = std::make_shared<Tensor>(r.w.w);
  out.weight = Tensor::wrap(r.w.w.data(), {r.w.N, r.w.K}, DType::kF8E4M3, Device::kCuda, keep);
  out.scale_inv = r.w.sw;
  out.block_n = 128;
  out.block_k = 128;
  std::lock_guard<std::mutex> lock(reg_mu_);
  registry_[r.w.w.data()] = std::move(r);
  return out;
}

Status Fp8Gemm::update(const LinearWeight& dst, const LinearWeight& src, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(reg_mu_);
  auto d = dst.weight.defined() ? registry_.find(dst.weight.data()) : registry_.end();
  auto s = src.weight.defined() ? registry_.find(src.weight.data()) : registry_.end();
  if (d == registry_.end() || s == registry_.end())
    return error("an FP8 weight cannot take a weight prepared in another format (", dst.weight.describe(), " <- ",
                 src.weight.describe(), ")");
  Fp8Weight& a = d->second.w;
  const Fp8Weight& b = s->second.w;
  if (a.N != b.N || a.K != b.K || a.Np != b.Np || a.Kp != b.Kp)
    return error("FP8 weight [", a.N, ", ", a.K, "] cannot take [", b.N, ", ", b.K, "]");
  for (auto [x, y] : {std::pair<Tensor*, const Tensor*>{&a.w, &b.w}, {&a.sw, &b.sw}, {&a.sw_t, &b.sw_t},
                      {&a.sw_lt, &b.sw_lt}}) {
    DS_CHECK(x->nbytes() == y->nbytes(), "FP8 weight layouts ", x->describe(), " vs ", y->describe());
    DS_CUDA_CHECK(cudaMemcpyAsync(x->data(), y->data(), y->nbytes(), cudaMemcpyDeviceToDevice, stream));
  }
  d->second.ue8m0 = s->second.ue8m0;
  // src's copies are freed once the copies above have run: device frees are stream-ordered (cudaFreeAsync on this
  // thread's stream, the one given here), so no wait a weight.
  registry_.erase(s);
  return Status::ok();
}

bool Fp8Gemm::owns(const LinearWeight& w) const {
  std::lock_guard<std::mutex> lock(reg_mu_);
  return w.weight.defined() && registry_.count(w.weight.data()) > 0;
}

bool Fp8Gemm::ue8m0_of(const LinearWeight& prepared) const {
  std::lock_guard<std::mutex> lock(reg_mu_);
  auto it = registry_.find(prepared.weight.data());
  DS_CHECK(it != registry_.end(), "fp8 weight ", prepared.weight.describe(), " was not prepared by Fp8Gemm");
  return it->second.ue8m0;
}

bool Fp8Gemm::wgmma_takes(const LinearWeight& prepared, int64_t M) { return wgmma_auto(registered(prepared).w, M); }

const Fp8Gemm::Registered& Fp8Gemm::registered(const LinearWeight& prepared) {
  std::lock_guard<std::mutex> lock(reg_mu_);
  auto it = registry_.find(prepared.weight.data());
  DS_CHECK(it != registry_.end(), "fp8 linear: weight ", prepared.weight.describe(), " was not prepared by Fp8Gemm");
  return it->second;  // std::map nodes are stable
}

Tensor Fp8Gemm::linear(const Tensor& x, const LinearWeight& prepared) {
  const Registered& r = registered(prepared);
  return linear(x, r.w, r.ue8m0, Fp8Path::kAuto);
}

void Fp8Gemm::linear_into(const Tensor& x, const LinearWeight& prepared, void* out, int64_t out_rows) {
  const Registered& r = registered(prepared);
  DS_CHECK(x.ndim() == 2 && out_rows >= x.dim(0), "fp8 linear_into ", x.describe(), " into ", out_rows, " rows");
  Tensor y = Tensor::wrap(out, {x.dim(0), r.w.N}, DType::kBF16, Device::kCuda, nullptr);
  linear_to(x, r.w, r.ue8m0, Fp8Path::kAuto, y, out_rows);
}

bool Fp8Gemm::lt_supported_for(const LinearWeight& prepared, int64_t M) {
  const Registered& r = registered(prepared);
  return r.w.N == r.w.Np && r.w.K == r.w.Kp && M % kLtRowMultiple == 0 && lt_supported(M, r.w.Np, r.w.Kp);
}

void Fp8Gemm::linear_quantized(const void* q, const float* sx, const LinearWeight& prepared, int64_t M, void* out) {
  const Registered& r = registered(prepared);
  DS_CHECK(r.w.N == r.w.Np && r.w.K == r.w.Kp && M % kLtRowMultiple == 0, "fp8 linear_quantized M ", M, " weight [",
           r.w.N, ", ", r.w.K, "]");
  run_cublaslt(q, sx, r.w, M, out, cuda_stream());
}

struct Fp8Gemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool d_transposed = false;  // D came out [Np, M] (column-major M x Np) and needs a transpose
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

Fp8Gemm::Fp8Gemm() {
  DS_FP8_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_bytes_ = kWorkspaceBytes;
  DS_CUDA_CHECK(cudaMallocAsync(&workspace_, workspace_bytes_, cuda_stream()));
  DS_CUDA_CHECK(cudaMallocAsync(&side_workspace_, workspace_bytes_, cuda_stream()));
  for (int i = 0; i < 2; ++i) {
    DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&splitk_partial_[i]), kSplitKFloats * 4, cuda_stream()));
    DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&splitk_tickets_[i]), kSplitKTickets * 4, cuda_stream()));
    DS_CUDA_CHECK(cudaMemsetAsync(splitk_tickets_[i], 0, kSplitKTickets * 4, cuda_stream()));
  }
  wgmma_on_ = env_int("DSERVE_FP8_WGMMA", 1) != 0;
  wgmma_pair_ = env_int("DSERVE_FP8_WGMMA_PAIR", 1) != 0;
  wgmma_ctas_ = env_int("DSERVE_FP8_WGMMA_CTAS", wgmma_ctas_);
  wgmma_min_blocks_ = std::max<int64_t>(1, env_int("DSERVE_FP8_WGMMA_MIN_BLOCKS", wgmma_min_blocks_));
  wgmma_max_m_ = env_int("DSERVE_FP8_WGMMA_MAX_M", wgmma_max_m_);
  wgmma_min_m_ = env_int("DSERVE_FP8_WGMMA_MIN_M", wgmma_min_m_);
  wgmma_max_mb_ = env_int("DSERVE_FP8_WGMMA_MAX_MB", wgmma_max_mb_);
  set_wgmma_cluster(static_cast<int>(env_int("DSERVE_FP8_WGMMA_CLUSTER", wgmma_cluster_)),
                    static_cast<int>(env_int("DSERVE_FP8_WGMMA_CLUSTER_WAVES", wgmma_cluster_waves_)));
  set_wgmma_cover(static_cast<int>(env_int("DSERVE_FP8_WGMMA_COVER", wgmma_cover_)),
                  env_int("DSERVE_FP8_WGMMA_COVER_MIN_M", wgmma_cover_min_m_),
                  env_int("DSERVE_FP8_WGMMA_COVER_MAX_M", wgmma_cover_max_m_));
  if (const int64_t v = env_int("DSERVE_FP8_SMALL_M_MAX", -1); v >= 0 && v <= kernels::kFp8SmallMMax) {
    small_m_max_ = v;
    small_m_forced_ = true;
  }
  lt_layout_ = static_cast<int>(env_int("DSERVE_FP8_LT_LAYOUT", lt_layout_)) & 7;
  // Default p + s: V2-Lite FP8 decode 2.76 / 10.78 ms (batch 1 / 64) vs 2.83-2.88 / 11.20 with none and 2.94 /
  // 10.99 with q added (H100, 2026-11-26, scripts/device/fusedab.sh).
  set_fused_small_m(false, true, true);
  if (const char* f = env_text("DSERVE_FP8_FUSED_SMALL_M")) {
    const bool all = std::strcmp(f, "1") == 0;
    set_fused_small_m(all || std::strchr(f, 'q'), all || std::strchr(f, 'p'), all || std::strchr(f, 's'));
  }
}

Fp8Gemm::~Fp8Gemm() {
  plans_.clear();
  if (workspace_) cudaFreeAsync(workspace_, cuda_stream());
  if (side_workspace_) cudaFreeAsync(side_workspace_, cuda_stream());
  for (int i = 0; i < 2; ++i) {
    if (splitk_partial_[i]) cudaFreeAsync(splitk_partial_[i], cuda_stream());
    if (splitk_tickets_[i]) cudaFreeAsync(splitk_tickets_[i], cuda_stream());
  }
  if (handle_) cublasLtDestroy(handle_);
}

// cuBLASLt's block-scaled FP8 GEMM on Hopper takes the 1x128 (VEC128) scales on A and the 128x128 (BLK) scales
// on B, in the "TN" form: A = q [M, Kp] row-major = column-major Kp x M with TRANSA = T, B = W [Np, Kp]
// row-major = column-major Kp x Np. D = column-major M x Np. Asked first with a row-major D layout (= our
// [M, Np]); when cuBLASLt refuses that, D is column-major (= [Np, M] row-major) and a transpose follows.
Fp8Gemm::Plan& Fp8Gemm::plan_for(int64_t M, int64_t Np, int64_t Kp) {
  Plan* p = try_plan(M, Np, Kp);
  DS_CHECK(p, "cuBLASLt has no block-scaled FP8 algorithm for M ", M, " N ", Np, " K ", Kp);
  return *p;
}

bool Fp8Gemm::lt_supported(int64_t M, int64_t Np, int64_t Kp) {
  std::lock_guard<std::mutex> lock(mu_);
  return try_plan(M, Np, Kp) != nullptr;
}

Fp8Gemm::Plan* Fp8Gemm::try_plan(int64_t M, int64_t Np, int64_t Kp) {
  char key[96];
  std::snprintf(key, sizeof(key), "%lld %lld %lld %d", static_cast<long long>(M), static_cast<long long>(Np),
                static_cast<long long>(Kp), lt_layout_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();  // null: known unsupported
  auto plan = std::make_unique<Plan>();
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cublasLtMatmulMatrixScale_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
  // The scale pointers must be set (non-null, aligned) before the heuristic query; run_cublaslt sets the real
  // ones for each call.
  const void* placeholder = workspace_;
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)));
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)));
  DS_FP8_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, Kp, M, Kp));
  DS_FP8_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, Kp, Np, Kp));
  cublasLtMatmulPreference_t pref;
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  DS_FP8_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
  for (int transposed = 0; transposed < 2 && found == 0; ++transposed) {
    if (plan->d) cublasLtMatrixLayoutDestroy(plan->d);
    plan->d = nullptr;
    plan->d_transposed = transposed != 0;
    if (!transposed) {
      DS_FP8_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_16BF, M, Np, Np));
      const cublasLtOrder_t row = CUBLASLT_ORDER_ROW;
      DS_FP8_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(plan->d, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row)));
    } else {
      DS_FP8_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_16BF, M, Np, M));
    }
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS) found = 0;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    std::fprintf(stderr, "fp8: cuBLASLt has no block-scaled FP8 algorithm for M %lld N %lld K %lld (status %d)\n",
                 static_cast<long long>(M), static_cast<long long>(Np), static_cast<long long>(Kp), static_cast<int>(st));
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  plan->algo = result.algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

kernels::Fp8GemmSmallMParams Fp8Gemm::small_m_params(const Fp8Weight& w, int64_t M, void* y, int64_t ldd) {
  kernels::Fp8GemmSmallMParams gp;
  gp.w = w.w.data_as<uint8_t>();
  gp.sw = w.sw.data_as<float>();
  gp.d = y;
  gp.ldd = ldd;
  gp.M = M;
  gp.N = w.N;
  gp.Np = w.Np;
  gp.Kp = w.Kp;
  return gp;
}

bool Fp8Gemm::use_fused_quant(const Tensor& x, const Fp8Weight& w, bool ue8m0,
                              kernels::Fp8GemmSmallMParams* p) const {
  if (!fused_quant_ || x.dtype() != DType::kBF16 || x.ndim() != 2 || x.dim(1) != w.K || x.dim(0) > 8) return false;
  kernels::Fp8GemmSmallMParams f = *p;
  f.x = x.data();
  f.ldx = w.K;
  f.K = w.K;
  f.ue8m0 = ue8m0;
  f.q = nullptr;
  f.sx = nullptr;
  if (!kernels::fp8_gemm_small_m_supported(f)) return false;
  *p = f;
  return true;
}

void Fp8Gemm::small_m_chunks(const Tensor& q, const Tensor& sx, const Fp8Weight& w, int64_t M, Tensor& y) {
  const int64_t kb = w.Kp / 128;
  for (int64_t m0 = 0; m0 < M; m0 += kernels::kFp8SmallMMax) {
    const int64_t rows = std::min<int64_t>(kernels::kFp8SmallMMax, M - m0);
    kernels::Fp8GemmSmallMParams gp = small_m_params(w, rows, static_cast<uint16_t*>(y.data()) + m0 * w.N, w.N);
    gp.q = q.data_as<uint8_t>() + m0 * w.Kp;
    gp.sx = sx.data_as<float>() + m0 * kb;
    gp.sx_ld = kb;
    DS_CUDA_CHECK(kernels::launch_fp8_gemm_small_m(gp, cuda_stream()));
  }
}

int Fp8Gemm::choose_wgmma_cluster(int64_t tiles, int64_t kb, const ClusterWaves& wave, int max_size,
                                  int64_t min_blocks) {
  int best = 1, cover = 1;
  for (int c = 2, i = 0; c <= 8 && c <= max_size; c *= 2, ++i) {
    const int64_t bps = (kb + c - 1) / c;
    // A size that cannot run, an empty range, or one too long.
    if (wave[i] <= 0 || (c - 1) * bps >= kb || bps > kernels::kFp8WgmmaMaxBlocks) continue;
    if (cover == 1) cover = c;
    if (bps >= min_blocks && tiles * c <= wave[i]) best = c;
  }
  // Past one range with no cluster inside a wave: the smallest cluster that covers K.
  return best == 1 && kb > kernels::kFp8WgmmaMaxBlocks ? cover : best;
}

int Fp8Gemm::wgmma_cluster(int64_t M, int64_t Np, int64_t Kp) const {
  // The cover mode's weights take its cap; elsewhere the general switch's.
  const int cap = wgmma_covers(M, Kp) ? std::max(wgmma_cover_, wgmma_cluster_) : wgmma_cluster_;
  if (cap < 2 || M < 1 || M > kernels::kFp8WgmmaMaxM) return 1;
  ClusterWaves wave{};
  for (int c = 2, i = 0; c <= 8 && c <= cap; c *= 2, ++i)
    wave[i] = int64_t{kernels::fp8_gemm_wgmma_cluster_ctas(c, M)} * wgmma_cluster_waves_;
  const int c = choose_wgmma_cluster(Np / 64, Kp / 128, wave, cap, wgmma_min_blocks_);
  return c > 1 && kernels::fp8_gemm_wgmma_cluster_supported(c, M) ? c : 1;
}

int Fp8Gemm::wgmma_splits(int64_t M, int64_t Np, int64_t Kp) const {
  if (const int c = wgmma_cluster(M, Np, Kp); c > 1) return c;
  const int64_t tiles = Np / 64, kb = Kp / 128, mt = kernels::fp8_gemm_wgmma_tokens(M);
  const int64_t target =
      wgmma_ctas_ > 0 ? wgmma_ctas_
                      : std::max(1, kernels::fp8_gemm_wgmma_ctas_per_sm(M)) * int64_t{kernels::device_sm_count()};
  int64_t splits = std::clamp<int64_t>((target + tiles - 1) / tiles, 1, std::max<int64_t>(1, kb / wgmma_min_blocks_));
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, kSplitKFloats / (tiles * 64 * mt)));
  splits = std::max<int64_t>(splits, (kb + kernels::kFp8WgmmaMaxBlocks - 1) / kernels::kFp8WgmmaMaxBlocks);
  const int64_t bps = (kb + splits - 1) / splits;
  return static_cast<int>((kb + bps - 1) / bps);  // every range non-empty
}

bool Fp8Gemm::wgmma_fits(const Fp8Weight& w, int64_t M) const {
  // The K ranges' partials must fit the buffer at the fewest splits that keep ranges within kFp8WgmmaMaxBlocks.
  const int64_t min_splits = (w.Kp / 128 + kernels::kFp8WgmmaMaxBlocks - 1) / kernels::kFp8WgmmaMaxBlocks;
  return w.map.valid && M >= 1 && M <= kernels::kFp8WgmmaMaxM && w.Np / 64 <= kSplitKTickets &&
         (min_splits == 1 || wgmma_cluster(M, w.Np, w.Kp) > 1 ||
          min_splits * w.Np * kernels::fp8_gemm_wgmma_tokens(M) <= kSplitKFloats);
}

kernels::Fp8GemmWgmmaParams Fp8Gemm::wgmma_params(const Tensor& q, const Tensor& sx, const Fp8Weight& w, int64_t M,
                                                  Tensor& y) const {
  kernels::Fp8GemmWgmmaParams p;
  p.q = q.data_as<uint8_t>();
  p.ldq = q.dim(1);
  p.sx = sx.data_as<float>();
  p.sx_ld = sx.dim(1);
  p.sw = w.sw.data_as<float>();
  p.d = y.data();
  p.ldd = y.dim(1);
  p.M = M;
  p.N = w.N;
  p.Np = w.Np;
  p.Kp = w.Kp;
  p.cluster = wgmma_cluster(M, w.Np, w.Kp);
  p.splits = p.cluster > 1 ? p.cluster : wgmma_splits(M, w.Np, w.Kp);
  // One partials / tickets pair a stream: the main and the side stream's launches may run concurrently.
  const int side = cuda_stream() == cuda_main_stream() ? 0 : 1;
  DS_CHECK(p.splits == 1 || p.cluster > 1 || side == 0 || cuda_stream() == cuda_side_stream(),
           "fp8 wgmma GEMM split on a third stream");
  p.partial = splitk_partial_[side];
  p.partial_floats = kSplitKFloats;
  p.tickets = splitk_tickets_[side];
  p.ticket_count = kSplitKTickets;
  return p;
}

void Fp8Gemm::run_wgmma(const kernels::Fp8GemmWgmmaParams& p, const Fp8Weight& w) {
  DS_CHECK(kernels::fp8_gemm_wgmma_supported(p), "fp8 wgmma GEMM M ", p.M, " N ", w.N, " K ", w.K, " splits ",
           p.splits, " cluster ", p.cluster);
  DS_CUDA_CHECK(kernels::launch_fp8_gemm_wgmma(p, w.map, cuda_stream()));
}

void Fp8Gemm::run_cublaslt(const void* q, const float* sx, const Fp8Weight& w, int64_t M, void* d,
                           cudaStream_t stream) {
  if (M == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Plan& p = plan_for(M, w.Np, w.Kp);
  const void* a_scale = sx;
  const void* b_scale = (lt_layout_ & 2) ? w.sw_t.data() : w.sw_lt.data();
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
  DS_FP8_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
  const float alpha = 1.0f, beta = 0.0f;
  Tensor tmp;
  void* out = d;
  if (p.d_transposed) {
    tmp = Tensor::empty({w.Np, M}, DType::kBF16, Device::kCuda);
    out = tmp.data();
  }
  DS_FP8_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, q, p.a, w.w.data(), p.b, &beta, out, p.d, out, p.d, &p.algo,
                                     stream == cuda_main_stream() ? workspace_ : side_workspace_, workspace_bytes_,
                                     stream));
  if (p.d_transposed) {
    kernels::TransposeBf16Params tp;
    tp.src = tmp.data();
    tp.rows = w.Np;
    tp.cols = M;
    tp.dst = d;
    DS_CUDA_CHECK(kernels::launch_transpose_bf16(tp, stream));
  }
}

Tensor Fp8Gemm::linear(const Tensor& x, const Fp8Weight& w, bool ue8m0, Fp8Path path) {
  Tensor y = Tensor::empty({x.ndim() == 2 ? x.dim(0) : 0, w.N}, DType::kBF16, Device::kCuda);
  linear_to(x, w, ue8m0, path, y, y.dim(0));
  return y;
}

// quant_act of x ([M, K] contiguous, bf16 or f32) for weight w into q [>= M, Kp] and token-major scales s
// [M, Kp / 128] (callers of other scale layouts change s_ld / s_m_major).
static kernels::Fp8QuantParams quant_params(const Tensor& x, const Fp8Weight& w, bool ue8m0, Tensor& q, float* s) {
  return kernels::fp8_quant_rows_params(x.data(), x.dtype() == DType::kF32, w.K, x.dim(0), w.K, w.Kp,
                                        q.data_as<uint8_t>(), s, ue8m0);
}

// q [M, Kp] e4m3 and token-major scales [M, Kp / 128] of x for the small-M kernel.
void Fp8Gemm::quantize_small_m(const Tensor& x, const Fp8Weight& w, bool ue8m0, Tensor* q, Tensor* sx) {
  const int64_t M = x.dim(0), kb = w.Kp / 128;
  *q = Tensor::empty({M, w.Kp}, DType::kF8E4M3, Device::kCuda);
  *sx = Tensor::empty({M, kb}, DType::kF32, Device::kCuda);
  DS_CUDA_CHECK(kernels::launch_fp8_quant_act(quant_params(x, w, ue8m0, *q, sx->data_as<float>()), cuda_stream()));
}

// Whether (q, sx, ue8m0) is x's quantization for weight w's small-M kernel: q [M, w.Kp] e4m3 (K unpadded), token-major
// scales [M, Kp / 128] of the same scale kind.
static bool quantized_for(const Tensor& q, const Tensor& sx, bool ue8m0, const Fp8Weight& w, bool w_ue8m0, int64_t M) {
  return q.defined() && sx.defined() && q.device() == Device::kCuda && q.ndim() == 2 && q.dtype() == DType::kF8E4M3 &&
         q.dim(0) == M && q.dim(1) == w.Kp && w.K == w.Kp && sx.ndim() == 2 && sx.dim(0) == M &&
         sx.dim(1) == w.Kp / 128 && ue8m0 == w_ue8m0;
}

bool Fp8Gemm::linear_pair(const Tensor& x, const LinearWeight& p1, const LinearWeight& p2, Tensor* y1, Tensor* y2,
                          const Tensor* xq, const Tensor* xs, bool xq_ue8m0) {
  const Registered& a = registered(p1);
  const Registered& b = registered(p2);
  if (x.device() != Device::kCuda || x.ndim() != 2 || (x.dtype() != DType::kBF16 && x.dtype() != DType::kF32))
    return false;
  const int64_t M = x.dim(0);
  if (M == 0 || x.dim(1) != a.w.K || a.w.K != b.w.K || a.w.Kp != b.w.Kp || a.ue8m0 != b.ue8m0) return false;
  // Past the small-M kernel: the split-K wgmma GEMM for both on one quantization.
  const bool wgmma = !takes_small_m(a.w, M) || !takes_small_m(b.w, M);
  if (wgmma && (!wgmma_auto(a.w, M) || !wgmma_auto(b.w, M) || x.dtype() != DType::kBF16)) return false;
  *y1 = Tensor::empty({M, a.w.N}, DType::kBF16, Device::kCuda);
  *y2 = Tensor::empty({M, b.w.N}, DType::kBF16, Device::kCuda);
  // x's quantization made by its producer (the norm); it fits b exactly when it fits a (same K, Kp and scale kind).
  const bool made = xq && quantized_for(*xq, *xs, xq_ue8m0, a.w, a.ue8m0, M);
  if (wgmma) {
    Tensor q, sx;
    if (made) {
      q = *xq;
      sx = *xs;
    } else {
      quantize_small_m(x, a.w, a.ue8m0, &q, &sx);
    }
    const kernels::Fp8GemmWgmmaParams pa = wgmma_params(q, sx, a.w, M, *y1);
    if (wgmma_pair_ && pa.splits == 1 && wgmma_splits(M, b.w.Np, b.w.Kp) == 1) {
      kernels::Fp8GemmWgmmaSecond second;
      second.sw = b.w.sw.data_as<float>();
      second.d = y2->data();
      second.ldd = y2->dim(1);
      second.N = b.w.N;
      second.Np = b.w.Np;
      DS_CHECK(kernels::fp8_gemm_wgmma_pair_supported(pa, second), "fp8 wgmma pair M ", M, " N ", a.w.N, " + ",
               b.w.N, " K ", a.w.K);
      DS_CUDA_CHECK(kernels::launch_fp8_gemm_wgmma_pair(pa, a.w.map, second, b.w.map, cuda_stream()));
      return true;
    }
    run_wgmma(pa, a.w);
    run_wgmma(wgmma_params(q, sx, b.w, M, *y2), b.w);
    return true;
  }
  if (fused_pair_ && M <= kernels::kFp8SmallMMax) {
    // One launch for both; at M <= 8 without the quant_act launch either.
    kernels::Fp8GemmSmallMParams pa = small_m_params(a.w, M, y1->data(), a.w.N);
    kernels::Fp8GemmSmallMParams pb = small_m_params(b.w, M, y2->data(), b.w.N);
    // With x's quantization made: no quant_act launch and no quantization in the GEMM.
    const bool fa = !made && use_fused_quant(x, a.w, a.ue8m0, &pa), fb = !made && use_fused_quant(x, b.w, b.ue8m0, &pb);
    Tensor q, sx;
    if (made) {
      q = *xq;
      sx = *xs;
    } else if (!(fa && fb)) {
      pa = small_m_params(a.w, M, y1->data(), a.w.N);
      pb = small_m_params(b.w, M, y2->data(), b.w.N);
      quantize_small_m(x, a.w, a.ue8m0, &q, &sx);
    }
    if (q.defined()) {
      for (kernels::Fp8GemmSmallMParams* p : {&pa, &pb}) {
        p->q = q.data_as<uint8_t>();
        p->sx = sx.data_as<float>();
        p->sx_ld = a.w.Kp / 128;
      }
    }
    DS_CUDA_CHECK(kernels::launch_fp8_gemm_small_m_pair(pa, pb, cuda_stream()));
    return true;
  }
  Tensor q, sx;
  quantize_small_m(x, a.w, a.ue8m0, &q, &sx);
  small_m_chunks(q, sx, a.w, M, *y1);
  small_m_chunks(q, sx, b.w, M, *y2);
  return true;
}

bool Fp8Gemm::linear_silu(const Tensor& x, const LinearWeight& gate_up, Tensor* y, const Tensor* xq, const Tensor* xs,
                          bool xq_ue8m0) {
  if (!fused_silu_) return false;
  const Registered& r = registered(gate_up);
  const Fp8Weight& w = r.w;
  if (x.device() != Device::kCuda || x.ndim() != 2 || x.dtype() != DType::kBF16 || x.dim(1) != w.K) return false;
  const int64_t M = x.dim(0);
  if (M == 0 || M > kernels::kFp8SmallMMax || !takes_small_m(w, M) || w.N != w.Np || w.N % 256 != 0)
    return false;
  const int64_t inter = w.N / 2;
  *y = Tensor::empty({M, inter}, DType::kBF16, Device::kCuda);
  kernels::Fp8GemmSmallMParams p = small_m_params(w, M, y->data(), inter);
  p.N = inter;
  p.silu = true;
  p.up_row = inter;
  Tensor q, sx;
  if (xq && quantized_for(*xq, *xs, xq_ue8m0, w, r.ue8m0, M)) {  // made by the producer (the norm)
    q = *xq;
    sx = *xs;
  } else if (!use_fused_quant(x, w, r.ue8m0, &p)) {
    quantize_small_m(x, w, r.ue8m0, &q, &sx);
  }
  if (q.defined()) {
    p.q = q.data_as<uint8_t>();
    p.sx = sx.data_as<float>();
    p.sx_ld = w.Kp / 128;
  }
  DS_CUDA_CHECK(kernels::launch_fp8_gemm_small_m(p, cuda_stream()));
  return true;
}

bool Fp8Gemm::linear_quantized_small_m(const Tensor& q, const Tensor& sx, bool ue8m0, const LinearWeight& prepared,
                                       Tensor* y) {
  const Registered& r = registered(prepared);
  const int64_t M = q.ndim() == 2 ? q.dim(0) : -1;
  if (!quantized_for(q, sx, ue8m0, r.w, r.ue8m0, M)) return false;
  if (M == 0) return false;
  if (!takes_small_m(r.w, M)) {
    if (!wgmma_auto(r.w, M)) return false;
    *y = Tensor::empty({M, r.w.N}, DType::kBF16, Device::kCuda);
    run_wgmma(wgmma_params(q, sx, r.w, M, *y), r.w);
    return true;
  }
  *y = Tensor::empty({M, r.w.N}, DType::kBF16, Device::kCuda);
  small_m_chunks(q, sx, r.w, M, *y);
  return true;
}

void Fp8Gemm::linear_to(const Tensor& x, const Fp8Weight& w, bool ue8m0, Fp8Path path, Tensor& y, int64_t y_rows) {
  DS_CHECK(x.device() == Device::kCuda && x.ndim() == 2 && x.dim(1) == w.K &&
               (x.dtype() == DType::kBF16 || x.dtype() == DType::kF32),
           "fp8 linear x ", x.describe(), " for weight [", w.N, ", ", w.K, "]");
  const int64_t M = x.dim(0);
  DS_CHECK(y.ndim() == 2 && y.dim(0) == M && y.dim(1) == w.N && y.dtype() == DType::kBF16 && y_rows >= M,
           "fp8 linear output ", y.describe(), " (", y_rows, " rows) for M ", M);
  if (M == 0) return;
  if (path == Fp8Path::kAuto)
    path = takes_small_m(w, M) ? Fp8Path::kSmallM : wgmma_auto(w, M) ? Fp8Path::kWgmma : Fp8Path::kCublasLt;
  if (path == Fp8Path::kWgmma && !wgmma_fits(w, M)) path = Fp8Path::kSmallM;  // forced with no map: still correct
  cudaStream_t stream = cuda_stream();
  const int64_t kb = w.Kp / 128;
  const int64_t Mp = round_up(M, kLtRowMultiple);  // cuBLASLt rows; the pad rows are zero tokens
  if (path == Fp8Path::kCublasLt && !lt_supported(Mp, w.Np, w.Kp)) path = Fp8Path::kSmallM;  // chunked fallback
  if (path == Fp8Path::kWgmma) {
    Tensor q, sx;
    quantize_small_m(x, w, ue8m0, &q, &sx);
    run_wgmma(wgmma_params(q, sx, w, M, y), w);
    return;
  }
  if (path == Fp8Path::kSmallM) {
    kernels::Fp8GemmSmallMParams p = small_m_params(w, M, y.data(), w.N);
    if (use_fused_quant(x, w, ue8m0, &p)) {
      DS_CUDA_CHECK(kernels::launch_fp8_gemm_small_m(p, stream));
      return;
    }
    Tensor q, sx;
    quantize_small_m(x, w, ue8m0, &q, &sx);
    small_m_chunks(q, sx, w, M, y);
    return;
  }
  Tensor qp_rows = Tensor::empty({Mp, w.Kp}, DType::kF8E4M3, Device::kCuda);
  const bool m_major = (lt_layout_ & 1) != 0;
  const int64_t sld = m_major ? lt_scale_ld(Mp) : kb;
  Tensor sx = Tensor::empty({m_major ? kb : Mp, m_major ? sld : kb}, DType::kF32, Device::kCuda);
  kernels::Fp8QuantParams qp = quant_params(x, w, ue8m0, qp_rows, sx.data_as<float>());
  qp.M_pad = Mp;  // the pad rows quantized as zero tokens in the same launch
  qp.s_ld = sld;
  qp.s_m_major = m_major;
  // Scales past the pad rows (stride padding, none when Mp is a multiple of 4) are never a token's: keep them finite.
  if (m_major && sld > Mp) DS_CUDA_CHECK(cudaMemsetAsync(sx.data(), 0, sx.nbytes(), stream));
  DS_CUDA_CHECK(kernels::launch_fp8_quant_act(qp, stream));
  if (w.Np == w.N && Mp <= y_rows) {  // the padded rows land in the caller's spare rows
    run_cublaslt(qp_rows.data(), sx.data_as<float>(), w, Mp, y.data(), stream);
  } else {
    Tensor tmp = Tensor::empty({Mp, w.Np}, DType::kBF16, Device::kCuda);
    run_cublaslt(qp_rows.data(), sx.data_as<float>(), w, Mp, tmp.data(), stream);
    DS_CUDA_CHECK(cudaMemcpy2DAsync(y.data(), w.N * 2, tmp.data(), w.Np * 2, w.N * 2, M, cudaMemcpyDeviceToDevice,
                                    stream));
  }
}

}  // namespace ds
