// Backbone: decoding with a KV cache (plan_decoding, prefill, decode_step and the
// gathered logits of a step); see backbone.h. The step runs the embedding, the stack's
// decode (nn/stack.h) and the output head on N rows without sequence parallelism.
#include <algorithm>

#include "core/ops.h"
#include "llm/backbone.h"

namespace vlm {

void Backbone::plan_decoding(int64_t max_seqs, int64_t max_len) {
  VLM_ASSERT(!cache_, "backbone: plan_decoding called twice");
  VLM_REQUIRE(max_seqs >= 1 && max_len >= 1, "backbone: decoding planned for ", max_seqs, " sequences of ", max_len,
              " rows");
  VLM_REQUIRE(max_len <= cfg_.max_pos, "backbone: decoding sequences of ", max_len,
              " rows exceed model.max_pos=", cfg_.max_pos);
  const int p = tp_.size();
  const int64_t C = cfg_.d_model, Vl = local_vocab(), V = cfg_.vocab_size;
  const LocalDims d = stack_.local();
  cache_ = std::make_unique<KvCache>(backend_, cfg_.n_layers, d.NKVl, cfg_.head_dim(), max_seqs, max_len,
                                     max_tokens_, act_);
  using R = ActPlan::Rows;
  ActPlan& a = dec_acts_;
  stack_.plan_decode(a);
  a.add(&dec_.ln, R::T, {C});
  if (stack_.config().norm == NormKind::LayerNorm) a.add_f32(&dec_.ln_mean, R::T);
  a.add_f32(&dec_.ln_rstd, R::T);
  a.add(&dec_.logits, R::T, {Vl});
  if (out_.valid_local < Vl) a.add(&dec_.pad_fill, R::T, {Vl - out_.valid_local});
  if (wpe_.defined()) a.add(&dec_.pos, R::T, {C});
  a.allocate(backend_, max_seqs, max_seqs, act_);
  if (dec_.pad_fill.defined()) fill(backend_.default_stream(), dec_.pad_fill, -1e30f);
  dec_ids_ = Tensor::zeros(backend_, Shape{max_seqs}, DType::I32);
  if (p > 1) dec_gather_ = Tensor::zeros(backend_, Shape{p * max_seqs, Vl}, act_);
  if (act_ != DType::F32) dec_f32_ = Tensor::zeros(backend_, Shape{p * max_seqs, Vl});
  dec_all_.assign(size_t(p * max_seqs * Vl), 0.f);
  dec_full_.assign(size_t(max_seqs * V), 0.f);
  dec_cu_.reserve(size_t(max_tokens_) + 1);
  dec_rows_.reserve(size_t(max_seqs));
}

size_t Backbone::decode_bytes() const {
  if (!cache_) return 0;
  return cache_->bytes() + dec_acts_.bytes() + dec_ids_.nbytes() + (dec_gather_.defined() ? dec_gather_.nbytes() : 0) +
         (dec_f32_.defined() ? dec_f32_.nbytes() : 0);
}

void Backbone::prefill(Stream& s, const LmInput& in, int64_t n_seqs) {
  VLM_ASSERT(cache_, "backbone: prefill before plan_decoding");
  const int64_t B = in.cu_seqlens.numel() - 1;
  VLM_REQUIRE(n_seqs >= 1 && n_seqs <= B && n_seqs <= cache_->max_seqs(), "backbone: prefill keeps ", n_seqs,
              " of ", B, " samples, decoding planned for ", cache_->max_seqs());
  s.synchronize();  // the boundaries are read on the host
  dec_cu_.resize(size_t(B + 1));
  backend_.copy(dec_cu_.data(), DeviceKind::CPU, in.cu_seqlens.data(), backend_.device(),
                size_t(B + 1) * sizeof(int32_t));
  const Tensor slots = cache_->prefill(s, dec_cu_, n_seqs);
  run_forward(s, in, slots, false, false);
  // The logits of each kept sample's last row only: the rows of the final norm's output
  // (gathered over the sequence shards under SP), a row gather written as a lookup in
  // the table ln_full, then the output layer on them.
  gather_final_norm(s);
  dec_rows_.resize(size_t(n_seqs));
  for (int64_t b = 0; b < n_seqs; ++b) dec_rows_[size_t(b)] = dec_cu_[size_t(b + 1)] - 1;
  backend_.copy(dec_ids_.data(), backend_.device(), dec_rows_.data(), DeviceKind::CPU,
                size_t(n_seqs) * sizeof(int32_t));
  dec_acts_.cut(n_seqs, n_seqs);
  embedding_forward(s, dec_.ln, dec_ids_.slice(0, n_seqs), head_.ln_full, 0);
  out_.forward(s, dec_.logits, dec_.ln, dec_.pad_fill);
  dec_n_ = n_seqs;
}

void Backbone::decode_step(Stream& s, const std::vector<int32_t>& seqs, const std::vector<int32_t>& ids) {
  VLM_ASSERT(cache_, "backbone: decode_step before plan_decoding");
  VLM_ASSERT(ids.size() == seqs.size(), "backbone: decode_step with ", ids.size(), " ids for ", seqs.size(),
             " sequences");
  for (int32_t id : ids)
    VLM_REQUIRE(id >= 0 && id < cfg_.vocab_size, "backbone: token id ", id, " outside the vocabulary [0, ",
                "model.vocab_size=", cfg_.vocab_size, ")");
  const DecodeRows rows = cache_->append(s, seqs);  // waits for the stream
  const int64_t N = rows.n;
  backend_.copy(dec_ids_.data(), backend_.device(), ids.data(), DeviceKind::CPU, size_t(N) * sizeof(int32_t));
  dec_acts_.cut(N, N);
  TpContext ctx{s, tp_, false};
  const Tensor& h = stack_.decode_state();
  emb_.forward(ctx, h, h, dec_ids_.slice(0, N));
  if (wpe_.defined()) {
    embedding_forward(s, dec_.pos, rows.positions, wpe_, 0);
    add(s, h, h, dec_.pos);
  }
  stack_.decode(ctx, rows, *cache_);
  lnf_.forward(s, dec_.ln, dec_.ln_mean, dec_.ln_rstd, h);
  out_.forward(s, dec_.logits, dec_.ln, dec_.pad_fill);
  dec_n_ = N;
}

Tensor Backbone::gather_step_logits(Stream& s) {
  const int64_t N = dec_n_, Vl = local_vocab(), V = cfg_.vocab_size, p = tp_.size();
  VLM_ASSERT(N > 0, "backbone: gather_step_logits before prefill or decode_step");
  Tensor all = dec_.logits;  // [N, Vl] at tp = 1
  if (p > 1) {
    all = dec_gather_.sub(0, Shape{p * N, Vl});
    tp_.all_gather(s, all, dec_.logits);
  }
  if (dec_f32_.defined()) {  // bf16 logits: their f32 values
    convert(s, dec_f32_.sub(0, Shape{p * N, Vl}), all);
    all = dec_f32_.sub(0, Shape{p * N, Vl});
  }
  s.synchronize();
  backend_.copy(dec_all_.data(), DeviceKind::CPU, all.data(), backend_.device(), all.nbytes());
  // Rank r's block holds columns [r*Vl, (r+1)*Vl) of every row; keep the V real ones.
  for (int64_t r = 0; r < p; ++r)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t n = std::clamp<int64_t>(V - r * Vl, 0, Vl);
      std::copy_n(dec_all_.data() + (r * N + i) * Vl, n, dec_full_.data() + i * V + r * Vl);
    }
  return Tensor(dec_full_.data(), Shape{N, V}, DType::F32, DeviceKind::CPU);
}

}  // namespace vlm
