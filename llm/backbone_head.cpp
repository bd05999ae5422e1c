// Backbone: the output head and the loss, fused and chunked (llm/loss_parallel.h), and
// the logits gathered for checks and commands; see backbone.h.
#include <algorithm>
#include <vector>

#include "core/ops.h"
#include "llm/backbone.h"
#include "parallel/regions.h"

namespace vlm {

void Backbone::gather_final_norm(Stream& s) {
  if (sp_)
    gather_from_sequence_region_forward(s, tp_, head_.ln_full, head_.ln);
  else
    copy_to_region_forward(s, tp_, head_.ln_full, head_.ln);
}

void Backbone::head_forward(TpContext& ctx, const LmInput& in, double norm, bool train) {
  Stream& s = ctx.stream;
  const HeadActs& a = head_;
  const int64_t T = in.n_tokens;
  const Tensor& dfull = stack_.scratch().dfull_b;  // the head's input gradient (HeadActs)
  gather_final_norm(s);
  if (train) fill(s, a.dlosses, norm > 0 ? float(1.0 / norm) : 0.f);
  for (int64_t r0 = 0; r0 < T; r0 += chunk_) {
    const int64_t r1 = std::min(T, r0 + chunk_), m = r1 - r0;
    const Tensor logits = a.logits.slice(0, m), x = a.ln_full.slice(r0, r1), targets = in.targets.slice(r0, r1);
    const Tensor rowmax = a.rowmax.slice(r0, r1), stats = a.stats.slice(2 * r0, 2 * r1);
    out_.forward(s, logits, x, a.pad_fill.defined() ? a.pad_fill.slice(0, m) : Tensor{});
    VocabParallelCrossEntropy::forward(ctx, a.losses.slice(r0, r1), rowmax, stats, logits, targets,
                                       out_.vocab_offset);
    if (!train) continue;
    // The loss's gradient over the logits (in place), then the head's backward of these rows.
    VocabParallelCrossEntropy::backward(ctx, logits, logits, rowmax, stats, targets, a.dlosses.slice(r0, r1),
                                        out_.vocab_offset);
    out_.backward(s, dfull.slice(r0, r1), x, logits);
  }
  head_grads_ = train;
}

Tensor Backbone::gather_logits(Stream& s) {
  const int64_t T = last_T_, Vl = local_vocab(), V = cfg_.vocab_size, p = tp_.size();
  VLM_ASSERT(T > 0, "gather_logits before forward");
  gather_final_norm(s);
  const Tensor all = Tensor::empty(backend_, Shape{p * std::min(T, chunk_), Vl}, act_);
  std::vector<float> out(size_t(T * V));
  for (int64_t r0 = 0; r0 < T; r0 += chunk_) {
    const int64_t r1 = std::min(T, r0 + chunk_), m = r1 - r0;
    const Tensor logits = head_.logits.slice(0, m), shards = all.slice(0, p * m);
    out_.forward(s, logits, head_.ln_full.slice(r0, r1), head_.pad_fill.defined() ? head_.pad_fill.slice(0, m)
                                                                                  : Tensor{});
    tp_.all_gather(s, shards, logits);
    s.synchronize();
    const std::vector<float> h = to_vector_f32(shards);
    for (int64_t r = 0; r < p; ++r)
      for (int64_t t = 0; t < m; ++t)
        for (int64_t j = 0; j < Vl && r * Vl + j < V; ++j)
          out[size_t((r0 + t) * V + r * Vl + j)] = h[size_t((r * m + t) * Vl + j)];
  }
  return Tensor::from_vector(out, Shape{T, V});
}

}  // namespace vlm
