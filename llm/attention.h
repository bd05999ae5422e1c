// Tensor-parallel self-attention over packed variable-length sequences.
// Heads are split across the TP group: rank r computes query heads
// [r*NHl, (r+1)*NHl), NHl = NH/tp. Grouped-query attention: with NKV >= tp the KV heads
// are split too (NKVl = NKV/tp, the group structure is kept per rank); with NKV < tp
// the KV projections are replicated and rank r uses only KV head r*NHl/(NH/NKV)
// (NKVl = 1; its rows of k_proj/v_proj), so its weight gradient is partial per rank and
// all-reduced by Backbone::finalize_grads.
//   x [Ts,C] -> column region -> q [T,NHl,HS], k/v [T,NKVl,HS] (+bias) -> RoPE (llama,
//   positions restart per sample) -> causal varlen attention (never crosses samples,
//   cu_seqlens) -> att [T,NHl,HS] -> row-parallel o_proj -> y [Ts,C] (+bias once).
// Gradient rule: parameter grads += ; dx = (overwrite).
#pragma once
#include "llm/activations.h"
#include "llm/context.h"
#include "llm/linear_parallel.h"

namespace vlm {

// The packed micro-batch as the attention sees it (device tensors).
struct PackedSeqs {
  Tensor cu_seqlens;  // [B+1] i32
  int max_seqlen = 0;
  Tensor positions;   // [T] i32 (restart at 0 for every sample)
};

struct Attention {
  Linear q, k, v, o;  // local shards (k/v: this rank's KV rows when replicated)
  int64_t nh_local = 0, nkv_local = 0, hs = 0;
  bool rope = false;
  float rope_theta = 10000.f;

  void forward(LlmContext& ctx, const PackedSeqs& seq, const Tensor& x, const Tensor& y, const AttentionActs& a,
               const Scratch& sc) const;
  // att, lse from the saved q, k, v (the "core"; selective recomputation re-runs it).
  void core_forward(Stream& s, const PackedSeqs& seq, const AttentionActs& a) const;
  // dy [Ts,C] -> dx [Ts,C] (overwrite), parameter grads +=.
  void backward(LlmContext& ctx, const PackedSeqs& seq, const Tensor& dx, const Tensor& dy, const AttentionActs& a,
                const Scratch& sc) const;
};

}  // namespace vlm
