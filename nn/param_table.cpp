// ParamTable: local slices of the parameter table (see param_table.h).
#include "nn/param_table.h"

#include <cstring>

#include "core/ops.h"
#include "parallel/regions.h"

namespace vlm {

ParamSpec param_spec(std::string name, Shape full, int split_dim, InitKind init, float std, bool tp_partial_grad) {
  ParamSpec s;
  s.name = std::move(name);
  s.full = full;
  s.hf = full;
  s.split_dim = split_dim;
  s.init = init;
  s.std = std;
  s.tp_partial_grad = tp_partial_grad;
  return s;
}

ParamTable::ParamTable(std::vector<ParamSpec> specs, int tp, int tp_rank, DType dtype)
    : tp_(tp), tp_rank_(tp_rank), dtype_(dtype) {
  VLM_ASSERT(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "bad tp ", tp, " rank ", tp_rank);
  VLM_ASSERT(dtype == DType::F32 || dtype == DType::F64, "parameter table of ", dtype_name(dtype));
  for (auto& s : specs) {
    Param p;
    p.spec = std::move(s);
    std::vector<int64_t> d = p.spec.full.dims();
    if (p.spec.split_dim >= 0) {
      const int k = p.spec.split_dim;
      VLM_ASSERT(k < int(d.size()) && d[size_t(k)] % tp == 0, p.spec.name, ": ", p.spec.full.str(),
                 " not divisible by tp=", tp, " along dim ", k);
      d[size_t(k)] /= tp;
      p.offset = d[size_t(k)] * tp_rank;
    }
    p.local = Shape(d);
    VLM_ASSERT(!index_.count(p.spec.name), "duplicate parameter ", p.spec.name);
    index_[p.spec.name] = params_.size();
    values_.add(p.spec.name, p.local, dtype_);
    grads_.add(p.spec.name, p.local, dtype_);
    params_.push_back(std::move(p));
  }
}

void ParamTable::allocate(Backend& b, bool grads) {
  values_.allocate(b, true);
  if (grads) grads_.allocate(b, true);
  if (has_working() && !works_.entries().empty()) works_.allocate(b, true);
  for (auto& p : params_) {
    p.value = values_.get(p.spec.name);
    p.grad = grads ? grads_.get(p.spec.name) : Tensor{};
    p.work = works_.has(p.spec.name) ? works_.get(p.spec.name) : Tensor{};
  }
}

void ParamTable::add_bf16_working_copy() {
  VLM_ASSERT(!allocated() && !has_work_, "add_bf16_working_copy: once, before allocate");
  VLM_ASSERT(dtype_ == DType::F32, "bf16 working copy of a ", dtype_name(dtype_), " table");
  has_work_ = true;
  for (const Param& p : params_)
    if (p.local.ndim() >= 2) works_.add(p.spec.name, p.local, DType::BF16);
}

size_t ParamTable::bf16_copy_bytes() const {
  size_t n = 0;
  for (const Param& p : params_)
    if (p.local.ndim() >= 2) n += size_t(p.local.numel()) * dtype_size(DType::BF16);
  return n;
}

void ParamTable::refresh_working(Stream& s) {
  for (const Param& p : params_)
    if (p.work.defined()) convert(s, p.work, p.value);
}

const Param& ParamTable::get(const std::string& name) const {
  auto it = index_.find(name);
  VLM_ASSERT(it != index_.end(), "unknown parameter ", name);
  return params_[it->second];
}

size_t ParamTable::param_bytes() const {
  size_t n = 0;
  for (const auto& p : params_) n += size_t(p.local.numel()) * dtype_size(dtype_);
  return n;
}

Tensor ParamTable::local_slice(const Param& p, const Tensor& full_host) const {
  VLM_REQUIRE(full_host.shape() == p.spec.full || full_host.shape() == p.spec.hf, p.spec.name,
              ": expected shape ", p.spec.hf.str(), " (or padded ", p.spec.full.str(), "), got ",
              full_host.shape().str());
  VLM_ASSERT(full_host.is_cpu() && full_host.dtype() == DType::F32, "local_slice needs host f32");
  const float* src = full_host.ptr<float>();
  const int64_t src_rows = full_host.shape()[0];
  const int64_t cols = p.spec.full.ndim() >= 2 ? p.spec.full.numel() / p.spec.full[0] : 1;
  std::vector<float> out(size_t(p.local.numel()), 0.f);
  const int64_t lrows = p.local[0];
  const int64_t lcols = p.local.ndim() >= 2 ? p.local.numel() / lrows : 1;
  const int64_t row0 = p.spec.split_dim == 0 ? p.offset : 0;
  const int64_t col0 = p.spec.split_dim == 1 ? p.offset : 0;
  VLM_ASSERT(p.spec.split_dim <= 1 && (p.spec.split_dim != 1 || p.local.ndim() == 2), p.spec.name);
  for (int64_t r = 0; r < lrows; ++r) {
    const int64_t gr = row0 + r;
    if (gr >= src_rows) continue;  // padded rows
    std::memcpy(&out[size_t(r * lcols)], src + gr * cols + col0, size_t(lcols) * sizeof(float));
  }
  return Tensor::from_vector(out, p.local);
}

void ParamTable::set_full(const std::string& name, const Tensor& full_host) {
  VLM_ASSERT(allocated(), "set_full before allocate");
  const Param& p = get(name);
  const Tensor local = local_slice(p, full_host);
  if (dtype_ == DType::F32) {
    copy_tensor(p.value, local);
  } else {
    const std::vector<float> v = to_vector_f32(local);
    copy_tensor(p.value, Tensor::from_vector(std::vector<double>(v.begin(), v.end()), p.local));
  }
}

void ParamTable::finalize_tp_grads(Stream& s, Communicator& tp, int64_t begin, int64_t end) {
  VLM_ASSERT(tp.size() == tp_, "finalize_tp_grads over a group of ", tp.size(), " for a table split ", tp_, " ways");
  if (tp_ == 1) return;
  for (const Param& p : params_) {
    if (!p.spec.tp_partial_grad || !p.grad.defined()) continue;
    const int64_t at = grad_offset(p);
    if (at >= begin && at < end) copy_to_region_backward(s, tp, p.grad, p.grad);
  }
}

int64_t ParamTable::grad_offset(const Param& p) const {
  VLM_ASSERT(p.grad.defined(), "grad_offset of ", p.spec.name, " without gradients");
  const auto* base = static_cast<const char*>(grads_.storage().data());
  return int64_t((static_cast<const char*>(p.grad.data()) - base) / std::ptrdiff_t(dtype_size(dtype_)));
}

}  // namespace vlm
