// Choosing the next token of a decoded sequence from its row of full logits [V] on the
// host (gathered over the TP group: Backbone::gather_step_logits):
//   greedy (temperature 0): the first largest logit (std::max_element's choice, so the
//     KV-cache decoder and the full-recompute reference VlmModel::greedy_next agree);
//   sampled: softmax(logits / temperature) restricted to the top_k largest logits
//     (0 = the whole vocabulary; ties keep the lower id), drawn by inverse CDF with a
//     uniform u in [0, 1) from sample_uniform(seed, sequence, step): a pure function,
//     so every TP rank draws the same token and a run is reproducible from its seed.
// Padding columns of the vocabulary never reach this code (gather drops them).
#pragma once
#include <cstdint>
#include <vector>

namespace vlm {

struct DecodeOptions {
  float temperature = 0.f;  // 0 = greedy; > 0 = sampling
  int top_k = 0;            // sampling among the top_k largest logits; 0 = all
  uint64_t seed = 0;        // sampling seed
  bool greedy() const { return temperature <= 0.f; }
};

// A uniform double in [0, 1) from (seed, sequence, step) (splitmix64 counter hash).
double sample_uniform(uint64_t seed, uint64_t sequence, uint64_t step);

// The chosen token of `logits` [V] (V >= 1). `order` and `weights` are scratch kept by
// the caller (no allocation once they have grown to V).
int32_t choose_token(const float* logits, int64_t V, const DecodeOptions& o, double u, std::vector<int32_t>& order,
                     std::vector<double>& weights);

}  // namespace vlm
