// Relevance precision: how well a relevance map r [G*G] points at the box a question is
// about (docs/scorers.md, "Measuring what the scorers learn"; `vlm ablate` and `vlm train`'s metrics).
// For an image whose box B (pixels of the S x S image, x0 <= x < x1, y0 <= y < y1) holds
// the centres of k >= 1 of the G x G cells (cell (x, y) has its centre at ((x + 0.5) p,
// (y + 0.5) p), p = S / G), the k cells of highest r (ties: lower raster index first)
// are taken;
//   precision = (sum over images of those inside B) / (sum over images of k).
// Images whose box holds no cell centre are left out. The chance level is the same
// figure for k cells drawn uniformly at random: (sum of k * k / G^2) / (sum of k).
//
// Detail precision: how much of that box the level-of-detail allocation shows at full
// detail (the allocation itself, where relevance precision is the map's). For an image
// whose box holds the centres of k >= 1 cells, those of the k cells whose region is at
// the finest level (ImageLod::per_level's last: one token per cell) are counted;
//   detail = (sum over images of those at the finest level) / (sum of k).
// It is the policy's figure: a random allocation that details m of the n regions has an
// expected detail of m / n whatever its relevance, and full detail has 1.
#pragma once
#include <cstdint>

#include "scorers/lod_allocator.h"

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

struct DetailPrecision {
  double box_cells = 0, detailed = 0;  // sum of k, sum of those at the finest level
  double detail() const { return box_cells > 0 ? detailed / box_cells : 0.0; }
};

// Adds one image (its allocation `lod` on the G x G grid of R x R regions, box [4] in
// pixels of the S x S image) to c when its box holds a cell centre. Returns whether every
// one of its box's cells is at the finest level (false for a box without a cell centre).
bool add_detail_precision(const ImageLod& lod, int G, int R, int S, const float box[4], DetailPrecision& c);

}  // namespace vlm
