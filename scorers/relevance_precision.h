// Relevance precision: how well a relevance map r [G*G] points at the box a question is
// about (docs/scorers.md, "Measuring what the scorers learn"; `vlm ablate` and `vlm train`'s metrics).
// For an image whose box B (pixels of the S x S image, x0 <= x < x1, y0 <= y < y1) holds
// the centres of k >= 1 of the G x G cells (cell (x, y) has its centre at ((x + 0.5) p,
// (y + 0.5) p), p = S / G), the k cells of highest r (ties: lower raster index first)
// are taken;
//   precision = (sum over images of those inside B) / (sum over images of k).
// Images whose box holds no cell centre are left out. The chance level is the same
// figure for k cells drawn uniformly at random: (sum of k * k / G^2) / (sum of k).
#pragma once
#include <cstdint>

namespace vlm {

struct RelevancePrecision {
  int64_t boxed = 0;               // images counted
  double top_cells = 0, hits = 0;  // sum of k, sum of top-k cells inside the box
  double chance_hits = 0;          // sum of k * k / G^2
  double precision() const { return top_cells > 0 ? hits / top_cells : 0.0; }
  double chance() const { return top_cells > 0 ? chance_hits / top_cells : 0.0; }
};

// Adds one image (r [G*G], box [4] in pixels of the S x S image) to c when its box holds
// a cell centre.
void add_relevance_precision(const float* r, int G, int S, const float box[4], RelevancePrecision& c);

}  // namespace vlm
