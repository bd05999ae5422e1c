// ParamTable: local slices of the parameter table and their storage (see param_table.h).
#include "nn/param_table.h"

#include <algorithm>
#include <cstring>

#include "base/memory_check.h"
#include "core/ops.h"
#include "core/out_of_memory.h"
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

ParamTable::ParamTable(std::vector<ParamSpec> specs, int tp, int tp_rank, DType dtype, bool layer_units)
    : tp_(tp), tp_rank_(tp_rank), dtype_(dtype), layer_units_(layer_units) {
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
    params_.push_back(std::move(p));
  }
}

void ParamTable::add_bf16_working_copy() {
  VLM_ASSERT(!allocated() && !has_work_, "add_bf16_working_copy: once, before allocate");
  VLM_ASSERT(dtype_ == DType::F32, "bf16 working copy of a ", dtype_name(dtype_), " table");
  has_work_ = true;
}

namespace {
bool has_copy(bool work, const Param& p) { return work && p.local.ndim() >= 2; }
Tensor zeros_or_none(Backend& b, int64_t n, DType dt) { return n > 0 ? Tensor::zeros(b, Shape{n}, dt) : Tensor{}; }
// Bytes of a run's compute copy (bf16 or f32), its place in a unit's pool slot.
int64_t compute_bytes(const ShardRun& r) { return r.size() * (r.bf16 ? 2 : 4); }
}  // namespace

void ParamTable::allocate(Backend& b, bool grads, DpSharding dp) {
  VLM_ASSERT(!allocated_, "parameter table allocated twice");
  std::vector<ParamLayoutEntry> entries;
  for (const Param& p : params_)
    entries.push_back({p.local.numel(), p.spec.layer, has_copy(has_work_, p) && !p.spec.f32_reads});
  layout_ = ParamLayout(entries, ParamLayoutOptions{layer_units_, dp});
  const int stage = layout_.stage();
  VLM_ASSERT(stage == 0 || dtype_ == DType::F32, "ZeRO sharding of a ", dtype_name(dtype_), " table");
  backend_ = &b, grads_on_ = grads;
  const std::vector<ShardRun>& runs = layout_.runs();
  const size_t R = runs.size();
  // Which storage holds each run (param_table.h, nn/param_layout.h), and where.
  std::vector<int64_t> at_v(R, -1), at_w(R, -1), at_g(R, -1), at_s(R, -1);
  std::vector<bool> copies(R, false), shard_bf16(R, false);
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    p.at = layout_.offset(i);
    p.run = 0;  // the run holding its first element (an empty parameter: the run it ends)
    while (size_t(p.run) + 1 < R && runs[size_t(p.run)].end <= p.at && runs[size_t(p.run) + 1].begin <= p.at) ++p.run;
    if (has_copy(has_work_, p)) copies[size_t(p.run)] = true;
  }
  int64_t nv = 0, nw = 0, ng = 0, sf = 0, sb = 0;
  for (size_t k = 0; k < R; ++k) {
    const ShardRun& r = runs[k];
    const bool pooled3 = stage >= 3 && r.pooled;
    const bool values = stage == 0 || (!r.bf16 && !pooled3);
    if (values) at_v[k] = nv, nv += r.size();
    if (copies[k] && !pooled3) at_w[k] = nw, nw += r.size();
    if (grads && !(stage >= 2 && r.pooled)) at_g[k] = ng, ng += r.size();
    if (!values && (grads || pooled3)) {  // masters (f32), or a frozen pooled run's compute values
      shard_bf16[k] = !grads && r.bf16;
      int64_t& n = shard_bf16[k] ? sb : sf;
      at_s[k] = n, n += r.owned();
    }
    VLM_ASSERT(!pooled3 || !copies[k] || r.bf16, "a derived bf16 copy in a pooled unit");
  }
  // The pools' slot sizes, then every storage checked before any is allocated.
  for (int u : layout_.pooled_units()) {
    const auto [b0, b1] = layout_.unit_range(u);
    grad_slot_ = std::max(grad_slot_, b1 - b0);
    int64_t bytes = 0;
    const auto [r0, r1] = layout_.group_runs(layout_.unit_group(u));
    for (int k = r0; k < r1; ++k) bytes += compute_bytes(runs[size_t(k)]);
    slot_bytes_ = std::max(slot_bytes_, bytes);
  }
  const bool pool = stage >= 3, grad_pool = stage >= 2 && grads;
  // Host memory: sizes come from configs and files, so too much is the user's problem.
  const size_t total = size_t(nv + ng) * dtype_size(dtype_) + size_t(nw + sb) * 2 + size_t(sf) * 4 +
                       (pool ? 2 * size_t(slot_bytes_) : 0) + (grad_pool ? 8 * size_t(grad_slot_) : 0);
  // The table's storage is one planned arena (core/out_of_memory.h): a failure names it.
  if (!params_.empty()) {
    const std::string label =
        cat("arena 'params' (", params_.size(), " tensors, first '", params_[0].spec.name, "')");
    if (b.device() == DeviceKind::CPU && b.commits_memory()) {
      const uint64_t avail = allocatable_bytes();
      if (total > avail)
        throw OutOfMemory(b.device(), total, label, cat("more than the ", format_bytes(double(avail)), " of memory available"));
    }
    if (arena_fault_due()) throw OutOfMemory(b.device(), total, label, "injected: VLM_FAULT_ARENA_ALLOC");
    try {
      values_ = zeros_or_none(b, nv, dtype_), works_ = zeros_or_none(b, nw, DType::BF16);
      grads_ = zeros_or_none(b, ng, dtype_);
      shard_f32_ = zeros_or_none(b, sf, DType::F32), shard_bf16_ = zeros_or_none(b, sb, DType::BF16);
      // The pools: two slots, each the largest pooled unit's (its runs at their flat offsets).
      if (pool) pool_ = zeros_or_none(b, 2 * slot_bytes_, DType::U8);
      if (grad_pool) grad_pool_ = zeros_or_none(b, 2 * grad_slot_, DType::F32);
    } catch (const OutOfMemory& e) {  // the backend's account, with the table's name
      throw OutOfMemory(e.device(), total, label, e.detail());
    }
  }
  runs_.assign(R, RunStorage{});
  for (size_t k = 0; k < R; ++k) {
    const ShardRun& r = runs[k];
    RunStorage& st = runs_[k];
    const Shape n{r.size()};
    if (at_v[k] >= 0) st.values = values_.sub(at_v[k], n);
    if (at_w[k] >= 0) st.work = works_.sub(at_w[k], n);
    if (stage >= 3 && r.pooled)
      st.compute = pool_view(int(k));
    else
      st.compute = r.bf16 ? st.work : st.values;
    if (at_g[k] >= 0) {
      st.grad = grads_.sub(at_g[k], n);
    } else if (grads) {
      const int64_t u0 = layout_.unit_range(r.unit).first;
      st.grad = grad_pool_.sub(layout_.slot_of(r.unit) * grad_slot_ + (r.begin - u0), n);
    }
    if (at_s[k] >= 0) st.shard = (shard_bf16[k] ? shard_bf16_ : shard_f32_).sub(at_s[k], Shape{r.owned()});
  }
  for (Param& p : params_) {
    const ShardRun& r = runs[size_t(p.run)];
    const RunStorage& st = runs_[size_t(p.run)];
    const int64_t rel = p.at - r.begin;
    const bool pooled3 = stage >= 3 && r.pooled;
    p.value = st.values.defined() ? st.values.sub(rel, p.local)
                                  : (pooled3 && !r.bf16 ? st.compute.sub(rel, p.local) : Tensor{});
    p.work = Tensor{};
    if (has_copy(has_work_, p))
      p.work = at_w[size_t(p.run)] >= 0 ? works_.sub(at_w[size_t(p.run)] + rel, p.local)
                                        : (pooled3 ? st.compute.sub(rel, p.local) : Tensor{});
    p.grad = st.grad.defined() ? st.grad.sub(rel, p.local) : Tensor{};
  }
  allocated_ = true;
}

Tensor ParamTable::pool_view(int k) const {
  const ShardRun& r = layout_.runs()[size_t(k)];
  const auto [r0, r1] = layout_.group_runs(layout_.unit_group(r.unit));
  int64_t byte = layout_.slot_of(r.unit) * slot_bytes_;
  for (int j = r0; j < k; ++j) byte += compute_bytes(layout_.runs()[size_t(j)]);
  const DType dt = r.bf16 ? DType::BF16 : DType::F32;
  return pool_.sub(byte, Shape{r.size() * int64_t(dtype_size(dt))}).reinterpret(dt, Shape{r.size()});
}

Tensor ParamTable::owned_view(int k, int64_t b, int64_t e, int64_t shard_at) const {
  const ShardRun& r = layout_.runs()[size_t(k)];
  const RunStorage& st = runs_[size_t(k)];
  if (st.shard.defined()) return st.shard.sub(shard_at - r.shard_at, Shape{e - b});
  return (st.values.defined() ? st.values : st.compute).sub(b - r.begin, Shape{e - b});  // resident: every element
}

void ParamTable::write(const Param& p, const Tensor& local) {
  VLM_ASSERT(allocated(), "write before allocate");
  VLM_ASSERT(local.is_cpu() && local.dtype() == DType::F32 && local.shape() == p.local, p.spec.name,
             ": write of ", local.str(), ", expected host f32 ", p.local.str());
  const RunStorage& st = runs_[size_t(p.run)];
  if (st.values.defined()) {
    if (dtype_ == DType::F32) return copy_tensor(p.value, local);
    const std::vector<float> v = to_vector_f32(local);
    return copy_tensor(p.value, Tensor::from_vector(std::vector<double>(v.begin(), v.end()), p.local));
  }
  // No resident f32 values: the resident bf16 copy (zero 1, 2) and this rank's owned elements.
  Stream& s = backend_->default_stream();
  const ShardRun& r = layout_.runs()[size_t(p.run)];
  const bool pooled3 = layout_.stage() >= 3 && r.pooled;
  if (p.work.defined() && !pooled3) convert(s, p.work, to_backend(*backend_, local));
  if (!st.shard.defined()) return s.synchronize();
  const std::vector<float> v = to_vector_f32(local);
  for (const ParamLayout::Piece& c : layout_.owned_pieces(index_.at(p.spec.name))) {
    const int64_t n = c.end - c.begin;
    const Tensor src = Tensor::from_vector(std::vector<float>(v.begin() + (c.begin - p.at), v.begin() + (c.end - p.at)),
                                           Shape{n});
    const Tensor dst = st.shard.sub(c.shard_at - r.shard_at, Shape{n});
    if (dst.dtype() == DType::F32)
      copy_tensor(dst, src);
    else
      convert(s, dst, to_backend(*backend_, src));
  }
  s.synchronize();
}

size_t ParamTable::bf16_copy_bytes() const {
  size_t n = 0;
  for (const Param& p : params_)
    if (p.local.ndim() >= 2) n += size_t(p.local.numel()) * dtype_size(DType::BF16);
  return n;
}

void ParamTable::refresh_working(Stream& s) {
  for (const RunStorage& st : runs_)
    if (st.work.defined() && st.values.defined()) convert(s, st.work, st.values);
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

namespace {
size_t bytes_of(const Tensor& t) { return t.defined() ? t.nbytes() : 0; }
}  // namespace

size_t ParamTable::value_bytes() const { return bytes_of(values_) + bytes_of(shard_f32_); }
size_t ParamTable::working_bytes() const { return bytes_of(works_) + bytes_of(shard_bf16_); }
size_t ParamTable::grad_bytes() const { return bytes_of(grads_) + bytes_of(grad_pool_); }

void ParamTable::zero_grads() {
  for (const Tensor* t : {&grads_, &grad_pool_})
    if (t->defined()) backend_->memset_zero(t->data(), t->nbytes());
}

void ParamTable::zero_unit_grads(Stream& s, int u) {
  if (!grad_pool_.defined() || !layout_.pooled(u)) return;
  const auto [b0, b1] = layout_.unit_range(u);
  fill(s, grad_pool_.sub(layout_.slot_of(u) * grad_slot_, Shape{b1 - b0}), 0.f);
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
  write(p, local_slice(p, full_host));
}

void ParamTable::finalize_tp_grads(Stream& s, Communicator& tp, int64_t begin, int64_t end) {
  VLM_ASSERT(tp.size() == tp_, "finalize_tp_grads over a group of ", tp.size(), " for a table split ", tp_, " ways");
  if (tp_ == 1) return;
  for (const Param& p : params_) {
    if (!p.spec.tp_partial_grad || !p.grad.defined()) continue;
    if (p.at >= begin && p.at < end) copy_to_region_backward(s, tp, p.grad, p.grad);
  }
}

}  // namespace vlm
