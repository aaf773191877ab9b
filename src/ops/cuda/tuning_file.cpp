// Where a per-GPU dispatch table is found (tuning_file.h).
#include "ops/cuda/tuning_file.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <cuda_runtime.h>

#include "core/env.h"

namespace ds {

std::string tuning_path(const char* env, const char* subdir, int device_index) {
  if (const char* e = env_text(env)) return e;
  cudaDeviceProp prop{};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || cudaGetDeviceProperties(&prop, device_index) != cudaSuccess) return "";
  std::string name = prop.name;
  std::replace(name.begin(), name.end(), ' ', '_');
  const std::filesystem::path p = exe.parent_path().parent_path() / "configs" / subdir / (name + ".json");
  return std::filesystem::is_regular_file(p, ec) ? p.string() : "";
}

}  // namespace ds
