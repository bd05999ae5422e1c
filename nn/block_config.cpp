// BlockConfig: local dimensions and invariants; see block_config.h.
#include "nn/block_config.h"

#include "base/error.h"

namespace vlm {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

LocalDims BlockConfig::local(int tp) const {
  check(tp);
  LocalDims d;
  d.NHl = n_heads / tp;
  d.kv_replicated = n_kv_heads < tp;
  d.NKVl = d.kv_replicated ? 1 : n_kv_heads / tp;
  d.Fl = d_ff / tp;
  d.q_per_kv = n_heads / n_kv_heads;
  return d;
}

void BlockConfig::check(int tp) const {
  VLM_ASSERT(tp >= 1 && C > 0 && n_heads > 0 && n_kv_heads > 0 && head_dim > 0 && d_ff > 0, "block config: C=", C,
             " NH=", n_heads, " NKV=", n_kv_heads, " HS=", head_dim, " F=", d_ff, " tp=", tp);
  VLM_ASSERT(n_heads % n_kv_heads == 0, "block config: NH=", n_heads, " not a multiple of NKV=", n_kv_heads);
  VLM_ASSERT(n_heads % tp == 0 && d_ff % tp == 0, "block config: NH=", n_heads, " or F=", d_ff,
             " not divisible by tp=", tp);
  VLM_ASSERT(n_kv_heads % tp == 0 || tp % n_kv_heads == 0, "block config: NKV=", n_kv_heads,
             " neither a multiple nor a divisor of tp=", tp);
  VLM_ASSERT(!rope || head_dim % 2 == 0, "block config: RoPE needs an even head size, got ", head_dim);
}

}  // namespace vlm
