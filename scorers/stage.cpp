// RelevanceStage (scorers/stage.h): the query, the balancer, the allocation and the
// tokens; the scoring is the placement's (scorers/placement/placement.h).
#include "scorers/stage.h"

#include "core/ops.h"
#include "scorers/scratch.h"

namespace vlm {

namespace {

constexpr float kQueryNormEps = 1e-6f;  // scorers.query_norm (stage.h)

// The widths the options set (scorers.hidden, scorers.k) replace those of `dims`.
ScorerDims with_options(ScorerDims d, const ScorerOptions& o) {
  d.hidden = o.scorers.hidden, d.k = o.scorers.k;
  return d;
}

}  // namespace

RelevanceStage::RelevanceStage(const ScorerOptions& opts, const ScorerDims& dims_in, Communicator& tp, Communicator* pair)
    : opts_(opts), dims_(with_options(dims_in, opts)), placement_(make_placement(opts.scorers.placement, tp.size())),
      alloc_(opts.lod, dims_in.G), balancer_(dims_), lod_(dims_, opts.lod.region, opts.lod.gate, opts.lod.gate_full_detail) {
  opts.validate(dims_.G, tp.size());
  placement_->attach(tp, pair);
  for (int k = 0; k < kNumScorers; ++k) scorers_.push_back(make_scorer(ScorerKind(k), dims_, placement_->scorer_group()));
}

StageTensors RelevanceStage::io() { return {dims_, scorers_, tex_, q_, F_, S_, dS_, dF_, dq_}; }

std::vector<ParamSpec> RelevanceStage::param_specs() const {
  std::vector<ParamSpec> v;
  for (int k = 0; k < kNumScorers; ++k)
    for (ParamSpec& p : scorers_[size_t(k)]->param_specs()) v.push_back(std::move(p));
  v.push_back(param_spec("scorers.default_query", Shape{dims_.dq}, -1, InitKind::Normal, 0.02f));
  for (ParamSpec& p : balancer_param_specs(dims_)) v.push_back(std::move(p));
  for (ParamSpec& p : lod_param_specs(dims_, opts_.lod.levels())) v.push_back(std::move(p));
  return v;
}

void RelevanceStage::bind(const ParamTable& t) {
  for (auto& s : scorers_) s->bind(t);
  balancer_.bind(t);
  lod_.bind(t);
  const Param& q0 = t.get("scorers.default_query");
  q0_ = q0.value, dq0_ = q0.grad;
  if (opts_.scorers.query_norm) {
    qgain_ = upload_values(backend_for(q0_.device()), std::vector<double>(size_t(dims_.dq), 1.0), Shape{dims_.dq},
                           q0_.dtype());
  }
}

void RelevanceStage::reserve(int64_t max_images) {
  VLM_ASSERT(q0_.defined(), "RelevanceStage::reserve before bind");
  const int64_t T = max_images * opts_.lod.max_tokens;
  const size_t e = dtype_size(q0_.dtype());
  tokens_.reserve(q0_.device(), size_t(T * dims_.d) * e);
  r_host_.reserve(DeviceKind::CPU, size_t(max_images * dims_.cells()) * e);
  r_f64_.reserve(size_t(max_images * dims_.cells()));
  lod_.reserve(T);
}

int64_t RelevanceStage::scorer_param_count() const {
  int64_t n = 0;
  for (const auto& s : scorers_)
    for (const Param* p : s->params()) n += p->spec.full.numel();
  return n;
}

void RelevanceStage::forward(Stream& st, ImageEncoder& enc, const Tensor& tex, const Tensor& query,
                             const std::vector<bool>& has_prompt, uint64_t seed) {
  forward_prepare(st, enc, tex, query, has_prompt, seed);
  for (int k = 0; k < kNumScorers; ++k) forward_scorer(st, k);
  forward_finish(st);
}

void RelevanceStage::forward_prepare(Stream& st, ImageEncoder& enc, const Tensor& tex, const Tensor& query,
                                     const std::vector<bool>& has_prompt, uint64_t seed) {
  const int64_t B = tex.size(0), N = dims_.cells(), d = dims_.d;
  const DType dt = q0_.dtype();
  const DeviceKind dev = q0_.device();
  require_shape(tex, Shape{B, kTextureChannels, N}, "texture");
  require_shape(query, Shape{B, dims_.dq}, "query");
  VLM_ASSERT(int64_t(has_prompt.size()) == B, "has_prompt: one flag per image");
  tex_ = tex, has_prompt_ = has_prompt, seed_ = seed;
  scratch(q_, dev, Shape{B, dims_.dq}, dt);
  const bool norm = opts_.scorers.query_norm;
  const Tensor& rows = norm ? scratch(qin_, dev, Shape{B, dims_.dq}, dt) : q_;
  for (int64_t b = 0; b < B; ++b) copy(st, rows.slice(b, b + 1), has_prompt[size_t(b)] ? query.slice(b, b + 1) : q0_);
  if (norm) rmsnorm_forward(st, q_, scratch(qrstd_, dev, Shape{B}, qgain_.dtype()), qin_, qgain_, kQueryNormEps);
  scratch(F_, dev, Shape{B, N, d}, dt);
  scratch(S_, dev, Shape{B, kNumScorers, N}, dt);
  scratch(r_, dev, Shape{B, N}, dt);
  placement_->forward_prepare(st, io(), enc);
}

void RelevanceStage::forward_scorer(Stream& st, int k) {
  placement_->forward_scorer(st, io(), k);
}

void RelevanceStage::forward_finish(Stream& st) {
  const int64_t B = S_.size(0), N = dims_.cells(), d = dims_.d;
  placement_->forward_finish(st, io());
  balancer_.forward(st, r_, S_, q_);
  // The forward's one host read (stage.h): r decides how many tokens each image gets.
  const Tensor& rh = scratch(r_host_, DeviceKind::CPU, r_.shape(), r_.dtype());
  copy_to_host(st, rh, r_);
  r_f64_.resize(size_t(B * N));
  for (int64_t i = 0; i < B * N; ++i)
    r_f64_[size_t(i)] = rh.dtype() == DType::F64 ? rh.ptr<double>()[i] : double(rh.ptr<float>()[i]);
  lods_.clear();
  for (int64_t b = 0; b < B; ++b)
    lods_.push_back(alloc_.allocate(r_f64_.data() + b * N, seed_ * 0x9E3779B97F4A7C15ull + uint64_t(b), lod_step_));
  scratch(tokens_, r_.device(), Shape{LodTokens::total_tokens(lods_), d}, r_.dtype());
  lod_.forward(st, tokens_, cu_, lods_, F_);
}

void RelevanceStage::backward(Stream& st, ImageEncoder& enc, const Tensor& dquery, const Tensor& dtokens) {
  const int64_t B = S_.size(0), N = dims_.cells(), d = dims_.d;
  const DType dt = q0_.dtype();
  const DeviceKind dev = q0_.device();
  require_shape(dquery, Shape{B, dims_.dq}, "dquery");
  scratch(dF_, dev, Shape{B, N, d}, dt);
  scratch(dr_, dev, Shape{B, N}, dt);
  scratch(dS_, dev, Shape{B, kNumScorers, N}, dt);
  scratch(dq_, dev, Shape{B, dims_.dq}, dt);
  fill(st, dF_, 0.f);
  fill(st, dr_, 0.f);
  fill(st, dq_, 0.f);
  lod_.backward(st, dF_, dr_, dtokens);
  balancer_.backward(st, dS_, dq_, dr_);
  placement_->backward(st, io(), enc);
  // The gradient of the rows before the norm (scorers.query_norm), else dq itself.
  const Tensor& drows = opts_.scorers.query_norm ? scratch(dqin_, dev, Shape{B, dims_.dq}, dt) : dq_;
  if (opts_.scorers.query_norm) rmsnorm_backward(st, dqin_, Tensor{}, dq_, qin_, qgain_, qrstd_);
  for (int64_t b = 0; b < B; ++b) {
    if (has_prompt_[size_t(b)]) {
      copy(st, dquery.slice(b, b + 1), drows.slice(b, b + 1));
    } else {
      if (dq0_.defined()) accumulate(st, dq0_, drows.slice(b, b + 1).view(dq0_.shape()), 1.f);
      fill(st, dquery.slice(b, b + 1), 0.f);
    }
  }
}

void RelevanceStage::finalize_grads(Stream& st) { placement_->finalize_grads(st, scorers_); }

}  // namespace vlm
