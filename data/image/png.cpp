// PNG encoding with cv::imencode (see png.h).
#include "data/image/png.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "base/error.h"

namespace vlm {

std::string encode_png(const uint8_t* pixels, int h, int w, int channels) {
  VLM_ASSERT(pixels != nullptr && h > 0 && w > 0 && (channels == 1 || channels == 3 || channels == 4),
             "encode_png: ", h, "x", w, "x", channels);
  const cv::Mat rgb(h, w, CV_8UC(channels), const_cast<uint8_t*>(pixels));
  cv::Mat bgr;  // OpenCV writes B, G, R[, A]
  if (channels == 3) cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  else if (channels == 4) cv::cvtColor(rgb, bgr, cv::COLOR_RGBA2BGRA);
  else bgr = rgb;
  std::vector<uint8_t> buf;
  // Level 1: the fastest zlib level (the trainer encodes on its logging path).
  const bool ok = cv::imencode(".png", bgr, buf, {cv::IMWRITE_PNG_COMPRESSION, 1});
  VLM_ASSERT(ok && !buf.empty(), "cv::imencode(.png) failed for ", h, "x", w, "x", channels);
  return std::string(buf.begin(), buf.end());
}

}  // namespace vlm
