// TransformerStack: parameters, activation plan, forward and backward; see stack.h.
#include "nn/stack.h"

#include <utility>

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

void plan_norm_acts(ActPlan& p, const BlockConfig& cfg, int tp, Tensor* out, Tensor* mean, Tensor* rstd,
                    Tensor* x_full) {
  using R = ActPlan::Rows;
  p.add(out, R::Ts, {cfg.C});
  if (cfg.norm == NormKind::LayerNorm) p.add_f32(mean, R::Ts);
  p.add_f32(rstd, R::Ts);
  if (cfg.seq_parallel(tp))
    p.add(x_full, R::T, {cfg.C});
  else
    p.alias(x_full, out);
}

TransformerStack::TransformerStack(const BlockConfig& cfg, int n_layers, int tp, BlockParamNames names)
    : cfg_(cfg), n_layers_(n_layers), tp_(tp), local_(cfg.local(tp)), names_(std::move(names)) {
  VLM_ASSERT(n_layers > 0 && names_, "transformer stack: ", n_layers, " layers, naming function given: ", bool(names_));
  h_.resize(size_t(n_layers) + 1);
  saved_.resize(cfg.recompute == Recompute::Full ? 1 : size_t(n_layers));
  core_.resize(cfg.recompute == Recompute::None ? size_t(n_layers) : 1);
}

std::vector<ParamSpec> stack_param_specs(const BlockConfig& cfg, int n_layers, int tp, float init_std,
                                         const BlockParamNames& names) {
  std::vector<ParamSpec> v;
  for (int l = 0; l < n_layers; ++l)
    for (ParamSpec& s : block_param_specs(cfg, tp, l, n_layers, init_std, names)) v.push_back(std::move(s));
  return v;
}

std::vector<ParamSpec> TransformerStack::param_specs(float init_std) const {
  return stack_param_specs(cfg_, n_layers_, tp_, init_std, names_);
}

void TransformerStack::bind(const ParamTable& t) {
  VLM_ASSERT(t.allocated() && t.tp() == tp_, "transformer stack: bind to a table split ", t.tp(), " ways, need ",
             tp_);
  blocks_.clear();
  for (int l = 0; l < n_layers_; ++l) blocks_.push_back(Block::bind(cfg_, t, l, names_));
}

void TransformerStack::reserve_scratch(Backend& b, int64_t max_T) const {
  VLM_ASSERT(planned_ && !saved_.empty() && saved_[0].attn.q.defined(), "reserve_scratch before the plan is allocated");
  b.reserve_scratch(attention_scratch_bytes(b.device(), saved_[0].attn.q.dtype(), max_T, local_.NHl, local_.NKVl,
                                            cfg_.head_dim));
}

void TransformerStack::plan(ActPlan& p) {
  VLM_ASSERT(!planned_, "transformer stack planned twice");
  planned_ = true;
  using R = ActPlan::Rows;
  const int64_t C = cfg_.C, HS = cfg_.head_dim, NHl = local_.NHl, NKVl = local_.NKVl, Fl = local_.Fl;
  const bool sp = cfg_.seq_parallel(tp_), swiglu = cfg_.mlp == MlpKind::SwiGLU;
  auto norm = [&](Tensor* out, Tensor* mean, Tensor* rstd, Tensor* x_full) {
    plan_norm_acts(p, cfg_, tp_, out, mean, rstd, x_full);
  };
  Scratch& s = sc_;
  for (Tensor& h : h_) p.add(&h, R::Ts, {C});
  if (swiglu) p.add(&s.act, R::T, {Fl});  // every layer's MLP act (activations.h)
  for (BlockActs& a : saved_) {
    norm(&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.attn.x_full);
    p.add(&a.attn.q, R::T, {NHl, HS});
    p.add(&a.attn.k, R::T, {NKVl, HS});
    p.add(&a.attn.v, R::T, {NKVl, HS});
    p.add(&a.h_mid, R::Ts, {C});
    norm(&a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.mlp.x_full);
    p.add(&a.mlp.h1, R::T, {Fl});
    if (swiglu) {
      p.add(&a.mlp.h2, R::T, {Fl});
      p.alias(&a.mlp.act, &s.act);
    } else {
      p.add(&a.mlp.act, R::T, {Fl});
    }
  }
  for (AttentionCore& c : core_) {
    p.add(&c.att, R::T, {NHl, HS});
    p.add_f32(&c.lse, R::T, {NHl});
  }
  p.add(&s.partial, R::T, {C});
  p.add(&s.dfull_b, R::T, {C});
  if (sp) {
    p.add(&s.y, R::Ts, {C});
    p.add(&s.dfull_a, R::T, {C});
    p.add(&s.dnorm, R::Ts, {C});
  } else {
    p.alias(&s.y, &s.partial);
    p.alias(&s.dnorm, &s.dfull_b);
  }
  p.add(&s.dq, R::T, {NHl, HS});
  p.add(&s.datt, R::T, {NHl, HS});
  p.add(&s.dk, R::T, {NKVl, HS});
  p.add(&s.dv, R::T, {NKVl, HS});
  p.add(&s.dh1, R::T, {Fl});
  if (swiglu) p.add(&s.dh2, R::T, {Fl});
  p.add(&s.dact, R::T, {Fl});
}

void TransformerStack::check_context(const TpContext& ctx) const {
  VLM_ASSERT(planned_ && int(blocks_.size()) == n_layers_, "transformer stack run before bind/plan");
  VLM_ASSERT(ctx.tp_size() == tp_ && ctx.seq_parallel() == cfg_.seq_parallel(tp_), "transformer stack built for tp=",
             tp_, " sp=", cfg_.seq_parallel(tp_), ", run with tp=", ctx.tp_size(), " sp=", ctx.seq_parallel());
}

void TransformerStack::forward(TpContext& ctx, const PackedSeqs& seq, const KvCache* cache,
                               const Tensor& slots) const {
  check_context(ctx);
  for (int l = 0; l < n_layers_; ++l) {
    if (fetch_) fetch_(ctx.stream, l, l + 1 < n_layers_ ? l + 1 : -1);
    forward_block(ctx, seq, l, 0, n_layers_);
    if (cache) {  // before the next block: under full recompute the next one reuses saved(l)
      scatter_rows(ctx.stream, cache->k(l), saved(l).attn.k, slots);
      scatter_rows(ctx.stream, cache->v(l), saved(l).attn.v, slots);
    }
  }
}

void TransformerStack::forward_layers(TpContext& ctx, const PackedSeqs& seq, int l0, int l1) const {
  check_context(ctx);
  VLM_ASSERT(0 <= l0 && l0 <= l1 && l1 <= n_layers_, "stack forward of layers [", l0, ", ", l1, ") of ", n_layers_);
  for (int l = l0; l < l1; ++l) {
    if (fetch_) fetch_(ctx.stream, l, l + 1 < l1 ? l + 1 : -1);
    forward_block(ctx, seq, l, l0, l1);
  }
}

void TransformerStack::forward_block(TpContext& ctx, const PackedSeqs& seq, int l, int l0, int l1) const {
  // Block l's last add computes block l+1's first norm (fused: block.h) inside a range
  // of layers run together, unless the layers' weights are fetched one at a time (block
  // l+1's are not there yet; a range's caller may gather the next range's weights while
  // this one runs, train/step.h): the unfused ops give the same values.
  const bool fuse = !fetch_, next = fuse && l + 1 < l1;
  blocks_[size_t(l)].forward(ctx, seq, h_[size_t(l)], h_[size_t(l) + 1], saved(l), core(l), sc_, fuse && l > l0,
                             next ? &blocks_[size_t(l) + 1] : nullptr, next ? &saved(l + 1) : nullptr);
}

void TransformerStack::fetch_layers(Stream& s) const {
  for (int l = 0; l < n_layers_ && fetch_; ++l) fetch_(s, l, l + 1 < n_layers_ ? l + 1 : -1);
}

void TransformerStack::plan_decode(ActPlan& p) {
  VLM_ASSERT(cfg_.causal && !decode_planned_, "transformer stack: decoding needs a causal stack, planned once");
  decode_planned_ = true;
  using R = ActPlan::Rows;
  const int64_t C = cfg_.C, HS = cfg_.head_dim, NHl = local_.NHl, NKVl = local_.NKVl, Fl = local_.Fl;
  const bool ln = cfg_.norm == NormKind::LayerNorm;
  DecodeActs& d = dec_;
  BlockActs& a = d.block;
  p.add(&d.h, R::T, {C});
  p.add(&a.ln1, R::T, {C});
  if (ln) p.add_f32(&a.ln1_mean, R::T);
  p.add_f32(&a.ln1_rstd, R::T);
  p.alias(&a.attn.x_full, &a.ln1);  // no SP: the regions' inputs are the norm outputs
  p.add(&a.attn.q, R::T, {NHl, HS});
  p.add(&a.attn.k, R::T, {NKVl, HS});
  p.add(&a.attn.v, R::T, {NKVl, HS});
  p.add(&a.h_mid, R::T, {C});
  p.add(&a.ln2, R::T, {C});
  if (ln) p.add_f32(&a.ln2_mean, R::T);
  p.add_f32(&a.ln2_rstd, R::T);
  p.alias(&a.mlp.x_full, &a.ln2);
  p.add(&a.mlp.h1, R::T, {Fl});
  if (cfg_.mlp == MlpKind::SwiGLU) p.add(&a.mlp.h2, R::T, {Fl});
  p.add(&a.mlp.act, R::T, {Fl});
  p.add(&d.att, R::T, {NHl, HS});
  p.add(&d.sc.partial, R::T, {C});
  p.alias(&d.sc.y, &d.sc.partial);
}

void TransformerStack::decode(TpContext& ctx, const DecodeRows& rows, const KvCache& cache) const {
  VLM_ASSERT(decode_planned_ && int(blocks_.size()) == n_layers_ && ctx.tp_size() == tp_ && !ctx.seq_parallel(),
             "transformer stack: decode before plan_decode/bind, or with sequence parallelism");
  VLM_ASSERT(dec_.h.defined() && dec_.h.size(0) == rows.n, "transformer stack: decode of ", rows.n,
             " rows, activations cut to ", dec_.h.defined() ? dec_.h.size(0) : 0);
  for (int l = 0; l < n_layers_; ++l) {
    if (fetch_) fetch_(ctx.stream, l, l + 1 < n_layers_ ? l + 1 : -1);
    blocks_[size_t(l)].decode(ctx, rows, dec_.h, dec_.block, dec_.att, dec_.sc, cache.k(l), cache.v(l));
  }
}

void TransformerStack::backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres) const {
  backward_layers(ctx, seq, dres, 0, n_layers_);
}

void TransformerStack::backward_layers(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres, int l0,
                                       int l1) const {
  check_context(ctx);
  VLM_ASSERT(0 <= l0 && l0 <= l1 && l1 <= n_layers_, "stack backward of layers [", l0, ", ", l1, ") of ", n_layers_);
  for (int l = l1 - 1; l >= l0; --l) {
    if (fetch_) fetch_(ctx.stream, l, l - 1 >= l0 ? l - 1 : -1);
    const Block& b = blocks_[size_t(l)];
    if (cfg_.recompute == Recompute::Full)
      b.forward(ctx, seq, h_[size_t(l)], h_[size_t(l) + 1], saved(l), core(l), sc_);
    else if (cfg_.recompute == Recompute::Selective)
      b.attn.core_forward(ctx.stream, seq, saved(l).attn, core(l));
    if (grads_) grads_(ctx.stream, l, false);
    b.backward(ctx, seq, dres, h_[size_t(l)], saved(l), core(l), sc_);
    if (grads_) grads_(ctx.stream, l, true);
  }
}

}  // namespace vlm
