// The relevance picture: an RGB image with its relevance heatmap (G x G cells, values
// in [0,1], OpenCV's JET colour map, blended half and half) and the level-of-detail
// grid overlaid: the boundary of every token's square (a region of R x R cells at level
// l is cut in squares of R / 2^l cells, scorers/lod_allocator.h) drawn in white.
// Plain arrays in, so that scorers/ and train/ call it without OpenCV or model types:
//   relevance [G*G] row-major, levels [(G/R)^2] per region in raster order.
// Cell (r, c) covers pixel rows [r*H/G, (r+1)*H/G) and columns [c*W/G, (c+1)*W/G).
// Used by `vlm caption` and the TensorBoard images (docs/scorers.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image/image.h"

namespace vlm {

struct RelevanceGrid {
  const float* relevance = nullptr;  // [G*G]
  int G = 0;
  const int32_t* levels = nullptr;   // [(G/R)^2], may be null (no grid drawn)
  int region = 1;                    // R
};

// The picture as packed RGB rows [H, W, 3] (H, W of `image`, at least G each).
std::vector<uint8_t> render_relevance(const ImageView& image, const RelevanceGrid& grid);
// Renders and writes it as a PNG; a path that cannot be written is a UserError naming it.
void write_relevance_png(const std::string& path, const ImageView& image, const RelevanceGrid& grid);

}  // namespace vlm
