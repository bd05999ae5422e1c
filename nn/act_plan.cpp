// ActPlan: declare, allocate once, cut per micro-batch; see act_plan.h.
#include "nn/act_plan.h"

#include "base/error.h"

namespace vlm {

namespace {

constexpr size_t kAlign = 256;

Shape with_rows(int64_t rows, const Shape& inner) {
  std::vector<int64_t> d{rows};
  for (int i = 0; i < inner.ndim(); ++i) d.push_back(inner[i]);
  return Shape(d);
}

}  // namespace

bool ActPlan::bound(const Tensor* field) const {
  for (const Binding& b : bindings_)
    if (b.field == field) return true;
  return false;
}

void ActPlan::declare(Tensor* field, Rows rows, Shape inner, int64_t per_token, bool stat) {
  VLM_ASSERT(!allocated(), "ActPlan::add after allocate");
  VLM_ASSERT(field && per_token >= 1 && inner.ndim() < Shape::kMaxDims, "ActPlan::add: bad declaration");
  VLM_ASSERT(!bound(field), "ActPlan::add: a field declared twice");
  bindings_.push_back({field, buffers_.size()});
  buffers_.push_back({rows, per_token, inner, stat, Tensor{}});
}

void ActPlan::add(Tensor* field, Rows rows, Shape inner, int64_t per_token) {
  declare(field, rows, inner, per_token, false);
}

void ActPlan::add_f32(Tensor* field, Rows rows, Shape inner, int64_t per_token) {
  declare(field, rows, inner, per_token, true);
}

int64_t ActPlan::rows_of(const Buffer& buf, int64_t T, int64_t Ts) const {
  switch (buf.rows) {
    case Rows::T: return buf.per_token * T;
    case Rows::Ts: return buf.per_token * Ts;
    case Rows::Fixed: return buf.per_token;
  }
  return 0;
}

void ActPlan::alias(Tensor* field, const Tensor* source) {
  VLM_ASSERT(!allocated(), "ActPlan::alias after allocate");
  VLM_ASSERT(field && !bound(field), "ActPlan::alias: a field declared twice");
  for (const Binding& b : bindings_)
    if (b.field == source) {
      bindings_.push_back({field, b.buffer});
      return;
    }
  VLM_ASSERT(false, "ActPlan::alias: the source field was not declared");
}

void ActPlan::allocate(Backend& b, int64_t max_T, int64_t max_Ts, DType act) {
  VLM_ASSERT(!allocated(), "ActPlan allocated twice");
  VLM_ASSERT(max_T > 0 && max_Ts > 0 && max_Ts <= max_T, "ActPlan: max tokens T=", max_T, " Ts=", max_Ts);
  VLM_ASSERT(act == DType::F32 || act == DType::BF16 || act == DType::F64, "ActPlan: activations of dtype ",
             dtype_name(act));
  max_T_ = max_T;
  max_Ts_ = max_Ts;
  act_ = act;
  const DType stat = act == DType::BF16 ? DType::F32 : act;
  std::vector<size_t> offsets;
  bytes_ = 0;
  for (const Buffer& buf : buffers_) {
    bytes_ = (bytes_ + kAlign - 1) / kAlign * kAlign;
    offsets.push_back(bytes_);
    bytes_ += size_t(rows_of(buf, max_T, max_Ts) * buf.inner.numel()) * dtype_size(buf.stat ? stat : act);
  }
  storage_ = Tensor::zeros(b, Shape{int64_t(bytes_)}, DType::U8);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    Buffer& buf = buffers_[i];
    const DType dt = buf.stat ? stat : act;
    const Shape shape = with_rows(rows_of(buf, max_T, max_Ts), buf.inner);
    const int64_t nbytes = shape.numel() * int64_t(dtype_size(dt));
    buf.full = storage_.sub(int64_t(offsets[i]), Shape{nbytes}).reinterpret(dt, shape);
  }
  for (const Binding& bd : bindings_) *bd.field = buffers_[bd.buffer].full;
  T_ = max_T;
  Ts_ = max_Ts;
}

void ActPlan::cut(int64_t T, int64_t Ts) {
  VLM_ASSERT(allocated(), "ActPlan::cut before allocate");
  VLM_ASSERT(T > 0 && T <= max_T_ && Ts > 0 && Ts <= max_Ts_, "ActPlan::cut to T=", T, " Ts=", Ts,
             ", planned for T=", max_T_, " Ts=", max_Ts_);
  if (T == T_ && Ts == Ts_) return;
  for (const Binding& bd : bindings_) {
    const Buffer& buf = buffers_[bd.buffer];
    if (buf.rows != Rows::Fixed) *bd.field = buf.full.slice(0, rows_of(buf, T, Ts));
  }
  T_ = T;
  Ts_ = Ts;
}

}  // namespace vlm
