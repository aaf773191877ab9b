// cuBLASLt GEMM wrapper (see cublaslt_gemm.h). Row-major D = X · W' is computed as the column-major
// Dᵀ[N, M] = W'ᵀ[N, K] · Xᵀ[K, M], so X and D need no transposition and W is transposed iff stored [N, K].
#include "ops/cuda/cublaslt_gemm.h"

#include <cstdio>

#include "ops/cuda/cuda_runtime.h"

#define DS_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                     \
    cublasStatus_t ds_st_ = (expr);                                                        \
    DS_CHECK(ds_st_ == CUBLAS_STATUS_SUCCESS, #expr, ": cublas status ", static_cast<int>(ds_st_)); \
  } while (0)

namespace ds {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    default: DS_CHECK(false, "cuBLASLt GEMM: unsupported dtype ", dtype_name(t));
  }
  return CUDA_R_32F;
}

// Largest power of two <= 256 dividing every address a batched operand starts at.
uint32_t alignment(const void* p, int64_t stride_elems, size_t elem_bytes, int batch) {
  uint64_t v = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1) v |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  return static_cast<uint32_t>(v & (~v + 1));
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CublasLtGemm::CublasLtGemm() {
  DS_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_bytes_ = kWorkspaceBytes;
  DS_CUDA_CHECK(cudaMallocAsync(&workspace_, workspace_bytes_, cuda_stream()));
  DS_CUDA_CHECK(cudaMallocAsync(&side_workspace_, workspace_bytes_, cuda_stream()));
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (workspace_) cudaFreeAsync(workspace_, cuda_stream());
  if (side_workspace_) cudaFreeAsync(side_workspace_, cuda_stream());
  if (handle_) cublasLtDestroy(handle_);
}

CublasLtGemm::Plan& CublasLtGemm::plan_for(const GemmArgs& g) {
  const size_t in_bytes = dtype_size(g.in_type), out_bytes = dtype_size(g.out_type);
  const uint32_t al_a = alignment(g.w, g.stride_w, in_bytes, g.batch);
  const uint32_t al_b = alignment(g.x, g.stride_x, in_bytes, g.batch);
  const uint32_t al_d = alignment(g.d, g.stride_d, out_bytes, g.batch);
  char key[256];
  std::snprintf(key, sizeof(key), "%d %d %d %lld %lld %lld %lld %lld %lld %d %lld %lld %lld %u %u %u",
                static_cast<int>(g.in_type), static_cast<int>(g.out_type), g.w_nk ? 1 : 0,
                static_cast<long long>(g.M), static_cast<long long>(g.N), static_cast<long long>(g.K),
                static_cast<long long>(g.ldx), static_cast<long long>(g.ldw), static_cast<long long>(g.ldd), g.batch,
                static_cast<long long>(g.stride_x), static_cast<long long>(g.stride_w),
                static_cast<long long>(g.stride_d), al_a, al_b, al_d);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t in_t = cuda_type(g.in_type), out_t = cuda_type(g.out_type);
  DS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.w_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  DS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  DS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // A = W: stored [N, K] row-major = column-major K x N (transposed by the op), or [K, N] = column-major N x K.
  if (g.w_nk)
    DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, in_t, g.K, g.N, g.ldw));
  else
    DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, in_t, g.N, g.K, g.ldw));
  DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, in_t, g.K, g.M, g.ldx));   // Xᵀ: column-major K x M
  DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, out_t, g.N, g.M, g.ldd));  // Dᵀ: column-major N x M
  if (g.batch > 1) {
    const int32_t batch = g.batch;
    struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
    } layouts[] = {{plan->a, g.stride_w}, {plan->b, g.stride_x}, {plan->d, g.stride_d}};
    for (auto& l : layouts) {
      DS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      DS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.stride,
                                                       sizeof(l.stride)));
    }
  }
  cublasLtMatmulPreference_t pref;
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
  DS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  DS_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0, "cuBLASLt has no algorithm for GEMM ", key, " (status ",
           static_cast<int>(st), ")");
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void CublasLtGemm::run(const GemmArgs& g, cudaStream_t stream) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  DS_CHECK(g.K > 0, "GEMM with K = 0");
  std::lock_guard<std::mutex> lock(mu_);
  Plan& p = plan_for(g);
  const float alpha = 1.0f, beta = 0.0f;
  DS_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, g.w, p.a, g.x, p.b, &beta, g.d, p.d, g.d, p.d, &p.algo,
                                 stream == cuda_main_stream() ? workspace_ : side_workspace_, workspace_bytes_, stream));
}

}  // namespace ds
