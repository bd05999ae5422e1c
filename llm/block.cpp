// Pre-norm transformer block; see block.h.
#include "llm/block.h"

#include "core/ops.h"

namespace vlm {

void Block::forward(LlmContext& ctx, const PackedSeqs& seq, const BlockActs& a, const Scratch& sc) const {
  Stream& s = ctx.stream;
  ln1.forward(s, a.ln1, a.ln1_mean, a.ln1_rstd, a.h_in);
  attn.forward(ctx, seq, a.ln1, sc.y, a.attn, sc);
  add(s, a.h_mid, a.h_in, sc.y);
  ln2.forward(s, a.ln2, a.ln2_mean, a.ln2_rstd, a.h_mid);
  mlp.forward(ctx, a.ln2, sc.y, a.mlp, sc);
  add(s, a.h_out, a.h_mid, sc.y);
}

void Block::backward(LlmContext& ctx, const PackedSeqs& seq, const Tensor& dres, const BlockActs& a,
                     const Scratch& sc) const {
  Stream& s = ctx.stream;
  // MLP branch: dres = dL/dh_out = dL/dh_mid (identity path) + branch.
  mlp.backward(ctx, sc.dnorm, dres, a.mlp, sc);
  ln2.backward(s, sc.dtmp, sc.dnorm, a.h_mid, a.ln2_mean, a.ln2_rstd);
  accumulate(s, dres, sc.dtmp, 1.f);
  // Attention branch.
  attn.backward(ctx, seq, sc.dnorm, dres, a.attn, sc);
  ln1.backward(s, sc.dtmp, sc.dnorm, a.h_in, a.ln1_mean, a.ln1_rstd);
  accumulate(s, dres, sc.dtmp, 1.f);
}

}  // namespace vlm
