// The backbone's FLOPs (llm/flops.h).
#include "llm/flops.h"

namespace vlm {

Flops backbone_flops(const ModelConfig& m, int tp_size, double passes, double tokens_run, double sequences,
                     double seq_len) {
  const double tp = tp_size, C = double(m.d_model), L = m.n_layers, HS = double(m.head_dim()), NH = m.n_heads;
  const double NKV = m.kv_heads(), F = double(m.d_ff), n = seq_len;
  const double q_o = 2 * 2 * C * NH * HS, kv = 2 * 2 * C * NKV * HS, mlp = (m.is_llama() ? 3 : 2) * 2 * C * F;
  const double layer_run = (q_o + mlp) / tp + (NKV >= tp ? kv / tp : kv / NKV), layer_model = (q_o + kv + mlp) / tp;
  const double head_run = 2 * C * double(m.padded_vocab(tp_size)) / tp, head_model = 2 * C * double(m.vocab_size) / tp;
  const double mm_run = tokens_run * (L * layer_run + head_run), mm_model = sequences * n * (L * layer_model + head_model);
  const double attn = sequences * L * 2 * n * n * NH * HS / tp;  // causal: half of QK^T and PV's 2 x 2 n^2 NH HS
  const double re_mm = m.recompute == Recompute::Full ? tokens_run * L * layer_run : 0;
  const double re_attn = m.recompute == Recompute::None ? 0 : attn;
  Flops f;
  f.gemm = passes * mm_run + re_mm;
  f.attention = 3 * attn + re_attn;
  f.model = passes * mm_model + 3 * attn;
  return f;
}

}  // namespace vlm
