// libFuzzer target: the safetensors reader on arbitrary file contents (header length, JSON header,
// offsets, dtypes); every tensor it accepts is read back in full.
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/dserve_fuzz_" + std::to_string(getpid()) + ".safetensors";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto file = ds::SafetensorsFile::open(path);
  if (!file.is_ok()) return 0;
  volatile uint64_t sum = 0;
  for (const ds::TensorInfo& t : (*file)->tensors()) {
    auto tensor = (*file)->get(t.name);
    if (!tensor.is_ok()) continue;
    const auto* bytes = static_cast<const uint8_t*>(tensor->data());
    for (size_t i = 0; i < tensor->nbytes(); ++i) sum = sum + bytes[i];
  }
  return 0;
}
