// AdamW, gradient norm and learning-rate schedule (optim/optimizer.h).
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

const char* schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::Cosine: return "cosine";
    case LrSchedule::Linear: return "linear";
    case LrSchedule::Constant: return "constant";
  }
  return "?";
}

double lr_at(const OptimOptions& o, int64_t step, int64_t total) {
  if (o.warmup > 0 && step <= o.warmup) return o.lr * double(step) / double(o.warmup);
  if (o.schedule == LrSchedule::Constant || total <= o.warmup) return o.lr;
  const double t = std::min(1.0, double(step - o.warmup) / double(std::max<int64_t>(1, total - o.warmup)));
  const double lo = o.lr * o.min_lr_ratio;
  const double f = o.schedule == LrSchedule::Cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * t)) : 1.0 - t;
  return lo + (o.lr - lo) * f;
}

bool decays(const ParamSpec& p) { return p.full.ndim() >= 2 && !p.no_decay; }

AdamW::AdamW(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, DpGrads& dp,
             Backend& backend, const OptimOptions& o)
    : opt_(o), dp_(dp) {
  VLM_ASSERT(modules.size() == trainable.size(), "one trainable flag per module");
  const bool zero = dp.zero() > 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!trainable[i]) continue;
    modules_.push_back(i);
    const ParamTable& t = *modules[i].table;
    const ParamLayout& L = t.layout();
    const int64_t len = std::max<int64_t>(1, L.owned());
    Tensor m = Tensor::zeros(backend, Shape{len}), v = Tensor::zeros(backend, Shape{len});
    state_bytes_ += 2 * m.nbytes();
    const Tensor& grads = dp.grad_shard(i);
    // Each owned piece of a parameter is one slot: its masters (the resident values, or
    // the table's shard) and its reduced gradients and moments in the shard buffers.
    for (size_t j = 0; j < t.params().size(); ++j) {
      const Param& p = t.params()[j];
      const bool split = modules[i].tp_split && p.spec.split_dim >= 0, decay = decays(p.spec);
      for (const ParamLayout::Piece& c : L.owned_pieces(j)) {
        const ShardRun& r = L.runs()[size_t(c.run)];
        const RunStorage& st = t.run(c.run);
        const Shape n{c.end - c.begin};
        const Tensor value = st.values.defined() ? st.values.sub(c.begin - r.begin, n) : st.shard.sub(c.shard_at - r.shard_at, n);
        // A run with resident values and bf16 copies: the update writes the copy in the
        // same pass (ParamTable::refresh_working's values, without reading them again).
        const bool copy = st.values.defined() && st.work.defined();
        slots_.push_back({value, grads.sub(c.shard_at, n), m.sub(c.shard_at, n), v.sub(c.shard_at, n),
                          copy ? st.work.sub(c.begin - r.begin, n) : Tensor{}, split, decay, zero && c.tail});
      }
    }
    state_.push_back(m), state_.push_back(v);
  }
  sums_ = Tensor::zeros(backend, Shape{2});
}

Tensor AdamW::moment(size_t i, int k) const {
  for (size_t j = 0; j < modules_.size(); ++j)
    if (modules_[j] == i) return state_[2 * j + size_t(k)];
  return Tensor{};
}

double AdamW::grad_norm(Stream& s, Communicator& tp) {
  fill(s, sums_, 0.f);
  const Tensor split = sums_.slice(0, 1), repl = sums_.slice(1, 2);
  const bool first_dp = dp_.dp().rank() == 0;
  for (const Slot& x : slots_)
    if (!x.dp_replicated || first_dp) sum_squares(s, x.split ? split : repl, x.grad);
  if (dp_.zero() > 0) dp_.dp().all_reduce(s, sums_);
  tp.all_reduce(s, split);
  s.synchronize();
  const std::vector<double> v = to_vector_f64(sums_);
  return std::sqrt(v[0] + v[1]);
}

void AdamW::step(Stream& s, int64_t step, double lr, float grad_scale) {
  AdamWOpts o;
  o.lr = float(lr), o.beta1 = opt_.beta1, o.beta2 = opt_.beta2, o.eps = opt_.eps;
  o.grad_scale = grad_scale, o.step = int(step);
  for (const Slot& x : slots_) {
    o.weight_decay = x.decay ? opt_.weight_decay : 0.f;
    adamw_step(s, x.value, x.grad, x.m, x.v, x.copy, o);
  }
  for (size_t i : modules_) dp_.gather_values(s, i);
}

}  // namespace vlm
