// Implementation of the sprites (see sprite.h); OpenCV decodes and resizes.
#include "data/image/sprite.h"

#include <algorithm>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "base/error.h"
#include "data/image/image_pipeline.h"

namespace vlm {

static uint8_t mul255(int a, int b) { return uint8_t((a * b + 127) / 255); }

Sprite sprite_from_rgba(const uint8_t* rgba, int h, int w) {
  VLM_ASSERT(h > 0 && w > 0, "sprite_from_rgba: ", h, "x", w);
  Sprite s;
  s.height = h, s.width = w;
  s.px.resize(size_t(h) * size_t(w) * 4);
  for (size_t i = 0; i < s.px.size(); i += 4) {
    const int a = rgba[i + 3];
    for (int k = 0; k < 3; ++k) s.px[i + size_t(k)] = mul255(rgba[i + size_t(k)], a);
    s.px[i + 3] = uint8_t(a);
  }
  return s;
}

Sprite sprite_from_grey(const uint8_t* grey, int h, int w, const uint8_t tint[3]) {
  VLM_ASSERT(h > 0 && w > 0, "sprite_from_grey: ", h, "x", w);
  Sprite s;
  s.height = h, s.width = w;
  s.px.resize(size_t(h) * size_t(w) * 4);
  for (size_t i = 0; i < size_t(h) * size_t(w); ++i) {
    const int v = grey[i];
    const int a = std::min(255, 3 * v);
    const int shade = 77 + (178 * v + 127) / 255;  // (0.3 + 0.7 v / 255) * 255
    for (int k = 0; k < 3; ++k) s.px[4 * i + size_t(k)] = mul255(mul255(tint[k], shade), a);
    s.px[4 * i + 3] = uint8_t(a);
  }
  return s;
}

Sprite decode_sprite(const uint8_t* data, size_t n) {
  if (!decodable_header(data, n)) return {};
  cv::Mat m;
  try {
    const cv::Mat buf(1, int(n), CV_8U, const_cast<uint8_t*>(data));
    m = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception&) {
    return {};
  }
  if (m.empty()) return {};
  if (m.depth() == CV_16U) m.convertTo(m, CV_8U, 1.0 / 257.0);
  if (m.depth() != CV_8U) return {};
  cv::Mat rgba;
  switch (m.channels()) {  // OpenCV decodes to B, G, R[, A] (grey[, alpha] as is)
    case 1: cv::cvtColor(m, rgba, cv::COLOR_GRAY2RGBA); break;
    case 2: {
      std::vector<cv::Mat> ga;
      cv::split(m, ga);
      cv::merge(std::vector<cv::Mat>{ga[0], ga[0], ga[0], ga[1]}, rgba);
      break;
    }
    case 3: cv::cvtColor(m, rgba, cv::COLOR_BGR2RGBA); break;
    case 4: cv::cvtColor(m, rgba, cv::COLOR_BGRA2RGBA); break;
    default: return {};
  }
  if (!rgba.isContinuous()) rgba = rgba.clone();
  return sprite_from_rgba(rgba.data, rgba.rows, rgba.cols);
}

Sprite resize_sprite(const Sprite& s, int h, int w) {
  VLM_ASSERT(!s.empty() && h > 0 && w > 0, "resize_sprite: ", s.height, "x", s.width, " -> ", h, "x", w);
  Sprite out;
  out.height = h, out.width = w;
  out.px.resize(size_t(h) * size_t(w) * 4);
  const cv::Mat src(s.height, s.width, CV_8UC4, const_cast<uint8_t*>(s.px.data()));
  cv::Mat dst(h, w, CV_8UC4, out.px.data());
  const bool shrink = h <= s.height && w <= s.width;
  cv::resize(src, dst, cv::Size(w, h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  VLM_ASSERT(dst.data == out.px.data(), "resize reallocated the sprite");
  // Interpolation keeps colour <= alpha up to rounding; restore the invariant exactly.
  for (size_t i = 0; i < out.px.size(); i += 4)
    for (size_t k = 0; k < 3; ++k) out.px[i + k] = std::min(out.px[i + k], out.px[i + 3]);
  return out;
}

Sprite crop_sprite(const Sprite& s, const PixelBox& b) {
  VLM_ASSERT(!b.empty() && b.x0 >= 0 && b.y0 >= 0 && b.x1 <= s.width && b.y1 <= s.height, "crop_sprite: box [",
             b.x0, ",", b.y0, ",", b.x1, ",", b.y1, ") of a ", s.height, "x", s.width, " sprite");
  Sprite out;
  out.height = b.y1 - b.y0, out.width = b.x1 - b.x0;
  out.px.reserve(size_t(out.height) * size_t(out.width) * 4);
  for (int y = b.y0; y < b.y1; ++y) out.px.insert(out.px.end(), s.at(y, b.x0), s.at(y, b.x1 - 1) + 4);
  return out;
}

PixelBox visible_box(const Sprite& s, const uint8_t bg[3]) {
  PixelBox b{s.width, s.height, 0, 0};
  for (int y = 0; y < s.height; ++y)
    for (int x = 0; x < s.width; ++x) {
      const uint8_t* p = s.at(y, x);
      if (p[3] == 0) continue;
      bool changes = false;
      for (int k = 0; k < 3; ++k) changes |= over(p[k], p[3], bg[k]) != bg[k];
      if (!changes) continue;
      b.x0 = std::min(b.x0, x), b.y0 = std::min(b.y0, y);
      b.x1 = std::max(b.x1, x + 1), b.y1 = std::max(b.y1, y + 1);
    }
  return b.empty() ? PixelBox{} : b;
}

void composite(const Sprite& s, uint8_t* canvas, int ch, int cw, int left, int top) {
  const int y_lo = std::max(0, -top), y_hi = std::min(s.height, ch - top);
  const int x_lo = std::max(0, -left), x_hi = std::min(s.width, cw - left);
  for (int y = y_lo; y < y_hi; ++y)
    for (int x = x_lo; x < x_hi; ++x) {
      const uint8_t* p = s.at(y, x);
      if (p[3] == 0) continue;
      uint8_t* q = canvas + (size_t(top + y) * size_t(cw) + size_t(left + x)) * 3;
      for (int k = 0; k < 3; ++k) q[k] = over(p[k], p[3], q[k]);
    }
}

}  // namespace vlm
