// Backbone: parameter binding and the activation plan (the stack's buffers, then the
// output head's); the step itself is in backbone.cpp.
#include "llm/backbone.h"

#include <algorithm>

#include "core/ops.h"
#include "llm/param_specs.h"

namespace vlm {

void Backbone::bind_params() {
  const ParamTable& t = *params_;
  const int64_t Vl = local_vocab(), offset = int64_t(tp_.rank()) * Vl;
  // The lookups read the bf16 working copies under bf16 (the activations' dtype).
  const auto weights = [&](const char* name) { return t.get(name).work.defined() ? t.get(name).work : t.get(name).value; };
  emb_.table = weights(kEmbedTokens);
  emb_.dtable = t.get(kEmbedTokens).grad;
  emb_.vocab_offset = offset;
  if (!cfg_.is_llama()) {
    wpe_ = weights("model.embed_positions.weight");
    dwpe_ = t.get("model.embed_positions.weight").grad;
  }
  stack_.bind(t);
  lnf_ = Norm::bind(t, stack_.config().norm, cfg_.norm_eps, kFinalNormWeight, kFinalNormBias);
  out_.head = Linear::bind(t, cfg_.tied_embeddings ? kEmbedTokens : "lm_head.weight");
  out_.vocab_offset = offset;
  out_.valid_local = std::clamp<int64_t>(cfg_.vocab_size - offset, 0, Vl);
}

void Backbone::plan_activations() {
  using R = ActPlan::Rows;
  const int64_t C = cfg_.d_model, Vl = local_vocab();
  ActPlan& p = acts_;
  HeadActs& a = head_;
  stack_.plan(p);
  plan_norm_acts(p, stack_.config(), tp_.size(), &a.ln, &a.ln_mean, &a.ln_rstd, &a.ln_full);
  p.add(&a.logits, R::Fixed, {Vl}, chunk_);
  if (out_.valid_local < Vl) p.add(&a.pad_fill, R::Fixed, {Vl - out_.valid_local}, chunk_);
  p.add_f32(&a.rowmax, R::T);
  p.add_f32(&a.stats, R::T, {}, 2);
  p.add_f32(&a.losses, R::T);
  p.add_f32(&a.dlosses, R::T);
  p.add(&a.dres, R::Ts, {C});
  p.allocate(backend_, max_tokens_, stream_rows(max_tokens_), act_);
  stack_.reserve_scratch(backend_, max_tokens_);
  // The logits of padding columns are the constant -1e30: fill its source once here.
  if (a.pad_fill.defined()) fill(backend_.default_stream(), a.pad_fill, -1e30f);
}

}  // namespace vlm
