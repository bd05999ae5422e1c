// Backbone: construction, forward, backward and gradient finalisation (the step);
// parameter binding and the activation plan are in backbone_plan.cpp.
#include "llm/backbone.h"

#include <algorithm>
#include <cstddef>

#include "core/ops.h"
#include "llm/param_specs.h"
#include "nn/init.h"
#include "parallel/regions.h"

namespace vlm {

namespace {
// `cfg`, after validate(tp) (UserError): the members built from it may assume it valid.
const ModelConfig& validated(const ModelConfig& cfg, int tp) {
  cfg.validate(tp);
  return cfg;
}
}  // namespace

Backbone::Backbone(const ModelConfig& cfg, Backend& backend, Communicator& tp, int64_t max_tokens, bool grads,
                   Precision precision, DpSharding dp)
    : cfg_(validated(cfg, tp.size())),
      backend_(backend),
      tp_(tp),
      max_tokens_(max_tokens),
      sp_(cfg_.block().seq_parallel(tp.size())),
      stack_(cfg_.block(), cfg_.n_layers, tp.size(), backbone_block_param_name) {
  VLM_REQUIRE(tp.device() == backend.device(), "backbone: the TP communicator is on ", device_name(tp.device()),
              ", the model on ", device_name(backend.device()));
  VLM_REQUIRE(max_tokens > 0 && (!sp_ || max_tokens % tp.size() == 0), "backbone: max tokens per micro-batch ",
              max_tokens, " must be > 0", sp_ ? cat(" and a multiple of parallel.tp=", tp.size(),
                                                     " (model.sequence_parallel)") : "");
  params_ = std::make_unique<ParamTable>(backbone_param_specs(cfg_, tp.size()), tp.size(), tp.rank(), DType::F32,
                                         true);
  if (precision == Precision::BF16) params_->add_bf16_working_copy();
  params_->allocate(backend_, grads, dp);
  VLM_ASSERT(params_->layout().units() == cfg_.n_layers + 2 && params_->layout().unit_layer(layer_unit(0)) == 0,
             "backbone units: the embedding, the layers, the head");
  bind_params();
  plan_activations();
  loss_ = Tensor::zeros(backend, Shape{1});
}

Backbone::~Backbone() = default;

void Backbone::init(uint64_t seed) { init_params(*params_, seed); }

void Backbone::cut(int64_t T) {
  acts_.cut(T, stream_rows(T));
  last_T_ = T;
}

float Backbone::forward(Stream& s, const LmInput& in) {
  forward(s, in, loss_);
  float loss = 0.f;
  copy_to_host(s, Tensor(&loss, Shape{1}, DType::F32, DeviceKind::CPU), loss_);
  return loss;
}

void Backbone::forward(Stream& s, const LmInput& in, const Tensor& loss) {
  forward_begin(s, in);
  forward_layers(s, in, 0, cfg_.n_layers);
  forward_end(s, in, loss);
}

void Backbone::forward_begin(Stream& s, const LmInput& in) { run_embedding(s, in); }

void Backbone::forward_layers(Stream& s, const LmInput& in, int l0, int l1) {
  VLM_ASSERT(in.n_tokens == last_T_, "forward of layers of a batch of ", in.n_tokens, " tokens after ", last_T_);
  TpContext ctx = context(s);
  stack_.forward_layers(ctx, PackedSeqs{in.cu_seqlens, in.max_seqlen, in.positions}, l0, l1);
}

void Backbone::forward_end(Stream& s, const LmInput& in, const Tensor& loss) {
  require_shape(loss, Shape{1}, "backbone loss");
  const double norm = run_head(s, in, true);
  fill(s, loss, 0.f);
  if (norm <= 0) return;
  bias_backward(s, loss, head_.losses.view(Shape{in.n_tokens, 1}));  // loss += the sum over rows
  scale(s, loss, float(1.0 / norm));
}

double Backbone::run_forward(Stream& s, const LmInput& in, const Tensor& cache_slots, bool loss) {
  run_embedding(s, in);
  TpContext ctx = context(s);
  const PackedSeqs seq{in.cu_seqlens, in.max_seqlen, in.positions};
  stack_.forward(ctx, seq, cache_slots.defined() ? cache_.get() : nullptr, cache_slots);
  return run_head(s, in, loss);
}

void Backbone::run_embedding(Stream& s, const LmInput& in) {
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(T > 0 && T <= max_tokens_, "backbone: micro-batch of ", T, " tokens, planned for at most ",
              max_tokens_);
  VLM_REQUIRE(!sp_ || T % tp_.size() == 0, "backbone: with model.sequence_parallel the packed length T=", T,
              " must be a multiple of parallel.tp=", tp_.size(), " (pad the batch)");
  VLM_REQUIRE(cfg_.is_llama() || in.max_seqlen <= cfg_.max_pos, "backbone: a sample of ", in.max_seqlen,
              " tokens exceeds model.max_pos=", cfg_.max_pos);
  VLM_ASSERT(in.mixed() ? in.ids.defined() : in.ids.defined() != in.embeddings.defined(),
             "LmInput needs ids, embeddings, or ids with visual rows (llm/lm_input.h)");
  VLM_REQUIRE(in.max_id < cfg_.vocab_size, "backbone: token id or target ", in.max_id,
              " outside the vocabulary [0, model.vocab_size=", cfg_.vocab_size, ")");
  if (in.mixed()) {
    require_shape(in.visual_rows, Shape{in.n_visual}, "backbone visual rows");
    if (in.n_visual > 0) require_shape(in.embeddings, Shape{in.n_visual, cfg_.d_model}, "backbone visual embeddings");
  } else if (in.embeddings.defined()) {
    require_shape(in.embeddings, Shape{T, cfg_.d_model}, "backbone embeddings");
  }
  cut(T);
  const int64_t Ts = stream_rows(T), row0 = sp_ ? int64_t(tp_.rank()) * Ts : 0;
  TpContext ctx = context(s);
  const Scratch& sc = stack_.scratch();

  // Embedding -> h[0] [Ts,C]. Caller embeddings are replicated: this rank keeps its rows
  // (the mixed path places them inside the embedding's reduction: embedding_parallel.h).
  const Tensor& h0 = stack_.input();
  if (in.ids.defined())
    emb_.forward(ctx, h0, sc.partial, in.ids, in.visual_rows, in.embeddings);
  else
    copy(s, h0, in.embeddings.slice(row0, row0 + Ts));
  if (wpe_.defined()) {
    embedding_forward(s, sc.dtmp, in.positions.slice(row0, row0 + Ts), wpe_, 0);
    add(s, h0, h0, sc.dtmp);
  }
  round_act(s, h0, params_->has_working());  // the residual stream in bf16 (docs/training.md, "Numerics")
}

double Backbone::run_head(Stream& s, const LmInput& in, bool loss) {
  TpContext ctx = context(s);
  const HeadActs& a = head_;
  lnf_.forward(s, a.ln, a.ln_mean, a.ln_rstd, stack_.output());
  out_.forward(ctx, a.logits, a.ln_full, a.ln, a.pad_fill);
  if (!loss || !in.targets.defined()) return 0.0;
  VocabParallelCrossEntropy::forward(ctx, a.losses, a.rowmax, a.stats, a.logits, in.targets, out_.vocab_offset);
  return std::max(0.0, in.loss_norm > 0 ? in.loss_norm : double(in.n_counted));
}

void Backbone::backward(Stream& s, const LmInput& in, const Tensor& d_embeddings) {
  backward_head(s, in);
  backward_layers(s, in, 0, cfg_.n_layers);
  backward_embedding(s, in, d_embeddings);
}

void Backbone::backward_head(Stream& s, const LmInput& in) {
  const int64_t T = in.n_tokens;
  VLM_ASSERT(T == last_T_, "backward of a batch of ", T, " tokens after a forward of ", last_T_);
  VLM_REQUIRE(in.targets.defined(), "backbone: backward needs targets");
  cut(T);
  TpContext ctx = context(s);
  const Scratch& sc = stack_.scratch();
  const HeadActs& a = head_;
  const double norm = in.loss_norm > 0 ? in.loss_norm : double(in.n_counted);

  fill(s, a.dlosses, norm > 0 ? float(1.0 / norm) : 0.f);
  VocabParallelCrossEntropy::backward(ctx, a.dlogits, a.logits, a.rowmax, a.stats, in.targets, a.dlosses,
                                      out_.vocab_offset);
  out_.backward(ctx, sc.dnorm, sc.dfull_b, a.ln_full, a.dlogits);
  // dres = (first write), then += by every block
  lnf_.backward(s, a.dres, sc.dnorm, stack_.output(), a.ln_mean, a.ln_rstd);
}

void Backbone::backward_layers(Stream& s, const LmInput& in, int l0, int l1) {
  VLM_ASSERT(in.n_tokens == last_T_, "backward of a batch of ", in.n_tokens, " tokens after a forward of ", last_T_);
  TpContext ctx = context(s);
  const PackedSeqs seq{in.cu_seqlens, in.max_seqlen, in.positions};
  stack_.backward_layers(ctx, seq, head_.dres, l0, l1);
}

void Backbone::backward_embedding(Stream& s, const LmInput& in, const Tensor& d_embeddings) {
  const int64_t T = in.n_tokens;
  VLM_ASSERT(T == last_T_, "backward of a batch of ", T, " tokens after a forward of ", last_T_);
  const int64_t Ts = stream_rows(T), row0 = sp_ ? int64_t(tp_.rank()) * Ts : 0;
  TpContext ctx = context(s);
  const Scratch& sc = stack_.scratch();
  const Tensor& dres = head_.dres;
  if (dwpe_.defined()) embedding_backward(s, dwpe_, dres, in.positions.slice(row0, row0 + Ts), 0);
  if (in.ids.defined()) {
    Tensor d_visual;
    if (in.mixed() && d_embeddings.defined() && in.n_visual > 0) {
      require_shape(d_embeddings, Shape{in.n_visual, cfg_.d_model}, "backbone d_embeddings (visual rows)");
      d_visual = d_embeddings;
    }
    emb_.backward(ctx, dres, sp_ ? sc.dfull_b : dres, in.ids, in.visual_rows, d_visual);
  } else if (d_embeddings.defined()) {
    require_shape(d_embeddings, Shape{T, cfg_.d_model}, "backbone d_embeddings");
    // Conjugate of keeping this rank's rows: all-gather the row shards (SP).
    if (sp_)
      gather_from_sequence_region_forward(s, tp_, d_embeddings, dres);
    else
      copy(s, d_embeddings, dres);
  }
}

void Backbone::finalize_grads(Stream& s) { params_->finalize_tp_grads(s, tp_); }

void Backbone::finalize_grads(Stream& s, int64_t begin, int64_t end) { params_->finalize_tp_grads(s, tp_, begin, end); }

int64_t Backbone::layer_grad_begin(int l) const {
  VLM_ASSERT(0 <= l && l <= cfg_.n_layers, "layer ", l, " of ", cfg_.n_layers);
  return params_->layout().unit_range(layer_unit(l)).first;  // l = L: the head's unit
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
