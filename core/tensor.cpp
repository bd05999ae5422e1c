// Shape and Tensor (see tensor.h): views, owning allocation, host/device copies.
#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include "core/backend.h"

namespace vlm {

// Without a temporary vector: shapes are built inside ops (core/ops/contract_*.cpp),
// which allocate nothing.
Shape::Shape(std::initializer_list<int64_t> dims) {
  VLM_ASSERT(dims.size() <= size_t(kMaxDims), "at most ", kMaxDims, " dims, got ", dims.size());
  for (int64_t v : dims) {
    VLM_ASSERT(v >= 0, "negative dimension ", v);
    d_[size_t(n_++)] = v;
  }
}

Shape::Shape(const std::vector<int64_t>& dims) {
  VLM_ASSERT(dims.size() <= size_t(kMaxDims), "at most ", kMaxDims, " dims, got ", dims.size());
  for (int64_t v : dims) VLM_ASSERT(v >= 0, "negative dimension ", v);
  n_ = int(dims.size());
  for (int i = 0; i < n_; ++i) d_[i] = dims[i];
}

int64_t Shape::operator[](int i) const {
  if (i < 0) i += n_;
  VLM_ASSERT(i >= 0 && i < n_, "dim ", i, " out of range for ", str());
  return d_[i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i) n *= d_[i];
  return n;
}

int64_t Shape::rows() const {
  int64_t r = 1;
  for (int i = 0; i + 1 < n_; ++i) r *= d_[i];
  return r;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < n_; ++i) os << (i ? "," : "") << d_[i];
  os << ']';
  return os.str();
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[i] != o.d_[i]) return false;
  return true;
}

Tensor::Tensor(void* data, Shape shape, DType dtype, DeviceKind device, std::shared_ptr<void> keepalive)
    : data_(data), shape_(shape), dtype_(dtype), device_(device), defined_(true),
      keepalive_(std::move(keepalive)) {}

Tensor Tensor::empty(Backend& b, Shape shape, DType dtype) {
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  void* p = b.allocate(bytes ? bytes : 1);
  Backend* owner = &b;
  std::shared_ptr<void> keep(p, [owner](void* q) { owner->deallocate(q); });
  return Tensor(p, shape, dtype, b.device(), std::move(keep));
}

Tensor Tensor::zeros(Backend& b, Shape shape, DType dtype) {
  Tensor t = empty(b, shape, dtype);
  b.memset_zero(t.data(), t.nbytes());
  return t;
}

template <typename T>
static Tensor host_from(const std::vector<T>& v, Shape shape) {
  VLM_ASSERT(int64_t(v.size()) == shape.numel(), "vector of ", v.size(), " for shape ", shape.str());
  Tensor t = Tensor::empty(cpu_backend(), shape, dtype_of<T>::value);
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}
Tensor Tensor::from_vector(const std::vector<float>& v, Shape s) { return host_from(v, s); }
Tensor Tensor::from_vector(const std::vector<int32_t>& v, Shape s) { return host_from(v, s); }
Tensor Tensor::from_vector(const std::vector<double>& v, Shape s) { return host_from(v, s); }

Tensor Tensor::view(Shape shape) const {
  VLM_ASSERT(shape.numel() == numel(), "view ", shape.str(), " of ", shape_.str());
  return Tensor(data_, shape, dtype_, device_, keepalive_);
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  VLM_ASSERT(ndim() >= 1 && 0 <= begin && begin <= end && end <= size(0), "slice [", begin, ",", end,
             ") of ", shape_.str());
  std::vector<int64_t> d = shape_.dims();
  int64_t row = numel() / (d[0] ? d[0] : 1);
  d[0] = end - begin;
  return sub(begin * row, Shape(d));
}

Tensor Tensor::sub(int64_t offset, Shape shape) const {
  VLM_ASSERT(offset >= 0 && offset + shape.numel() <= numel(), "sub(", offset, ", ", shape.str(),
             ") of ", shape_.str());
  char* p = static_cast<char*>(data_) + size_t(offset) * dtype_size(dtype_);
  return Tensor(p, shape, dtype_, device_, keepalive_);
}

Tensor Tensor::reinterpret(DType dtype, Shape shape) const {
  VLM_ASSERT(size_t(shape.numel()) * dtype_size(dtype) <= nbytes(), "reinterpret ", str(), " as ",
             dtype_name(dtype), shape.str());
  return Tensor(data_, shape, dtype, device_, keepalive_);
}

std::string Tensor::str() const {
  return cat(dtype_name(dtype_), shape_.str(), " on ", device_name(device_));
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  VLM_ASSERT(dst.dtype() == src.dtype() && dst.numel() == src.numel(), "copy ", src.str(), " -> ",
             dst.str());
  if (dst.nbytes() == 0) return;
  DeviceKind via = dst.device() == DeviceKind::CUDA ? DeviceKind::CUDA : src.device();
  backend_for(via).copy(dst.data(), dst.device(), src.data(), src.device(), dst.nbytes());
}

Tensor to_host(const Tensor& t) {
  Tensor h = Tensor::empty(cpu_backend(), t.shape(), t.dtype());
  copy_tensor(h, t);
  return h;
}

Tensor to_backend(Backend& b, const Tensor& t) {
  Tensor d = Tensor::empty(b, t.shape(), t.dtype());
  copy_tensor(d, t);
  return d;
}

Tensor upload_values(Backend& b, const std::vector<double>& v, Shape s, DType dt) {
  VLM_ASSERT(dt == DType::F32 || dt == DType::F64, "upload_values: f32 or f64, not ", dtype_name(dt));
  return to_backend(b, dt == DType::F64 ? Tensor::from_vector(v, s)
                                        : Tensor::from_vector(std::vector<float>(v.begin(), v.end()), s));
}

template <typename Out>
static std::vector<Out> host_values(const Tensor& t) {
  Tensor h = t.is_cpu() ? t : to_host(t);
  std::vector<Out> v(size_t(h.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (h.dtype()) {
      case DType::F32: v[i] = Out(h.ptr<float>()[i]); break;
      case DType::F64: v[i] = Out(h.ptr<double>()[i]); break;
      case DType::BF16: v[i] = Out(bf16_to_f32(h.ptr<bf16>()[i])); break;
      case DType::I32: v[i] = Out(h.ptr<int32_t>()[i]); break;
      case DType::U8: v[i] = Out(h.ptr<uint8_t>()[i]); break;
    }
  }
  return v;
}
std::vector<float> to_vector_f32(const Tensor& t) { return host_values<float>(t); }
std::vector<double> to_vector_f64(const Tensor& t) { return host_values<double>(t); }

void require_shape(const Tensor& t, const Shape& s, const char* what) {
  VLM_REQUIRE(t.shape() == s, what, ": expected shape ", s.str(), ", got ", t.shape().str());
}

}  // namespace vlm
