// The language backbone alone, at a benchmark shape (bench/bench_llm.cpp: `batch`
// samples of `seq` tokens, forward + backward + AdamW on one GPU): its modelled step time
// and MFU on a GPU kind, which `vlm plan --plan.llm_seq N` prints and bench_llm prints
// beside its measurement (docs/planning.md, "The backbone alone").
//  - FLOPs: the backbone's own count (llm/flops.h): the layers' matmuls (forward, input
//    gradient, weight gradient) and attention (forward and the two backward products,
//    the causal half), the output layer; model FLOPs for the MFU.
//  - Memory traffic (everything but the matmuls and attention): per token and layer,
//    the activations the ops between the matmuls read and write (norms, residual adds,
//    RoPE, the MLP's activation; their backward twice as much), the logits and their
//    gradient (f32), and AdamW's 7 f32 accesses per parameter plus the bf16 copy.
//  - Rates: the GPU's peaks (core/gpu_spec.h) times the sustained fractions below, the
//    figures a well-tuned kernel reaches at these shapes (docs/planning.md, "Sustained
//    rates"); the GPU proof's measurement checks them.
#pragma once
#include <cstdint>

#include "core/gpu_spec.h"
#include "llm/model_config.h"

namespace vlm {

// Fractions of the peaks a step's kernels sustain.
struct SustainedFractions {
  double gemm = 0.70;       // bf16 or f32 matmuls of 2k-8k sides (cuBLASLt)
  double attention = 0.35;  // fused attention, forward + backward, head size 64-128 (cuDNN)
  double memory = 0.80;     // elementwise, norm and loss kernels (of the HBM bandwidth)
};

struct LlmStepPrediction {
  double gemm_flops = 0, attention_flops = 0, model_flops = 0;  // per step
  double memory_bytes = 0;                                      // per step
  double gemm_s = 0, attention_s = 0, memory_s = 0;
  double total_s() const { return gemm_s + attention_s + memory_s; }
  double mfu = 0;  // model_flops / (peak * total_s)
  double peak_flops = 0;
};

// bf16: train.precision=bf16 (bf16 activations, matmuls at the bf16 peak); else fp32.
LlmStepPrediction predict_llm_step(const ModelConfig& m, int64_t batch, int64_t seq, const GpuSpec& g, bool bf16,
                                   const SustainedFractions& f = SustainedFractions{});

}  // namespace vlm
