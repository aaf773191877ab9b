// GEMMs of the CUDA backend through cuBLASLt: row-major D[M, N] = X[M, K] · W' (W' = Wᵀ for a weight
// stored [N, K], as nn.Linear; W itself for one stored [K, N]), optionally strided-batched; bf16 or fp32
// operands, fp32 accumulation, bf16 or fp32 output. Descriptors and the heuristic's algorithm are cached
// per shape/stride/alignment.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/dtype.h"

namespace ds {

struct GemmArgs {
  const void* x = nullptr;  // [M, K] row-major, row stride ldx
  int64_t ldx = 0;
  const void* w = nullptr;  // [N, K] (w_nk) or [K, N], row stride ldw
  int64_t ldw = 0;
  bool w_nk = true;
  void* d = nullptr;  // [M, N] row-major, row stride ldd
  int64_t ldd = 0;
  DType in_type = DType::kBF16;  // x and w
  DType out_type = DType::kBF16;
  int64_t M = 0, N = 0, K = 0;
  int batch = 1;  // strides in elements between consecutive batches
  int64_t stride_x = 0, stride_w = 0, stride_d = 0;
};

class CublasLtGemm {
 public:
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues the GEMM on `stream` (DS_CHECK on an unsupported combination).
  void run(const GemmArgs& a, cudaStream_t stream);

 private:
  struct Plan;
  Plan& plan_for(const GemmArgs& a);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;       // for GEMMs on the compute stream
  void* side_workspace_ = nullptr;  // for GEMMs on the side stream (they may run concurrently)
  size_t workspace_bytes_ = 0;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
};

}  // namespace ds
