// Relevance precision (scorers/relevance_precision.h).
#include "scorers/relevance_precision.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace vlm {

namespace {

// inside[y * G + x] = 1 when cell (x, y)'s centre lies in the box; returns their count k.
int64_t box_cells(int G, int S, const float box[4], std::vector<uint8_t>& inside) {
  const double p = double(S) / G;
  inside.assign(size_t(G) * size_t(G), 0);
  int64_t k = 0;
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x) {
      const double cx = (x + 0.5) * p, cy = (y + 0.5) * p;
      const bool in = cx >= box[0] && cx < box[2] && cy >= box[1] && cy < box[3];
      inside[size_t(y * G + x)] = in;
      k += in;
    }
  return k;
}

}  // namespace

void add_relevance_precision(const float* r, int G, int S, const float box[4], RelevancePrecision& c) {
  const int64_t N = int64_t(G) * G;
  std::vector<uint8_t> inside;
  const int64_t k = box_cells(G, S, box, inside);
  if (k == 0) return;
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r[a] > r[b]; });
  int64_t hits = 0;
  for (int64_t i = 0; i < k; ++i) hits += inside[size_t(order[size_t(i)])];
  c.boxed += 1, c.top_cells += double(k), c.hits += double(hits);
  c.chance_hits += double(k) * double(k) / double(N);
}

bool add_detail_precision(const ImageLod& lod, int G, int R, int S, const float box[4], DetailPrecision& c) {
  std::vector<uint8_t> inside;
  const int64_t k = box_cells(G, S, box, inside);
  if (k == 0) return false;
  const int finest = int(lod.per_level.size()) - 1, per_row = G / R;
  int64_t detailed = 0;
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x)
      if (inside[size_t(y * G + x)]) detailed += lod.level[size_t((y / R) * per_row + x / R)] == finest;
  c.box_cells += double(k), c.detailed += double(detailed);
  return detailed == k;
}

}  // namespace vlm
