// Helpers of the llm/ tests: tiny model configs and a deterministic packed batch
// (communicators and error metrics: tests/support).
#pragma once
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/backbone.h"
#include "llm/param_specs.h"
#include "tests/support/metrics.h"
#include "tests/support/mpi.h"

namespace vlm::test {

// Tiny models that split over tp = 1, 2, 4, 8.
inline ModelConfig tiny_config(ModelFamily f) {
  ModelConfig c;
  c.family = f;
  c.vocab_size = 200;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 8;
  c.n_kv_heads = f == ModelFamily::Llama ? 2 : 0;  // llama: KV split at tp 2, replicated at 4, 8
  c.d_ff = 64;
  c.max_pos = 32;
  c.qkv_bias = f == ModelFamily::Llama;
  c.tied_embeddings = f == ModelFamily::GPT2;
  c.init_std = 0.2f;  // large enough that the gradients are not tiny
  return c;
}

// 3 samples, T = 24 (a multiple of 8 for SP), ids and targets from a fixed LCG, some
// targets ignored.
struct HostBatch {
  std::vector<int32_t> cu{0, 7, 16, 24};
  std::vector<int32_t> ids, targets;
  std::vector<float> embeddings;  // [T, C] for the embeddings path
};
inline HostBatch tiny_batch(int64_t vocab, int64_t C) {
  HostBatch b;
  uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  };
  const int T = b.cu.back();
  for (int t = 0; t < T; ++t) {
    b.ids.push_back(int32_t(next() % uint32_t(vocab)));
    b.targets.push_back(t % 5 == 3 ? kIgnoreIndex : int32_t(next() % uint32_t(vocab)));
  }
  for (int64_t i = 0; i < T * C; ++i) b.embeddings.push_back(float(int(next() % 2001) - 1000) / 1000.f);
  return b;
}

}  // namespace vlm::test
