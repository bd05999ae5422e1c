// The 13-channel texture array: per-cell statistics of an RGB image on a G x G grid.
// Output layout [13, G, G] float, channel order (fixed; indices below):
//   0-2  R, G, B        mean of the cell, sRGB in [0,1]
//   3-5  L*, a*, b*     CIE Lab (D65), per pixel from sRGB, then mean of the cell
//   6-8  gx, gy, |g|    3x3 Sobel on luma Y = 0.299R + 0.587G + 0.114B (Y in [0,1]),
//                       computed at the working resolution (border replicated), cell mean
//   9-10 y, x           cell centre in [0,1]: ((row + 0.5) / G, (col + 0.5) / G)
//   11   eccentricity   distance of the cell centre from (0.5, 0.5) divided by sqrt(0.5)
//                       (1 at the image corners, 0 at the centre)
//   12   contrast       standard deviation (population) of luma over the cell's pixels
// Cells: pixel (y, x) belongs to cell (y*G/H, x*G/W) (integer division), i.e. cell (r, c)
// covers rows [ceil(r*H/G), ceil((r+1)*H/G)) and columns [ceil(c*W/G), ceil((c+1)*W/G)),
// so every pixel belongs to exactly one cell; requires H, W >= G.
// Normalisation (TextureOptions::normalize, on by default), per image:
//   appearance channels 0-8 and 12: v' = (v - mean) / sqrt(var + eps^2), mean and var
//   over the G*G cells of this image, after first dividing each channel by its nominal
//   range (1 for RGB and luma stats, 100 for L*, 128 for a* and b*, 4 for gx and gy,
//   4*sqrt(2) for |g|) so that one eps (default 0.05, i.e. 5% of the range) means the
//   same for every channel: a nearly flat channel stays near 0 instead of amplifying
//   noise to unit variance.
//   position channels 9-11 are left as they are: identical for every image, their
//   absolute values are the information (standardising them would be a constant affine
//   map, and would hide that the centre is 0.5).
#pragma once
#include <vector>

#include "core/texture_channels.h"
#include "data/image/image.h"

namespace vlm {

enum TextureChannel : int {
  kTexR = 0, kTexG, kTexB, kTexL, kTexA, kTexLabB, kTexGx, kTexGy, kTexGmag,
  kTexY, kTexX, kTexEcc, kTexContrast
};

struct TextureOptions {
  bool normalize = true;
  float eps = 0.05f;
};

// rgb: H x W RGB (image.h), H, W >= G >= 1. Writes 13*G*G floats to out ([13,G,G]).
void compute_texture(const ImageView& rgb, int G, float* out, const TextureOptions& opt = {});
std::vector<float> compute_texture(const ImageView& rgb, int G, const TextureOptions& opt = {});

const char* texture_channel_name(int c);

}  // namespace vlm
