// Tensor: a typed, shaped view of contiguous (row-major) memory on one device.
// A Tensor may keep its storage alive (shared_ptr), so a view taken from an owning
// tensor or arena stays valid as long as any copy of it exists. Copying a Tensor is
// cheap and never copies data. Ops write through the data pointer of a const Tensor&:
// constness is of the view, not of the elements.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/device.h"
#include "core/dtype.h"

namespace vlm {

class Backend;

// Row-major shape with up to kMaxDims dimensions; negative indices count from the end.
class Shape {
 public:
  static constexpr int kMaxDims = 5;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int ndim() const { return n_; }
  int64_t operator[](int i) const;
  int64_t numel() const;
  // Product of all dimensions but the last (rows of a [.., C] tensor), and the last.
  int64_t rows() const;  // product of dims [0, ndim-1) (1 for a scalar), also when the last is 0
  int64_t cols() const { return n_ == 0 ? 1 : (*this)[-1]; }
  std::vector<int64_t> dims() const { return {d_.begin(), d_.begin() + n_}; }
  std::string str() const;  // "[2,3,4]"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // A non-owning view of `data`.
  Tensor(void* data, Shape shape, DType dtype, DeviceKind device,
         std::shared_ptr<void> keepalive = nullptr);

  // Owning, uninitialised / zero-filled tensors allocated by a backend.
  static Tensor empty(Backend& b, Shape shape, DType dtype = DType::F32);
  static Tensor zeros(Backend& b, Shape shape, DType dtype = DType::F32);
  // Host tensor (CPU backend) filled from a vector.
  static Tensor from_vector(const std::vector<float>& v, Shape shape);
  static Tensor from_vector(const std::vector<int32_t>& v, Shape shape);
  static Tensor from_vector(const std::vector<double>& v, Shape shape);

  // False for a default-constructed Tensor ("no tensor", e.g. an absent bias).
  bool defined() const { return defined_; }
  void* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t rows() const { return shape_.rows(); }
  int64_t cols() const { return shape_.cols(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  DeviceKind device() const { return device_; }
  bool is_cpu() const { return device_ == DeviceKind::CPU; }

  // Typed element pointer; aborts if T does not match dtype().
  template <typename T>
  T* ptr() const {
    VLM_ASSERT(dtype_of<T>::value == dtype_, "tensor is ", dtype_name(dtype_), ", accessed as ",
               dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data_);
  }

  // Same memory, new shape (numel must agree).
  Tensor view(Shape shape) const;
  // Rows [begin, end) along dimension 0 (contiguous sub-block).
  Tensor slice(int64_t begin, int64_t end) const;
  // Element offset `offset` with the given shape (bounds-checked): arena and packed views.
  Tensor sub(int64_t offset, Shape shape) const;
  // The same bytes seen as another dtype and shape (byte sizes must fit): arenas.
  Tensor reinterpret(DType dtype, Shape shape) const;

  std::string str() const;  // "f32[2,3] on cpu"

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  DeviceKind device_ = DeviceKind::CPU;
  bool defined_ = false;
  std::shared_ptr<void> keepalive_;
};

// Copies between any two tensors of the same shape and dtype, on any devices
// (synchronous; for set-up, checks and tests, not for the hot path).
void copy_tensor(const Tensor& dst, const Tensor& src);
// A host (CPU) copy of `t` (dtype kept).
Tensor to_host(const Tensor& t);
// A copy of `t` on backend `b` (dtype kept).
Tensor to_backend(Backend& b, const Tensor& t);
// Host values as a tensor of shape s and dtype dt (f32 or f64) on backend b: the fixed
// matrices and constants a module builds at set-up.
Tensor upload_values(Backend& b, const std::vector<double>& v, Shape s, DType dt);
// Host values of t as f32 (f32, bf16, f64 and i32 are converted).
std::vector<float> to_vector_f32(const Tensor& t);
std::vector<double> to_vector_f64(const Tensor& t);

// Throws UserError "<what>: expected shape X, got Y" unless t.shape() == s.
void require_shape(const Tensor& t, const Shape& s, const char* what);

}  // namespace vlm
