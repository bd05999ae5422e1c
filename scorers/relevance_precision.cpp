// Relevance precision (scorers/relevance_precision.h).
#include "scorers/relevance_precision.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace vlm {

void add_relevance_precision(const float* r, int G, int S, const float box[4], RelevancePrecision& c) {
  const double p = double(S) / G;
  const int64_t N = int64_t(G) * G;
  std::vector<uint8_t> inside(static_cast<size_t>(N), 0);
  int64_t k = 0;
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x) {
      const double cx = (x + 0.5) * p, cy = (y + 0.5) * p;
      const bool in = cx >= box[0] && cx < box[2] && cy >= box[1] && cy < box[3];
      inside[size_t(y * G + x)] = in;
      k += in;
    }
  if (k == 0) return;
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r[a] > r[b]; });
  int64_t hits = 0;
  for (int64_t i = 0; i < k; ++i) hits += inside[size_t(order[size_t(i)])];
  c.boxed += 1, c.top_cells += double(k), c.hits += double(hits);
  c.chance_hits += double(k) * double(k) / double(N);
}

}  // namespace vlm
