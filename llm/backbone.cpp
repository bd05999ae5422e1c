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
      act_(precision == Precision::BF16 ? DType::BF16 : DType::F32),
      chunk_(vlm::loss_chunk_rows(cfg_.loss_chunk, max_tokens, cfg_.local_vocab(tp.size()), dtype_size(act_))),
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

float Backbone::forward(Stream& s, const LmInput& in, bool train) {
  forward(s, in, loss_, train);
  float loss = 0.f;
  copy_to_host(s, Tensor(&loss, Shape{1}, DType::F32, DeviceKind::CPU), loss_);
  return loss;
}

void Backbone::forward(Stream& s, const LmInput& in, const Tensor& loss, bool train) {
  forward_begin(s, in);
  forward_layers(s, in, 0, cfg_.n_layers);
  forward_end(s, in, loss, train);
}

void Backbone::forward_begin(Stream& s, const LmInput& in) { run_embedding(s, in); }

void Backbone::forward_layers(Stream& s, const LmInput& in, int l0, int l1) {
  VLM_ASSERT(in.n_tokens == last_T_, "forward of layers of a batch of ", in.n_tokens, " tokens after ", last_T_);
  TpContext ctx = context(s);
  stack_.forward_layers(ctx, PackedSeqs{in.cu_seqlens, in.max_seqlen, in.positions}, l0, l1);
}

void Backbone::forward_end(Stream& s, const LmInput& in, const Tensor& loss, bool train) {
  require_shape(loss, Shape{1}, "backbone loss");
  const double norm = run_head(s, in, true, train);
  fill(s, loss, 0.f);
  if (norm <= 0) return;
  bias_backward(s, loss, head_.losses.view(Shape{in.n_tokens, 1}));  // loss += the sum over rows
  scale(s, loss, float(1.0 / norm));
}

double Backbone::run_forward(Stream& s, const LmInput& in, const Tensor& cache_slots, bool loss, bool train) {
  run_embedding(s, in);
  TpContext ctx = context(s);
  const PackedSeqs seq{in.cu_seqlens, in.max_seqlen, in.positions};
  stack_.forward(ctx, seq, cache_slots.defined() ? cache_.get() : nullptr, cache_slots);
  return run_head(s, in, loss, train);
}

void Backbone::run_embedding(Stream& s, const LmInput& in) {
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(T > 0 && T <= max_tokens_, "backbone: micro-batch of ", T, " tokens, planned for at most ",
              max_tokens_);
  VLM_REQUIRE(!sp_ || T % tp_.size() == 0, "backbone: with model.sequence_parallel the packed length T=", T,
              " must be a multiple of parallel.tp=", tp_.size(), " (pad the batch)");
  VLM_REQUIRE(in.max_seqlen <= cfg_.max_pos, "backbone: a sample of ", in.max_seqlen,
              " tokens exceeds model.max_pos=", cfg_.max_pos);
  VLM_ASSERT(in.mixed() ? in.ids.defined() : in.ids.defined() != in.embeddings.defined(),
             "LmInput needs ids, embeddings, or ids with visual rows (llm/lm_input.h)");
  VLM_REQUIRE(in.max_id < cfg_.vocab_size, "backbone: token id or target ", in.max_id,
              " outside the vocabulary [0, model.vocab_size=", cfg_.vocab_size, ")");
  if (in.mixed()) {
    require_shape(in.visual_rows, Shape{in.n_visual}, "backbone visual rows");
    if (in.n_visual > 0) {
      require_shape(in.embeddings, Shape{in.n_visual, cfg_.d_model}, "backbone visual embeddings");
      VLM_REQUIRE(in.embeddings.dtype() == act_, "backbone: visual embeddings of dtype ",
                  dtype_name(in.embeddings.dtype()), ", the backbone's activations are ", dtype_name(act_));
    }
  } else if (in.embeddings.defined()) {
    require_shape(in.embeddings, Shape{T, cfg_.d_model}, "backbone embeddings");
  }
  cut(T);
  const int64_t Ts = stream_rows(T), row0 = sp_ ? int64_t(tp_.rank()) * Ts : 0;
  TpContext ctx = context(s);
  const Scratch& sc = stack_.scratch();

  // Embedding -> h[0] [Ts,C]. Caller embeddings are replicated: this rank keeps its rows
  // (the mixed path places them inside the embedding's reduction: embedding_parallel.h),
  // converted to the activations' dtype.
  const Tensor& h0 = stack_.input();
  if (in.ids.defined())
    emb_.forward(ctx, h0, sc.partial, in.ids, in.visual_rows, in.embeddings);
  else
    convert(s, h0, in.embeddings.slice(row0, row0 + Ts));
  if (wpe_.defined()) {  // the learned positions, through partial's rows (free after the embedding)
    const Tensor pos = sc.partial.slice(0, Ts);
    embedding_forward(s, pos, in.positions.slice(row0, row0 + Ts), wpe_, 0);
    add(s, h0, h0, pos);
  }
}

double Backbone::run_head(Stream& s, const LmInput& in, bool loss, bool train) {
  TpContext ctx = context(s);
  const HeadActs& a = head_;
  VLM_REQUIRE(!train || in.targets.defined(), "backbone: a training forward needs targets");
  lnf_.forward(s, a.ln, a.ln_mean, a.ln_rstd, stack_.output());
  head_grads_ = false;
  if (!loss || !in.targets.defined()) return 0.0;  // the logits: gather_logits, prefill
  const double norm = std::max(0.0, in.loss_norm > 0 ? in.loss_norm : double(in.n_counted));
  head_forward(ctx, in, norm, train);
  return norm;
}

void Backbone::backward(Stream& s, const LmInput& in, const Tensor& d_embeddings) {
  backward_head(s, in);
  backward_layers(s, in, 0, cfg_.n_layers);
  backward_embedding(s, in, d_embeddings);
}

void Backbone::backward_head(Stream& s, const LmInput& in) {
  const int64_t T = in.n_tokens;
  VLM_ASSERT(T == last_T_, "backward of a batch of ", T, " tokens after a forward of ", last_T_);
  VLM_ASSERT(head_grads_, "backbone: backward after a forward without train (llm/backbone.h)");
  cut(T);
  const Scratch& sc = stack_.scratch();
  // The head's input gradient (its training forward wrote dfull_b) reduced over the TP
  // group: the column-parallel input region's backward.
  if (sp_)
    gather_from_sequence_region_backward(s, tp_, sc.dnorm, sc.dfull_b);
  else
    copy_to_region_backward(s, tp_, sc.dnorm, sc.dfull_b);
  // dres = (first write), then += by every block
  lnf_.backward(s, head_.dres, sc.dnorm, stack_.output(), head_.ln_mean, head_.ln_rstd);
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
    // Conjugate of keeping this rank's rows: all-gather the row shards (SP; through the
    // free scratch dfull_b [T,C] when d_embeddings is not of the activations' dtype),
    // converted to d_embeddings' dtype.
    if (!sp_) {
      convert(s, d_embeddings, dres);
    } else if (d_embeddings.dtype() == act_) {
      gather_from_sequence_region_forward(s, tp_, d_embeddings, dres);
    } else {
      gather_from_sequence_region_forward(s, tp_, sc.dfull_b, dres);
      convert(s, d_embeddings, sc.dfull_b);
    }
  }
}

void Backbone::finalize_grads(Stream& s) { params_->finalize_tp_grads(s, tp_); }

void Backbone::finalize_grads(Stream& s, int64_t begin, int64_t end) { params_->finalize_tp_grads(s, tp_, begin, end); }

int64_t Backbone::layer_grad_begin(int l) const {
  VLM_ASSERT(0 <= l && l <= cfg_.n_layers, "layer ", l, " of ", cfg_.n_layers);
  return params_->layout().unit_range(layer_unit(l)).first;  // l = L: the head's unit
}

}  // namespace vlm
