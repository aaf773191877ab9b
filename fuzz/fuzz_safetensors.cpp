// libFuzzer target: the safetensors reader's validation (SafetensorsFile::from_memory, what open() runs on the
// mapped file) on arbitrary bytes (header length, JSON header, offsets, dtypes); every tensor it accepts is read
// back in full. From a buffer, not a file: a file write and mmap per input made this target ten times slower
// than the others (~430 inputs/s under ASan).
#include <cstdint>
#include <cstring>
#include <memory>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan sees a read past the end; the readers may write views (as a private
  // mapping allows).
  std::shared_ptr<uint8_t[]> buf(new uint8_t[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(buf.get(), data, size);
  auto file = ds::SafetensorsFile::from_memory("fuzz.safetensors", buf, buf.get(), size);
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
