// The backbone alone at a benchmark shape (plan/plan_llm.h).
#include "plan/plan_llm.h"

#include "llm/flops.h"

namespace vlm {

LlmStepPrediction predict_llm_step(const ModelConfig& m, int64_t batch, int64_t seq, const GpuSpec& g, bool bf16,
                                   const SustainedFractions& f) {
  LlmStepPrediction p;
  const double T = double(batch) * double(seq);
  const Flops fl = backbone_flops(m, 1, 3.0, T, double(batch), double(seq));
  p.gemm_flops = fl.gemm, p.attention_flops = fl.attention, p.model_flops = fl.model;
  // Memory traffic (plan_llm.h): per token and layer, the forward's non-matmul ops read
  // and write the widths below once; the backward moves about twice as much.
  const double C = double(m.d_model), F = double(m.d_ff), HS = double(m.head_dim());
  const double NH = double(m.n_heads), NKV = double(m.kv_heads());
  const double qk = (NH + NKV) * HS;
  const double mlp = m.is_llama() ? 3 : 2;  // SwiGLU: gate, up, down; GELU: up, down
  const double act = bf16 ? 2 : 4;
  const double per_layer = 2 * (2 * C)   // two norms: read, write
                           + 2 * (3 * C)  // two residual adds: read two, write one
                           + 2 * qk       // RoPE on q and k: read, write
                           + (mlp == 3 ? 3 : 2) * F;  // the MLP's activation: read two (SwiGLU) or one, write
  const double V = double(m.vocab_size);
  const double logits = 4 * V * 4;  // f32 logits written and read, their gradient written and read
  const double params = double(m.n_layers) * (2 * C * C + 2 * C * NKV * HS + mlp * C * F) + 2 * V * C;
  const double adamw = params * (28 + (bf16 ? 6 : 0));  // f32 p, g, m, v; the bf16 working copy
  p.memory_bytes = T * (3 * per_layer * act * double(m.n_layers) + logits) + adamw;
  const double peak = (bf16 ? g.bf16_tflops : g.fp32_tflops) * 1e12;
  p.peak_flops = peak;
  p.gemm_s = p.gemm_flops / (f.gemm * peak);
  p.attention_s = p.attention_flops / (f.attention * peak);
  p.memory_s = p.memory_bytes / (f.memory * g.hbm_gbs * 1e9);
  p.mfu = p.model_flops / (peak * p.total_s());
  return p;
}

}  // namespace vlm
