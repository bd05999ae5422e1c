// VlmModel: decoding with the backbone's KV cache (decode_start, decode_next); see
// model/vlm_model.h. The full-recompute reference, greedy_next, is in vlm_model.cpp.
#include "model/vlm_model.h"

#include <cmath>

#include "base/error.h"

namespace vlm {

std::vector<int32_t> VlmModel::decode_start(Stream& s, const DecodeOptions& o) {
  FrontSlot& f = *slots_[size_t(cur_)];
  const int64_t B = f.B;
  VLM_ASSERT(B >= 1, "decode_start before load");
  VLM_ASSERT(o.greedy() || (std::isfinite(o.temperature) && o.top_k >= 0), "decode options: temperature ",
             o.temperature, ", top_k ", o.top_k);
  if (!llm_->kv_cache()) llm_->plan_decoding(cfg_.max_images, cfg_.scorers.lod.max_tokens + cfg_.max_text);
  for (int64_t b = 0; b < B; ++b) f.samples[size_t(b)].caption.clear();
  pack_input(s, f);
  projector_forward(s, f);
  llm_->prefill(s, f.input, B);  // an SP padding sample comes last and is not kept
  dec_opts_ = o;
  dec_steps_.assign(size_t(B), 0);
  dec_seqs_.resize(size_t(B));
  for (int64_t b = 0; b < B; ++b) dec_seqs_[size_t(b)] = int32_t(b);
  return choose_next(s, dec_seqs_);
}

std::vector<int32_t> VlmModel::decode_next(Stream& s, const std::vector<int32_t>& tokens) {
  const int64_t B = slots_[size_t(cur_)]->B;
  VLM_ASSERT(int64_t(tokens.size()) == B && int64_t(dec_steps_.size()) == B,
             "decode_next: one token per sample, after decode_start");
  dec_seqs_.clear(), dec_ids_.clear();
  for (int64_t b = 0; b < B; ++b)
    if (tokens[size_t(b)] >= 0) dec_seqs_.push_back(int32_t(b)), dec_ids_.push_back(tokens[size_t(b)]);
  if (dec_seqs_.empty()) return std::vector<int32_t>(size_t(B), -1);  // the same on every rank
  llm_->decode_step(s, dec_seqs_, dec_ids_);
  return choose_next(s, dec_seqs_);
}

std::vector<int32_t> VlmModel::choose_next(Stream& s, const std::vector<int32_t>& seqs) {
  const Tensor logits = llm_->gather_step_logits(s);  // host [N, V]
  const int64_t V = logits.size(1);
  const float* L = logits.ptr<float>();
  std::vector<int32_t> next(size_t(slots_[size_t(cur_)]->B), -1);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t b = seqs[i];
    const uint64_t step = dec_steps_[size_t(b)]++;
    const double u = dec_opts_.greedy() ? 0.0 : sample_uniform(dec_opts_.seed, uint64_t(b), step);
    next[size_t(b)] = choose_token(L + int64_t(i) * V, V, dec_opts_, u, dec_order_, dec_weights_);
  }
  return next;
}

}  // namespace vlm
