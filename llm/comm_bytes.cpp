// The backbone's TP bytes of a training step (llm/comm_bytes.h).
#include "llm/comm_bytes.h"

namespace vlm {

CommCounters backbone_tp_bytes(const ModelConfig& m, int tp_size, int64_t T, int64_t act, int64_t M, bool trains,
                               int64_t layer_finalizes) {
  CommCounters c;
  if (tp_size == 1) return c;
  auto add = [&](CollKind k, int64_t bytes) { c.bytes[size_t(k)] += uint64_t(bytes); };
  const int64_t tp = tp_size, C = m.d_model, L = m.n_layers, HS = m.head_dim(), NKV = m.kv_heads(), Ts = T / tp;
  const bool sp = m.block().seq_parallel(tp_size), full = m.recompute == Recompute::Full;
  // E + 4L + 1 (+ 2L recomputed forwards); the embedding's (E) in f32, the others in act.
  const int64_t blocks = 4 * L + 1 + (full ? 2 * L : 0), wire = 4 + act * blocks;
  if (!sp) {
    add(CollKind::AllReduce, M * (wire * T * C + 4 * 3 * T));
  } else {
    add(CollKind::ReduceScatter, M * wire * T * C);
    add(CollKind::AllGather, M * wire * Ts * C);
    add(CollKind::AllReduce, M * 4 * 3 * T);
  }
  if (trains) {  // per layer (R, S's layer part) and outside the layers (S's final norm, positions)
    const int64_t R = NKV < tp ? L * (2 * NKV * HS * C + (m.has_qkv_bias() ? 2 * NKV * HS : 0)) : 0;
    const int64_t S_layers = !sp ? 0 : m.is_llama() ? L * 2 * C : L * 6 * C;
    const int64_t S_rest = !sp ? 0 : m.is_llama() ? C : 2 * C + m.max_pos * C;
    add(CollKind::AllReduce, 4 * (layer_finalizes * (R + S_layers) + S_rest));
  }
  return c;
}

}  // namespace vlm
