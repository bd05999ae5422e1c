// Image pipeline used by loader threads and converters (OpenCV):
// bytes -> RGB uint8 -> letterbox to S x S.
// Invariants: every function returns CV_8UC3 in RGB order or an empty Mat; decoding
// never throws (an undecodable image is an empty Mat, the caller counts and skips it).
// Grey images are replicated to 3 channels; an alpha channel is composited over the
// background value (so transparent stamps sit on the same colour as the letterbox pad).
#pragma once
#include <cstddef>
#include <cstdint>
#include <opencv2/core.hpp>

namespace vlm {

// PNG/JPEG/... bytes -> RGB, or empty on failure.
cv::Mat decode_rgb(const uint8_t* data, size_t n, uint8_t background = 0);
// Raw HWC pixels (c = 1, 3 or 4; channel order RGB[A]) -> RGB (a copy).
cv::Mat raw_to_rgb(const uint8_t* pixels, int h, int w, int c, uint8_t background = 0);
// Scales the longer side to S keeping the aspect ratio (INTER_AREA when shrinking,
// INTER_LINEAR when enlarging), centres it on an S x S canvas filled with background.
// An image already S x S is returned as is.
cv::Mat letterbox(const cv::Mat& rgb, int S, uint8_t background = 0);
// The same into dst, an S x S CV_8UC3 Mat the caller owns (e.g. a header over a batch
// buffer): no allocation besides OpenCV's resize scratch, and no copy of the result.
void letterbox_into(const cv::Mat& rgb, int S, uint8_t background, cv::Mat& dst);

}  // namespace vlm
