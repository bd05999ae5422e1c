// The FLOPs of the backbone (nn/flops.h) for a micro-batch of packed samples, on one rank
// of a TP group of size tp. Per token: per layer q, o (NH heads), k, v (NKV heads) and the
// MLP, then the output layer; heads and MLP columns are split over tp, and with NKV < tp
// every rank projects the one KV head it uses (nn/attention.h), which is replicated work.
// Attention per sample of n tokens: QK^T and PV, the causal half of 2 x 2 n^2 NH HS,
// counted at the samples' mean length (samples of different lengths run
// sum(n_i^2) >= B mean(n)^2). Passes: the layers' products run `passes` times (forward,
// input gradient, weight gradient when the backbone trains), attention three times;
// model.recompute adds a forward of the layers (full) or of attention (selective, full).
// Executed FLOPs count `tokens_run` rows (the sequence-parallel padding included) and
// the vocabulary's padding columns; model FLOPs neither.
#pragma once
#include <cstdint>

#include "llm/model_config.h"
#include "nn/flops.h"

namespace vlm {

// `sequences` samples of `seq_len` tokens on average (model rows: sequences * seq_len),
// `tokens_run` rows as packed on this rank's TP group.
Flops backbone_flops(const ModelConfig& m, int tp, double passes, double tokens_run, double sequences, double seq_len);

}  // namespace vlm
