// Backbone: construction, forward, backward and gradient finalisation (the step);
// parameter binding and the activation plan are in backbone_plan.cpp.
#include "llm/backbone.h"

#include <algorithm>

#include "core/ops.h"
#include "llm/init.h"
#include "llm/param_specs.h"
#include "parallel/regions.h"

namespace vlm {

Backbone::Backbone(const ModelConfig& cfg, Backend& backend, Communicator& tp, int64_t max_tokens)
    : cfg_(cfg), backend_(backend), tp_(tp), max_tokens_(max_tokens) {
  cfg_.validate(tp.size());
  VLM_REQUIRE(tp.device() == backend.device(), "backbone: the TP communicator is on ", device_name(tp.device()),
              ", the model on ", device_name(backend.device()));
  sp_ = cfg_.sequence_parallel && tp.size() > 1;
  VLM_REQUIRE(max_tokens > 0 && (!sp_ || max_tokens % tp.size() == 0), "backbone: max tokens per micro-batch ",
              max_tokens, " must be > 0", sp_ ? cat(" and a multiple of parallel.tp=", tp.size(),
                                                     " (model.sequence_parallel)") : "");
  params_ = std::make_unique<ParamTable>(backbone_param_specs(cfg_, tp.size()), tp.size(), tp.rank());
  params_->allocate(backend_);
  bind_params();
  plan_activations();
}

Backbone::~Backbone() = default;

void Backbone::init(uint64_t seed) { init_params(*params_, seed); }

int64_t Backbone::stream_rows(int64_t T) const { return sp_ ? T / tp_.size() : T; }
int64_t Backbone::local_vocab() const { return cfg_.padded_vocab(tp_.size()) / tp_.size(); }
Tensor Backbone::logits() const { return act("out.logits", last_T_); }
Tensor Backbone::losses() const { return act("out.losses", last_T_); }

float Backbone::forward(Stream& s, const LmInput& in) {
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(T > 0 && T <= max_tokens_, "backbone: micro-batch of ", T, " tokens, planned for at most ",
              max_tokens_);
  VLM_REQUIRE(!sp_ || T % tp_.size() == 0, "backbone: with model.sequence_parallel the packed length T=", T,
              " must be a multiple of parallel.tp=", tp_.size(), " (pad the batch)");
  VLM_REQUIRE(cfg_.is_llama() || in.max_seqlen <= cfg_.max_pos, "backbone: a sample of ", in.max_seqlen,
              " tokens exceeds model.max_pos=", cfg_.max_pos);
  VLM_ASSERT(in.ids.defined() != in.embeddings.defined(), "LmInput needs exactly one of ids and embeddings");
  VLM_REQUIRE(in.max_id < cfg_.vocab_size, "backbone: token id or target ", in.max_id,
              " outside the vocabulary [0, model.vocab_size=", cfg_.vocab_size, ")");
  if (in.embeddings.defined()) require_shape(in.embeddings, Shape{T, cfg_.d_model}, "backbone embeddings");
  last_T_ = T;
  const int64_t Ts = stream_rows(T), row0 = sp_ ? int64_t(tp_.rank()) * Ts : 0;
  LlmContext ctx{s, tp_, sp_};
  const PackedSeqs seq{in.cu_seqlens, in.max_seqlen, in.positions};
  const Scratch sc = scratch(T, Ts);

  // Embedding -> h.0 [Ts,C]. Caller embeddings are replicated: this rank keeps its rows.
  const Tensor h0 = act("h.0", Ts);
  if (in.ids.defined())
    emb_.forward(ctx, h0, sc.partial, in.ids);
  else
    slice_cols(s, h0, in.embeddings.slice(row0, row0 + Ts), 0);
  if (wpe_.defined()) {
    embedding_forward(s, sc.dtmp, in.positions.slice(row0, row0 + Ts), wpe_, 0);
    add(s, h0, h0, sc.dtmp);
  }
  for (int l = 0; l < cfg_.n_layers; ++l) blocks_[size_t(l)].forward(ctx, seq, block_acts(l, T, Ts), sc);

  const Tensor x = act("out.ln", Ts), x_full = sp_ ? act("out.ln_full", T) : x;
  lnf_.forward(s, x, act("out.ln_mean", Ts), act("out.ln_rstd", Ts), act("h." + std::to_string(cfg_.n_layers), Ts));
  const Tensor logits = act("out.logits", T);
  out_.forward(ctx, logits, x_full, x, acts_.has("out.pad_fill") ? act("out.pad_fill", T) : Tensor{});
  if (!in.targets.defined()) return 0.f;
  const Tensor losses = act("out.losses", T);
  VocabParallelCrossEntropy::forward(ctx, losses, act("out.rowmax", T), acts_.get("out.stats").sub(0, Shape{2 * T}),
                                     logits, in.targets, out_.vocab_offset);
  const double norm = in.loss_norm > 0 ? in.loss_norm : double(in.n_counted);
  if (norm <= 0) return 0.f;
  double sum = 0;
  for (float v : to_vector_f32(losses)) sum += v;
  return float(sum / norm);
}

void Backbone::backward(Stream& s, const LmInput& in, const Tensor& d_embeddings) {
  const int64_t T = in.n_tokens;
  VLM_ASSERT(T == last_T_, "backward of a batch of ", T, " tokens after a forward of ", last_T_);
  VLM_REQUIRE(in.targets.defined(), "backbone: backward needs targets");
  const int64_t Ts = stream_rows(T), row0 = sp_ ? int64_t(tp_.rank()) * Ts : 0;
  LlmContext ctx{s, tp_, sp_};
  const PackedSeqs seq{in.cu_seqlens, in.max_seqlen, in.positions};
  const Scratch sc = scratch(T, Ts);
  const double norm = in.loss_norm > 0 ? in.loss_norm : double(in.n_counted);

  const Tensor dlosses = act("out.dlosses", T), dlogits = act("out.dlogits", T);
  fill(s, dlosses, norm > 0 ? float(1.0 / norm) : 0.f);
  VocabParallelCrossEntropy::backward(ctx, dlogits, act("out.logits", T), act("out.rowmax", T),
                                      acts_.get("out.stats").sub(0, Shape{2 * T}), in.targets, dlosses,
                                      out_.vocab_offset);
  const Tensor x = act("out.ln", Ts), x_full = sp_ ? act("out.ln_full", T) : x;
  out_.backward(ctx, sc.dnorm, sc.dfull_b, x_full, dlogits);
  const Tensor dres = act("sc.dres", Ts);  // = (first write), then += by every block
  lnf_.backward(s, dres, sc.dnorm, act("h." + std::to_string(cfg_.n_layers), Ts), act("out.ln_mean", Ts),
                act("out.ln_rstd", Ts));
  for (int l = cfg_.n_layers - 1; l >= 0; --l) {
    const Block& b = blocks_[size_t(l)];
    const BlockActs a = block_acts(l, T, Ts);
    if (cfg_.recompute == Recompute::Full) b.forward(ctx, seq, a, sc);
    else if (cfg_.recompute == Recompute::Selective) b.attn.core_forward(s, seq, a.attn);
    b.backward(ctx, seq, dres, a, sc);
  }
  if (wpe_.defined()) embedding_backward(s, dwpe_, dres, in.positions.slice(row0, row0 + Ts), 0);
  if (in.ids.defined()) {
    emb_.backward(ctx, dres, sp_ ? sc.dfull_b : dres, in.ids);
  } else if (d_embeddings.defined()) {
    require_shape(d_embeddings, Shape{T, cfg_.d_model}, "backbone d_embeddings");
    // Conjugate of keeping this rank's rows: all-gather the row shards (SP).
    if (sp_)
      gather_from_sequence_region_forward(s, tp_, d_embeddings, dres);
    else
      slice_cols(s, d_embeddings, dres, 0);
  }
}

void Backbone::finalize_grads(Stream& s) {
  if (tp_.size() == 1) return;
  for (const Param& p : params_->params())
    if (p.spec.tp_partial_grad) copy_to_region_backward(s, tp_, p.grad, p.grad);
}

Tensor Backbone::gather_logits(Stream& s) {
  const int64_t T = last_T_, Vl = local_vocab(), V = cfg_.vocab_size, p = tp_.size();
  VLM_ASSERT(T > 0, "gather_logits before forward");
  const Tensor all = Tensor::empty(backend_, Shape{p * T, Vl});
  tp_.all_gather(s, all, logits());
  s.synchronize();
  const std::vector<float> h = to_vector_f32(all);
  std::vector<float> out(size_t(T * V));
  for (int64_t r = 0; r < p; ++r)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < Vl && r * Vl + j < V; ++j)
        out[size_t(t * V + r * Vl + j)] = h[size_t((r * T + t) * Vl + j)];
  return Tensor::from_vector(out, Shape{T, V});
}

}  // namespace vlm
