// Pre-norm transformer block: parameters, binding, forward and backward; see block.h.
#include "nn/block.h"

#include <cmath>

#include "core/ops.h"

namespace vlm {

std::vector<ParamSpec> block_param_specs(const BlockConfig& c, int tp, int layer, int n_layers, float init_std,
                                         const BlockParamNames& names) {
  const LocalDims d = c.local(tp);
  const bool sp = c.seq_parallel(tp), kv_rep = d.kv_replicated;
  const int64_t C = c.C, HS = c.head_dim, NH = c.n_heads, NKV = c.n_kv_heads, F = c.d_ff;
  const float std = init_std, std_res = init_std / std::sqrt(2.f * float(n_layers));
  const int kv_split = kv_rep ? -1 : 0;
  auto n = [&](BlockParam r) { return names(layer, r); };
  std::vector<ParamSpec> v;
  auto add = [&](BlockParam r, Shape full, int split, InitKind init, float sd, bool partial) {
    v.push_back(param_spec(n(r), full, split, init, sd, partial));
  };
  auto norm = [&](BlockParam w, BlockParam b) {
    for (ParamSpec& s : Norm::param_specs(c.norm, C, n(w), n(b), sp)) v.push_back(std::move(s));
  };
  norm(BlockParam::Norm1Weight, BlockParam::Norm1Bias);
  add(BlockParam::QWeight, Shape{NH * HS, C}, 0, InitKind::Normal, std, false);
  add(BlockParam::KWeight, Shape{NKV * HS, C}, kv_split, InitKind::Normal, std, kv_rep);
  add(BlockParam::VWeight, Shape{NKV * HS, C}, kv_split, InitKind::Normal, std, kv_rep);
  if (c.qkv_bias) {
    add(BlockParam::QBias, Shape{NH * HS}, 0, InitKind::Zeros, 0.f, false);
    add(BlockParam::KBias, Shape{NKV * HS}, kv_split, InitKind::Zeros, 0.f, kv_rep);
    add(BlockParam::VBias, Shape{NKV * HS}, kv_split, InitKind::Zeros, 0.f, kv_rep);
  }
  add(BlockParam::OWeight, Shape{C, NH * HS}, 1, InitKind::Normal, std_res, false);
  if (c.linear_bias) add(BlockParam::OBias, Shape{C}, -1, InitKind::Zeros, 0.f, sp);
  norm(BlockParam::Norm2Weight, BlockParam::Norm2Bias);
  if (c.mlp == MlpKind::SwiGLU) {
    add(BlockParam::GateWeight, Shape{F, C}, 0, InitKind::Normal, std, false);
    if (c.linear_bias) add(BlockParam::GateBias, Shape{F}, 0, InitKind::Zeros, 0.f, false);
  }
  add(BlockParam::UpWeight, Shape{F, C}, 0, InitKind::Normal, std, false);
  if (c.linear_bias) add(BlockParam::UpBias, Shape{F}, 0, InitKind::Zeros, 0.f, false);
  add(BlockParam::DownWeight, Shape{C, F}, 1, InitKind::Normal, std_res, false);
  if (c.linear_bias) add(BlockParam::DownBias, Shape{C}, -1, InitKind::Zeros, 0.f, sp);
  for (ParamSpec& x : v) x.layer = layer;
  return v;
}

Block Block::bind(const BlockConfig& c, const ParamTable& t, int layer, const BlockParamNames& names) {
  const LocalDims d = c.local(t.tp());
  auto n = [&](BlockParam r) { return names(layer, r); };
  auto lin = [&](BlockParam w, BlockParam b, bool bias) { return Linear::bind(t, n(w), bias ? n(b) : ""); };
  Block blk;
  blk.ln1 = Norm::bind(t, c.norm, c.norm_eps, n(BlockParam::Norm1Weight), n(BlockParam::Norm1Bias));
  blk.ln2 = Norm::bind(t, c.norm, c.norm_eps, n(BlockParam::Norm2Weight), n(BlockParam::Norm2Bias));
  Attention& a = blk.attn;
  a.q = lin(BlockParam::QWeight, BlockParam::QBias, c.qkv_bias);
  a.k = lin(BlockParam::KWeight, BlockParam::KBias, c.qkv_bias);
  a.v = lin(BlockParam::VWeight, BlockParam::VBias, c.qkv_bias);
  a.o = lin(BlockParam::OWeight, BlockParam::OBias, c.linear_bias);
  if (d.kv_replicated) {  // this rank's query heads all use one KV head: its rows
    const int64_t j = d.kv_head(t.tp_rank());
    a.k = a.k.rows(j * c.head_dim, (j + 1) * c.head_dim);
    a.v = a.v.rows(j * c.head_dim, (j + 1) * c.head_dim);
  }
  a.hs = c.head_dim;
  a.nh_local = d.NHl;
  a.nkv_local = d.NKVl;
  a.causal = c.causal;
  a.rope = c.rope;
  a.rope_theta = c.rope_theta;
  blk.mlp.kind = c.mlp;
  if (c.mlp == MlpKind::SwiGLU) blk.mlp.gate = lin(BlockParam::GateWeight, BlockParam::GateBias, c.linear_bias);
  blk.mlp.up = lin(BlockParam::UpWeight, BlockParam::UpBias, c.linear_bias);
  blk.mlp.down = lin(BlockParam::DownWeight, BlockParam::DownBias, c.linear_bias);
  return blk;
}

void Block::forward(TpContext& ctx, const PackedSeqs& seq, const Tensor& h_in, const Tensor& h_out,
                    const BlockActs& a, const AttentionCore& c, const Scratch& sc) const {
  Stream& s = ctx.stream;
  ln1.forward(s, a.ln1, a.ln1_mean, a.ln1_rstd, h_in);
  attn.forward(ctx, seq, a.ln1, sc.y, a.attn, c, sc);
  add(s, a.h_mid, h_in, sc.y);
  round_act(s, a.h_mid, attn.o.bf16());  // the residual stream is bf16 too (docs/training.md, "Numerics")
  ln2.forward(s, a.ln2, a.ln2_mean, a.ln2_rstd, a.h_mid);
  mlp.forward(ctx, a.ln2, sc.y, a.mlp, sc);
  add(s, h_out, a.h_mid, sc.y);
  round_act(s, h_out, attn.o.bf16());
}

void Block::decode(TpContext& ctx, const DecodeRows& rows, const Tensor& h, const BlockActs& a, const Tensor& att,
                   const Scratch& sc, const Tensor& k_cache, const Tensor& v_cache) const {
  Stream& s = ctx.stream;
  ln1.forward(s, a.ln1, a.ln1_mean, a.ln1_rstd, h);
  attn.decode(ctx, rows, a.ln1, sc.y, a.attn, att, sc, k_cache, v_cache);
  add(s, a.h_mid, h, sc.y);
  round_act(s, a.h_mid, attn.o.bf16());
  ln2.forward(s, a.ln2, a.ln2_mean, a.ln2_rstd, a.h_mid);
  mlp.forward(ctx, a.ln2, sc.y, a.mlp, sc);
  add(s, h, a.h_mid, sc.y);  // h_in is not read after h_mid: the update is in place
  round_act(s, h, attn.o.bf16());
}

void Block::backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres, const Tensor& h_in,
                     const BlockActs& a, const AttentionCore& c, const Scratch& sc) const {
  Stream& s = ctx.stream;
  // MLP branch: dres = dL/dh_out = dL/dh_mid (identity path) + branch.
  mlp.backward(ctx, sc.dnorm, dres, a.mlp, sc);
  ln2.backward(s, sc.dtmp, sc.dnorm, a.h_mid, a.ln2_mean, a.ln2_rstd);
  accumulate(s, dres, sc.dtmp, 1.f);
  // Attention branch.
  attn.backward(ctx, seq, sc.dnorm, dres, a.attn, c, sc);
  ln1.backward(s, sc.dtmp, sc.dnorm, h_in, a.ln1_mean, a.ln1_rstd);
  accumulate(s, dres, sc.dtmp, 1.f);
}

}  // namespace vlm
