// Tensor-parallel self-attention; see attention.h.
#include "nn/attention.h"

#include "core/ops.h"

namespace vlm {

void Attention::forward(TpContext& ctx, const PackedSeqs& seq, const Tensor& x, const Tensor& y,
                        const AttentionActs& a, const AttentionCore& c, const Scratch& sc) const {
  Stream& s = ctx.stream;
  column_parallel_forward(ctx, a.x_full, x, {{&q, a.q}, {&k, a.k}, {&v, a.v}});
  if (rope) rope_qk_forward(s, a.q, a.k, seq.positions, rope_theta);
  core_forward(s, seq, a, c);
  row_parallel_forward(ctx, y, sc.partial, c.att, o);
}

void Attention::core_forward(Stream& s, const PackedSeqs& seq, const AttentionActs& a, const AttentionCore& c) const {
  attention_forward(s, c.att, c.lse, a.q, a.k, a.v, seq.cu_seqlens, seq.max_seqlen, causal);
}

void Attention::decode(TpContext& ctx, const DecodeRows& rows, const Tensor& x, const Tensor& y,
                       const AttentionActs& a, const Tensor& att, const Scratch& sc, const Tensor& k_cache,
                       const Tensor& v_cache) const {
  VLM_ASSERT(causal && !ctx.seq_parallel(), "attention decode: causal attention without sequence parallelism only");
  Stream& s = ctx.stream;
  column_parallel_forward(ctx, a.x_full, x, {{&q, a.q}, {&k, a.k}, {&v, a.v}});
  if (rope) rope_qk_forward(s, a.q, a.k, rows.positions, rope_theta);
  scatter_rows(s, k_cache, a.k, rows.slots);
  scatter_rows(s, v_cache, a.v, rows.slots);
  attention_decode(s, att, a.q, k_cache, v_cache, rows.key_start, rows.key_len, rows.max_len);
  row_parallel_forward(ctx, y, sc.partial, att, o);
}

void Attention::backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dx, const Tensor& dy,
                         const AttentionActs& a, const AttentionCore& c, const Scratch& sc) const {
  Stream& s = ctx.stream;
  const Tensor dy_full = ctx.seq_parallel() ? sc.dfull_a : dy;
  row_parallel_backward(ctx, sc.datt, dy_full, dy, c.att, o);
  attention_backward(s, sc.dq, sc.dk, sc.dv, sc.datt, a.q, a.k, a.v, c.att, c.lse, seq.cu_seqlens, seq.max_seqlen,
                     causal);
  if (rope) rope_qk_backward(s, sc.dq, sc.dk, seq.positions, rope_theta);
  column_parallel_backward(ctx, dx, sc.dfull_b, a.x_full, {{&q, sc.dq}, {&k, sc.dk}, {&v, sc.dv}});
}

}  // namespace vlm
