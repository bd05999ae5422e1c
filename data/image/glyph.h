// Digits drawn as grey pictures, the items of the colour-scenes converter with
// --data.colour_classes digits (data/convert/colour_compose.h). OpenCV's Hershey fonts
// draw them (inside glyph.cpp), so the pictures need no data set and are the same on
// every machine with the same OpenCV.
// A digit in style s (kDigitStyles of them: four Hershey fonts x two stroke widths) is
// drawn white on black on a 96 x 96 canvas at font scale 2.4, cut to its non-zero
// pixels and shrunk (INTER_AREA) so that its longer side is `side` pixels: grey = the
// stroke's coverage, 0 outside the strokes.
#pragma once
#include <cstdint>
#include <vector>

namespace vlm {

inline constexpr int kDigitStyles = 8;

struct GreyPicture {
  std::vector<uint8_t> px;  // [height, width]
  int height = 0, width = 0;
};

// digit in 0..9, style in [0, kDigitStyles), side >= 1.
GreyPicture digit_picture(int digit, int style, int side);

}  // namespace vlm
