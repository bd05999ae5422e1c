// One pre-norm transformer block on the residual stream h [Ts,C]:
//   h_mid = h_in  + Attention(Norm1(h_in))
//   h_out = h_mid + Mlp(Norm2(h_mid))
// Norms and residual adds run on the local stream rows (sequence shards under SP);
// attention and MLP enter/leave the TP region through their column/row layers.
// backward(dres): dres holds dL/dh_out on entry and dL/dh_in on exit (the residual
// stream gradient ACCUMULATES: each branch's input gradient is added into dres);
// parameter grads += .
#pragma once
#include "llm/attention.h"
#include "llm/mlp.h"
#include "llm/norm.h"

namespace vlm {

struct Block {
  Norm ln1, ln2;
  Attention attn;
  Mlp mlp;

  void forward(LlmContext& ctx, const PackedSeqs& seq, const BlockActs& a, const Scratch& sc) const;
  void backward(LlmContext& ctx, const PackedSeqs& seq, const Tensor& dres, const BlockActs& a,
                const Scratch& sc) const;
};

}  // namespace vlm
