// Tensor: a typed, shaped, contiguous view of memory on one device, sharing ownership of its storage.
// Backends allocate through the per-device allocator registered here; views (reshape, rows) are free.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace ds {

enum class Device : uint8_t { kCpu, kCuda };
const char* device_name(Device d);

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);

struct DeviceAllocator {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> free;
};
// The CUDA backend registers its allocator at start-up; the CPU one is built in.
void set_device_allocator(Device d, DeviceAllocator a);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(Shape shape, DType dtype, Device device = Device::kCpu);
  static Tensor zeros(Shape shape, DType dtype);  // CPU only
  // Wraps memory owned elsewhere; `keepalive` (may be null) is held as long as any view exists.
  static Tensor wrap(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> keepalive);

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const {
    int n = ndim();
    if (i < 0) i += n;
    DS_CHECK(i >= 0 && i < n, "dim ", i, " of ", shape_str(shape_));
    return shape_[i];
  }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* data() const { return data_; }
  template <class T>
  T* data_as() const { return static_cast<T*>(data_); }
  // CPU fp32 convenience accessor (checks dtype and device).
  float* f32() const;

  Tensor reshape(Shape shape) const;          // same storage; numel must match (one -1 allowed)
  Tensor rows(int64_t begin, int64_t end) const;  // view of rows [begin, end) along dim 0
  Tensor row(int64_t i) const { return rows(i, i + 1).reshape(Shape(shape_.begin() + 1, shape_.end())); }

  std::string describe() const;  // "BF16[4, 576] cpu"

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  std::shared_ptr<void> storage_;
  bool defined_ = false;
};

// Checks a tensor's shape at an op boundary; -1 in `expected` matches any extent.
void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, const char* what);
#define DS_CHECK_SHAPE(t, ...) ::ds::check_shape((t), __VA_ARGS__, #t)

// Copies any float-typed CPU tensor into a new fp32 CPU tensor; to_f32_into writes its numel() floats to out.
Tensor to_f32(const Tensor& t);
void to_f32_into(const Tensor& t, float* out);

}  // namespace ds
