// Tensor storage, views and shape checks.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace ds {
namespace {
DeviceAllocator& allocator(Device d) {
  static DeviceAllocator cpu{[](size_t n) { return std::aligned_alloc(64, (n + 63) / 64 * 64); },
                             [](void* p) { std::free(p); }};
  static DeviceAllocator cuda{};
  return d == Device::kCpu ? cpu : cuda;
}
}  // namespace

const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

void set_device_allocator(Device d, DeviceAllocator a) { allocator(d) = std::move(a); }

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t e : shape_) n *= e;
  return n;
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  for (int64_t e : t.shape_) DS_CHECK(e >= 0, "negative extent in ", shape_str(t.shape_));
  size_t n = t.nbytes();
  DeviceAllocator& a = allocator(device);
  DS_CHECK(a.alloc, "no allocator registered for ", device_name(device));
  void* p = a.alloc(n ? n : 1);
  DS_CHECK(p, "allocation of ", n, " bytes on ", device_name(device), " failed");
  auto free_fn = a.free;
  t.storage_ = std::shared_ptr<void>(p, [free_fn](void* q) { free_fn(q); });
  t.data_ = p;
  t.defined_ = true;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype, Device::kCpu);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> keepalive) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::move(keepalive);
  t.defined_ = true;
  return t;
}

float* Tensor::f32() const {
  DS_CHECK(dtype_ == DType::kF32 && device_ == Device::kCpu, "expected fp32 cpu tensor, got ", describe());
  return static_cast<float*>(data_);
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1;
  int neg = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      DS_CHECK(neg < 0, "two -1 extents in reshape");
      neg = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (neg >= 0) {
    DS_CHECK(known > 0 && numel() % known == 0, "cannot reshape ", describe(), " to ", shape_str(shape));
    shape[neg] = numel() / known;
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  DS_CHECK(t.numel() == numel(), "cannot reshape ", describe(), " to ", shape_str(t.shape_));
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  DS_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "rows [", begin, ", ", end,
           ") of ", describe());
  int64_t row_elems = shape_[0] ? numel() / shape_[0] : 0;
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row_elems) * dtype_size(dtype_);
  return t;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device_name(device_);
}

void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, const char* what) {
  bool ok = static_cast<size_t>(t.ndim()) == expected.size();
  if (ok) {
    int i = 0;
    for (int64_t e : expected) {
      if (e != -1 && t.shape()[i] != e) ok = false;
      ++i;
    }
  }
  DS_CHECK(ok, what, " has shape ", shape_str(t.shape()), ", expected ", shape_str(Shape(expected)));
}

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32);
  to_f32_into(t, out.f32());
  return out;
}

void to_f32_into(const Tensor& t, float* o) {
  DS_CHECK(t.device() == Device::kCpu, "to_f32 needs a cpu tensor, got ", t.describe());
  const int64_t n = t.numel();
  if (t.dtype() == DType::kF32) {
    std::memcpy(o, t.data(), t.nbytes());
  } else if (t.dtype() == DType::kBF16) {  // the common case (checkpoints, --quantization fp8): no per-value switch
    const uint16_t* s = t.data_as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(s[i]);
  } else if (t.dtype() == DType::kF8E4M3) {
    const uint8_t* s = t.data_as<uint8_t>();
    const float* lut = fp8e4m3_table();
    for (int64_t i = 0; i < n; ++i) o[i] = lut[s[i]];
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = load_as_f32(t.data(), t.dtype(), static_cast<size_t>(i));
  }
}

}  // namespace ds
