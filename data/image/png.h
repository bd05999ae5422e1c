// PNG encoding of 8-bit pixels to memory (OpenCV inside png.cpp), e.g. for the images the
// trainer logs to TensorBoard (runlog/tb_events.h). Decoding is image_pipeline.h's.
// Invariants: the input is packed HWC (rows of width * channels bytes, no padding) in
// R, G, B[, A] order (1 channel: grey); the PNG holds the same pixels losslessly, with
// colour type grey, RGB or RGBA for 1, 3 or 4 channels.
#pragma once
#include <cstdint>
#include <string>

namespace vlm {

// PNG bytes of an h x w image with `channels` in {1, 3, 4}.
std::string encode_png(const uint8_t* pixels, int h, int w, int channels);

}  // namespace vlm
