// Tensor-parallel self-attention over packed variable-length sequences.
// Heads are split across the TP group: rank r computes query heads
// [r*NHl, (r+1)*NHl), NHl = NH/tp. Grouped-query attention: with NKV >= tp the KV heads
// are split too (NKVl = NKV/tp, the group structure is kept per rank); with NKV < tp
// the KV projections are replicated and rank r uses only KV head LocalDims::kv_head(r)
// (NKVl = 1; its rows of the k/v weights), so its weight gradient is partial per rank
// (tp_partial_grad).
//   x [Ts,C] -> column region -> q [T,NHl,HS], k/v [T,NKVl,HS] (+bias) -> RoPE (optional;
//   positions restart per sample; q and k in one op, rope_qk) -> varlen attention, causal or bidirectional (never
//   crosses samples, cu_seqlens) -> att [T,NHl,HS] -> row-parallel output projection
//   -> y [Ts,C] (+bias once).
// Decoding with a KV cache (decode, nn/kv_cache.h): the same layers on N new rows, one
// per sequence, whose k/v are written into the cache before the attention reads it.
// Gradients follow the rule of nn/context.h.
#pragma once
#include "nn/activations.h"
#include "nn/context.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"

namespace vlm {

// The packed micro-batch as the attention sees it (device tensors).
struct PackedSeqs {
  Tensor cu_seqlens;  // [B+1] i32
  int max_seqlen = 0;
  Tensor positions;   // [T] i32 (restart at 0 for every sample); only read with RoPE
};

struct Attention {
  Linear q, k, v, o;  // local shards (k/v: this rank's KV rows when replicated)
  int64_t nh_local = 0, nkv_local = 0, hs = 0;
  bool causal = true;  // token i sees j <= i of its sample; false: the whole sample
  bool rope = false;
  float rope_theta = 10000.f;

  void forward(TpContext& ctx, const PackedSeqs& seq, const Tensor& x, const Tensor& y, const AttentionActs& a,
               const AttentionCore& c, const Scratch& sc) const;
  // c.att, c.lse from the saved q, k, v (the "core"; selective recomputation re-runs it).
  void core_forward(Stream& s, const PackedSeqs& seq, const AttentionActs& a, const AttentionCore& c) const;
  // One decode step: x [N,C] (the new rows, replicated on every rank: ctx without SP)
  // -> q/k/v -> RoPE at rows.positions -> k/v into k_cache/v_cache (this layer's, at
  // rows.slots) -> attention of each row over its cached keys -> att [N,NHl,HS] ->
  // row-parallel output y [N,C]. a and sc as in forward, cut to N rows (no backward).
  void decode(TpContext& ctx, const DecodeRows& rows, const Tensor& x, const Tensor& y, const AttentionActs& a,
              const Tensor& att, const Scratch& sc, const Tensor& k_cache, const Tensor& v_cache) const;
  // dy [Ts,C] -> dx [Ts,C] (overwrite), parameter grads +=.
  void backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dx, const Tensor& dy, const AttentionActs& a,
                const AttentionCore& c, const Scratch& sc) const;
};

}  // namespace vlm
