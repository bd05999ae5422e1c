// Greedy and top-k / temperature token choice (llm/sampling.h).
#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "base/splitmix.h"

namespace vlm {

double sample_uniform(uint64_t seed, uint64_t sequence, uint64_t step) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ sequence) ^ step);
  return double(h >> 11) * (1.0 / 9007199254740992.0);
}

int32_t choose_token(const float* logits, int64_t V, const DecodeOptions& o, double u, std::vector<int32_t>& order,
                     std::vector<double>& weights) {
  VLM_ASSERT(V >= 1 && o.top_k >= 0 && u >= 0.0 && u < 1.0, "choose_token: V=", V, " top_k=", o.top_k, " u=", u);
  if (o.greedy()) return int32_t(std::max_element(logits, logits + V) - logits);
  const int64_t k = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
  order.resize(size_t(V));
  std::iota(order.begin(), order.end(), 0);
  // The k largest first, larger logit first, lower id first among equals.
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  weights.resize(size_t(k));
  const double top = double(logits[order[0]]), t = double(o.temperature);
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += (weights[size_t(i)] = std::exp((double(logits[order[size_t(i)]]) - top) / t));
  const double target = u * sum;
  double acc = 0;
  for (int64_t i = 0; i < k; ++i)
    if ((acc += weights[size_t(i)]) > target) return order[size_t(i)];
  return order[size_t(k - 1)];  // u * sum rounded up to the total
}

}  // namespace vlm
