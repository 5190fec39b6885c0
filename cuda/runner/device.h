// The runner's host-side glue between a case's tensors and the kernels, shared by ops.cpp (the single ops)
// and model.cpp (the model cases): device buffers that --check-only leaves unallocated, bounds-checked views
// into them, and the case's params and tensors read with their checks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../kernels.h"
#include "plumb/core/error.h"
#include "plumb/fixtures/suite_reader.h"

namespace plumb::cuda {

using Shape = std::vector<std::int64_t>;

// Set by RunCase for a --check-only pass: buffers hold no device memory, kernels are not launched, and
// downloads are zeros of the right shape (the runner is single-threaded).
inline bool check_only_pass = false;
// Set by RunCase: what the kernels round (kernels.h Precision).
inline Precision run_precision = Precision::kFp32;

inline void CheckCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw MakeError("CUDA ", what, ": ", cudaGetErrorString(status));
}

inline std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

inline std::string ShapeText(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <class T>
class DeviceSpan;

// One device allocation holding a copy of a tensor's bytes (or zero-initialised scratch), freed with it.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (!check_only_pass) CheckCuda(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 1)), "cudaMalloc");
  }
  explicit DeviceBuffer(std::span<const std::uint8_t> bytes) : DeviceBuffer(bytes.size()) {
    if (!bytes.empty() && !check_only_pass)
      CheckCuda(cudaMemcpy(ptr_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "copy to device");
  }
  explicit DeviceBuffer(const fixtures::Tensor& t) : DeviceBuffer(std::span<const std::uint8_t>(t.bytes)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }

  std::size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  // The whole buffer as elements of T (its size must be a multiple of T's; checked).
  template <class T>
  DeviceSpan<T> Span() const;

  // The buffer's bytes as a tensor (also where a kernel's faults surface: the copy synchronises).
  fixtures::Tensor Download(std::string dtype, Shape shape) const {
    return DownloadFirst(std::move(dtype), std::move(shape), bytes_);
  }
  // Its first `bytes` only (at most all of them): an output the kernel sizes itself.
  fixtures::Tensor DownloadFirst(std::string dtype, Shape shape, std::size_t bytes) const {
    return DownloadRange(std::move(dtype), std::move(shape), 0, bytes);
  }
  // `bytes` bytes from byte `offset` (both clipped to the buffer).
  fixtures::Tensor DownloadRange(std::string dtype, Shape shape, std::size_t offset,
                                 std::size_t bytes) const {
    offset = std::min(offset, bytes_);
    bytes = std::min(bytes, bytes_ - offset);
    fixtures::Tensor t{std::move(dtype), std::move(shape), std::vector<std::uint8_t>(bytes)};
    if (check_only_pass) return t;
    CheckCuda(cudaDeviceSynchronize(), "kernel");
    if (bytes != 0)
      CheckCuda(cudaMemcpy(t.bytes.data(), as<std::uint8_t>() + offset, bytes, cudaMemcpyDeviceToHost),
                "copy to host");
    return t;
  }
  // Copies `bytes` to byte `offset` of the buffer (checked to fit; nothing under --check-only).
  void Upload(std::size_t offset, std::span<const std::uint8_t> bytes) const {
    if (offset > bytes_ || bytes.size() > bytes_ - offset)
      throw MakeError("upload of ", bytes.size(), " bytes at ", offset, " past the end of a ", bytes_,
                      "-byte device buffer");
    if (check_only_pass || bytes.empty()) return;
    CheckCuda(cudaMemcpy(as<std::uint8_t>() + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              "copy to device");
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Elements [offset, offset + count) of a device buffer, as T. Every slice is checked against the range on the
// host, so a wrong offset or size in the runner is an error before any launch (and under --check-only, where
// no kernel runs); the device pointer is formed only for a launch, and asking for it under --check-only is an
// error too, so a launch the check-only pass forgot to leave out shows in CI.
template <class T>
class DeviceSpan {
 public:
  DeviceSpan() = default;
  DeviceSpan(const DeviceBuffer* buffer, std::int64_t offset, std::int64_t count)
      : buffer_(buffer), offset_(offset), count_(count) {}

  std::int64_t count() const { return count_; }
  // Elements [begin, begin + n) of this span.
  DeviceSpan Slice(std::int64_t begin, std::int64_t n) const {
    if (begin < 0 || n < 0 || begin > count_ || n > count_ - begin)
      throw MakeError("runner: slice [", begin, ", ", begin + n, ") of a ", count_, "-element device span");
    return DeviceSpan(buffer_, offset_ + begin, n);
  }
  // The span, required to hold exactly `n` elements (what a kernel call reads or writes).
  DeviceSpan Expect(std::int64_t n, const char* what) const {
    if (count_ != n) throw MakeError("runner: ", what, " holds ", count_, " elements, the kernel takes ", n);
    return *this;
  }
  T* get() const {
    if (check_only_pass || buffer_ == nullptr)
      throw MakeError("runner: a device pointer was asked for under --check-only (a launch not left out)");
    return buffer_->as<T>() + offset_;
  }

 private:
  const DeviceBuffer* buffer_ = nullptr;
  std::int64_t offset_ = 0, count_ = 0;
};

template <class T>
DeviceSpan<T> DeviceBuffer::Span() const {
  if (bytes_ % sizeof(T) != 0)
    throw MakeError("runner: a ", bytes_, "-byte device buffer read as ", sizeof(T), "-byte elements");
  return DeviceSpan<T>(this, 0, static_cast<std::int64_t>(bytes_ / sizeof(T)));
}

// The case's params and tensors, each read with its check.
class CaseIo {
 public:
  CaseIo(const fixtures::Case& c, const fixtures::TensorFile& in) : c_(c), in_(in) {}

  const fixtures::Case& c() const { return c_; }
  std::int64_t Int(const char* key, std::int64_t min = 1) const {
    if (!c_.params.contains(key) || !c_.params[key].is_number_integer())
      throw MakeError("case ", c_.name, ": param \"", key, "\" missing or not an integer");
    const auto v = c_.params[key].get<std::int64_t>();
    if (v < min || v > (std::int64_t{1} << 31) - 1)
      throw MakeError("case ", c_.name, ": param \"", key, "\" = ", v, " out of range");
    return v;
  }
  int Int32(const char* key, std::int64_t min = 1) const { return static_cast<int>(Int(key, min)); }
  double Number(const char* key) const {
    if (!c_.params.contains(key) || !c_.params[key].is_number())
      throw MakeError("case ", c_.name, ": param \"", key, "\" missing or not a number");
    return c_.params[key].get<double>();
  }
  bool Bool(const char* key) const {
    if (!c_.params.contains(key) || !c_.params[key].is_boolean())
      throw MakeError("case ", c_.name, ": param \"", key, "\" missing or not a boolean");
    return c_.params[key].get<bool>();
  }
  std::string String(const char* key) const {
    if (!c_.params.contains(key) || !c_.params[key].is_string())
      throw MakeError("case ", c_.name, ": param \"", key, "\" missing or not a string");
    return c_.params[key].get<std::string>();
  }
  bool Has(const std::string& name) const { return in_.Has(name); }
  bool HasParam(const char* key) const { return c_.params.contains(key); }
  // Tensor `name`, required to have this dtype and shape.
  const fixtures::Tensor& Get(const std::string& name, const std::string& dtype, const Shape& shape) const {
    const fixtures::Tensor& t = in_.Get(name);
    if (t.dtype != dtype || t.shape != shape) {
      throw MakeError("case ", c_.name, ": tensor \"", name, "\" is ", t.dtype, " ", ShapeText(t.shape),
                      ", expected ", dtype, " ", ShapeText(shape));
    }
    return t;
  }
  // Tensor `name`, required to be a vector (one dimension) of this dtype, of any length.
  const fixtures::Tensor& GetVector(const std::string& name, const std::string& dtype) const {
    const fixtures::Tensor& t = in_.Get(name);
    if (t.dtype != dtype || t.shape.size() != 1)
      throw MakeError("case ", c_.name, ": tensor \"", name, "\" is ", t.dtype, " ", ShapeText(t.shape),
                      ", expected a vector of ", dtype);
    return t;
  }
  template <class... Args>
  [[noreturn]] void Fail(Args&&... args) const {
    throw MakeError("case ", c_.name, ": ", std::forward<Args>(args)...);
  }

 private:
  const fixtures::Case& c_;
  const fixtures::TensorFile& in_;
};

}  // namespace plumb::cuda
