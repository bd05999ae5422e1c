// One pre-norm transformer block on the residual stream h [Ts,C]:
//   h_mid = h_in  + Attention(Norm1(h_in))
//   h_out = h_mid + Mlp(Norm2(h_mid))
// Norms and residual adds run on the local stream rows (sequence shards under SP);
// attention and MLP enter/leave the TP region through their column/row layers.
// backward(dres): dres holds dL/dh_out on entry and dL/dh_in on exit (each branch's
// input gradient is added into it). Gradients follow the rule of nn/context.h.
// Fused residual adds (docs/ops.md, "Fused ops"): each add of the residual stream runs
// with the norm that reads its result (h_mid with Norm2; h_out with the next block's
// Norm1, which the stack passes as `next`), and each norm's backward adds its input
// gradient into dres in the same op.
//
// Parameters: the roles of BlockParam, named by the owner (a BlockParamNames function),
// so one block serves checkpoints of any naming (Hugging Face Llama, SigLIP, ...).
// Shapes (HF layout [out, in]), TP split and init, for block l of a stack of L:
//   norm1/norm2 weight [C] (1), bias [C] (0, LayerNorm)     replicated, partial under SP
//   q weight [NH*HS, C], k/v weight [NKV*HS, C]              split 0 (k/v replicated when
//   q/k/v bias [NH*HS] / [NKV*HS] (0, qkv_bias)                NKV < tp: partial grads)
//   o weight [C, NH*HS] (std/sqrt(2L)), o bias [C] (0)       split 1; bias replicated
//   gate (SwiGLU), up weight [F, C], bias [F] (0)            split 0
//   down weight [C, F] (std/sqrt(2L)), bias [C] (0)          split 1; bias replicated
// Weights draw N(0, init_std) unless noted; biases exist when linear_bias (o, MLP) or
// qkv_bias (q/k/v) is set. Table order: the order of BlockParam.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/block_config.h"
#include "nn/mlp.h"
#include "nn/norm.h"
#include "nn/param_table.h"

namespace vlm {

enum class BlockParam {
  Norm1Weight, Norm1Bias,
  QWeight, KWeight, VWeight, QBias, KBias, VBias,
  OWeight, OBias,
  Norm2Weight, Norm2Bias,
  GateWeight, GateBias, UpWeight, UpBias, DownWeight, DownBias,
};
// The full parameter name of `role` in block `layer` (the owner's naming scheme).
using BlockParamNames = std::function<std::string(int layer, BlockParam role)>;

// The parameters of block `layer` of a stack of n_layers, in table order.
std::vector<ParamSpec> block_param_specs(const BlockConfig& cfg, int tp, int layer, int n_layers, float init_std,
                                         const BlockParamNames& names);

struct Block {
  Norm ln1, ln2;
  Attention attn;
  Mlp mlp;

  // Views of block `layer`'s parameters in `t` (this rank's shards; t.tp_rank() picks
  // the KV head when KV heads are replicated).
  static Block bind(const BlockConfig& cfg, const ParamTable& t, int layer, const BlockParamNames& names);

  // ln1_done: a.ln1 and its statistics already hold Norm1(h_in) (computed with the
  // previous block's last add). next / next_acts: the following block and its
  // activations, whose Norm1(h_out) is computed with this block's last add; null: none
  // (the last block, or a block re-run alone under full recomputation).
  void forward(TpContext& ctx, const PackedSeqs& seq, const Tensor& h_in, const Tensor& h_out, const BlockActs& a,
               const AttentionCore& c, const Scratch& sc, bool ln1_done = false, const Block* next = nullptr,
               const BlockActs* next_acts = nullptr) const;
  void backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres, const Tensor& h_in, const BlockActs& a,
                const AttentionCore& c, const Scratch& sc) const;
  // One decode step on the rows' residual stream h [N,C], in place (Attention::decode):
  // the same computation as forward for the new rows, keys and values from the cache.
  void decode(TpContext& ctx, const DecodeRows& rows, const Tensor& h, const BlockActs& a, const Tensor& att,
              const Scratch& sc, const Tensor& k_cache, const Tensor& v_cache) const;
};

}  // namespace vlm
