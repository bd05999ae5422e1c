// BlockConfig: the hyper-parameters of a stack of pre-norm transformer blocks (what the
// owner's config maps onto: llm's ModelConfig::block(), the vision encoder's config),
// and LocalDims: this rank's share of them at tensor-parallel size tp, computed once.
//
// Invariants (check(tp) asserts them; owners validate their own options first, with
// messages naming those options): C, NH, HS, F > 0; NH % NKV == 0; NH % tp == 0;
// F % tp == 0; NKV % tp == 0 (KV heads split) or tp % NKV == 0 (KV heads replicated,
// each rank uses one); HS even with RoPE.
#pragma once
#include <cstdint>

#include "nn/mlp.h"
#include "nn/norm.h"

namespace vlm {

// Activation recomputation: selective = the attention core is re-run in backward from
// the saved q/k/v; full = only each block's input is kept, the block is re-run before
// its backward. Results are bitwise equal on CPU.
enum class Recompute { None, Selective, Full };
const char* recompute_name(Recompute r);

// This rank's share of a block at tensor-parallel size tp.
struct LocalDims {
  int64_t NHl = 0;   // query heads: NH / tp
  int64_t NKVl = 0;  // KV heads used: NKV / tp, or 1 when replicated
  int64_t Fl = 0;    // MLP hidden width: F / tp
  bool kv_replicated = false;  // NKV < tp: every rank holds all KV heads and uses one
  int64_t q_per_kv = 1;        // NH / NKV (query heads per KV head)
  // The KV head rank r uses when replicated: its query heads [r*NHl, (r+1)*NHl) all
  // map onto it.
  int64_t kv_head(int rank) const { return int64_t(rank) * NHl / q_per_kv; }
};

struct BlockConfig {
  int64_t C = 0;         // width (residual stream)
  int n_heads = 0;       // NH
  int n_kv_heads = 0;    // NKV (= NH without grouped-query attention)
  int64_t head_dim = 0;  // HS; q/k/v project C -> NH*HS / NKV*HS
  int64_t d_ff = 0;      // F, the MLP hidden width
  NormKind norm = NormKind::LayerNorm;
  float norm_eps = 1e-5f;
  MlpKind mlp = MlpKind::GeluTanh;
  bool qkv_bias = false;     // bias on q/k/v
  bool linear_bias = false;  // bias on the attention output and the MLP linears
  bool rope = false;         // rotary embedding of q and k (HF rotate-half)
  float rope_theta = 10000.f;
  bool causal = true;        // false: bidirectional attention inside each sample
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;  // norms and residuals on sequence shards (tp > 1)

  LocalDims local(int tp) const;
  // SP in effect at this tp (the flag is ignored at tp = 1).
  bool seq_parallel(int tp) const { return sequence_parallel && tp > 1; }
  void check(int tp) const;  // aborts (internal error) when an invariant above fails
};

}  // namespace vlm
