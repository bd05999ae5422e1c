// Implementation of the decode / letterbox pipeline (see image_pipeline.h) with OpenCV.
#include "data/image/image_pipeline.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "base/error.h"
#include "base/file_read.h"
#include "data/image/codec_messages.h"
#include "data/storage/schema.h"

namespace vlm {

// Any depth/channel count -> 8-bit RGB; BGR(A) input as OpenCV decodes it.
static cv::Mat to_rgb8(const cv::Mat& m, bool bgr, uint8_t background) {
  cv::Mat u8;
  if (m.depth() == CV_16U) m.convertTo(u8, CV_8U, 1.0 / 257.0);
  else if (m.depth() == CV_8U) u8 = m;
  else return {};
  cv::Mat out;
  switch (u8.channels()) {
    case 1: cv::cvtColor(u8, out, cv::COLOR_GRAY2RGB); break;
    case 3: out = bgr ? cv::Mat() : u8.clone(); if (bgr) cv::cvtColor(u8, out, cv::COLOR_BGR2RGB); break;
    case 4: {
      out.create(u8.rows, u8.cols, CV_8UC3);
      const int r = bgr ? 2 : 0, b = bgr ? 0 : 2;
      for (int y = 0; y < u8.rows; ++y) {
        const uint8_t* p = u8.ptr<uint8_t>(y);
        uint8_t* q = out.ptr<uint8_t>(y);
        for (int x = 0; x < u8.cols; ++x) {
          const int a = p[4 * x + 3];
          const int src[3] = {p[4 * x + r], p[4 * x + 1], p[4 * x + b]};
          for (int k = 0; k < 3; ++k) q[3 * x + k] = uint8_t((src[k] * a + background * (255 - a) + 127) / 255);
        }
      }
      break;
    }
    default: return {};
  }
  return out;
}

// Keeps the decoder's Mat alive as the owner of the returned pixels (no copy).
static RgbImage own(cv::Mat m) {
  if (m.empty()) return {};
  VLM_ASSERT(m.type() == CV_8UC3, "the pipeline produces CV_8UC3");
  auto mat = std::make_shared<cv::Mat>(std::move(m));
  return {std::shared_ptr<const uint8_t>(mat, mat->data), mat->rows, mat->cols, mat->step};
}

// A Mat header over a view's pixels (no copy; the view's owner keeps them alive).
static cv::Mat as_mat(const ImageView& v) {
  return cv::Mat(v.height, v.width, CV_8UC3, const_cast<uint8_t*>(v.data), v.stride);
}

namespace {

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// Whether the PNG's chunks (length, type, data, CRC) are all there up to IEND, each
// with the CRC of its type and data, and its IDAT chunks hold enough compressed bytes
// for the rows IHDR declares (deflate expands at most 1032:1): a cut, damaged or
// inflated file is refused here, before libpng would print its complaint to stderr.
bool png_chunks_sound(const uint8_t* p, size_t n, uint64_t w, uint64_t h) {
  uint64_t idat = 0;
  for (size_t at = 8; at + 12 <= n;) {
    const size_t len = be32(p + at);
    if (len > n - at - 12) return false;
    const uint8_t* type = p + at + 4;
    if (crc32(crc32(0L, Z_NULL, 0), type, uInt(len + 4)) != be32(type + 4 + len)) return false;
    if (std::equal(type, type + 4, "IDAT")) idat += len;
    if (std::equal(type, type + 4, "IEND")) {
      const uint64_t bit_depth = p[24];  // IHDR's; rows of at least one sample of that depth
      const uint64_t least_raw = h * (1 + (w * bit_depth + 7) / 8);
      return idat * 1032 >= least_raw;
    }
    at += 12 + len;
  }
  return false;
}

// Width and height from a PNG's IHDR or a JPEG's first SOF marker; false when the bytes
// are neither, so no other decoder of OpenCV ever runs, or are a PNG whose chunks are not
// sound or a JPEG without its EOI after the first scan (a cut file).
bool png_or_jpeg_size(const uint8_t* p, size_t n, uint64_t* w, uint64_t* h) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n >= 24 && std::equal(kPng, kPng + 8, p)) {
    if (!std::equal(p + 12, p + 16, "IHDR")) return false;
    *w = be32(p + 16), *h = be32(p + 20);
    return png_chunks_sound(p, n, *w, *h);
  }
  if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) return false;
  bool sof = false;
  for (size_t i = 2; i + 4 <= n;) {
    if (p[i] != 0xFF) return false;
    const uint8_t m = p[i + 1];
    if (m == 0xFF) { ++i; continue; }                                           // fill byte
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) { i += 2; continue; }           // no length
    if (m == 0xD9) return false;                                               // EOI before a scan
    const size_t len = size_t(p[i + 2]) << 8 | p[i + 3];
    if (len < 2) return false;
    if (m == 0xDA) {  // the first scan: a whole file has an EOI after it (entropy data never holds FF D9)
      if (!sof || len > n - i - 2) return false;
      const uint8_t eoi[2] = {0xFF, 0xD9};
      return std::search(p + i + 2 + len, p + n, eoi, eoi + 2) != p + n;
    }
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {     // SOFn
      if (i + 9 > n) return false;
      *h = uint64_t(p[i + 5]) << 8 | p[i + 6], *w = uint64_t(p[i + 7]) << 8 | p[i + 8];
      sof = true;
    }
    i += 2 + len;
  }
  return false;
}

}  // namespace

bool decodable_header(const uint8_t* data, size_t n) {
  if (data == nullptr || n == 0 || n > size_t(INT32_MAX)) return false;
  uint64_t w = 0, h = 0;
  return png_or_jpeg_size(data, n, &w, &h) && w > 0 && h > 0 && w <= kMaxDecodeSide && h <= kMaxDecodeSide &&
         w * h <= kMaxDecodePixels;
}

RgbImage decode_rgb(const uint8_t* data, size_t n, uint8_t background) {
  if (!decodable_header(data, n)) return {};
  try {
    const cv::Mat buf(1, int(n), CV_8U, const_cast<uint8_t*>(data));
    // The image libraries print nothing; a libjpeg warning (corrupt data, which OpenCV
    // would return as an image) refuses the image (data/image/codec_messages.h).
    const int64_t warnings = jpeg_warnings_on_this_thread();
    cv::Mat m = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
    if (m.empty() || jpeg_warnings_on_this_thread() != warnings) return {};
    return own(to_rgb8(m, true, background));
  } catch (const cv::Exception&) {
    return {};
  }
}

RgbImage read_rgb_file(const std::string& path, std::string_view option) {
  const std::string bytes = read_file_bounded(path, uint64_t(schema::kMaxImageBytes), "image");
  RgbImage rgb = decode_rgb(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  VLM_REQUIRE(!rgb.empty(), option, " ", path, ": not a decodable PNG or JPEG image (a complete file, at most ", kMaxDecodeSide,
              " pixels per side and ", kMaxDecodePixels >> 20, " megapixels)");
  return rgb;
}

RgbImage raw_to_rgb(const uint8_t* pixels, int h, int w, int c, uint8_t background) {
  VLM_ASSERT(c == 1 || c == 3 || c == 4, "raw image with ", c, " channels");
  const cv::Mat m(h, w, CV_8UC(c), const_cast<uint8_t*>(pixels));
  return own(to_rgb8(m, false, background));
}

LetterboxPlace letterbox_place(int height, int width, int S) {
  VLM_ASSERT(height > 0 && width > 0 && S > 0, "letterbox_place(", height, ", ", width, ", ", S, ")");
  const double scale = double(S) / std::max(height, width);
  LetterboxPlace p;
  p.h = std::clamp(int(std::lround(height * scale)), 1, S);
  p.w = std::clamp(int(std::lround(width * scale)), 1, S);
  p.x0 = (S - p.w) / 2, p.y0 = (S - p.h) / 2;
  return p;
}

void letterbox_into(const ImageView& view, int S, uint8_t background, uint8_t* out) {
  VLM_ASSERT(view.data != nullptr && view.height > 0 && view.width > 0 && S > 0,
             "letterbox needs a non-empty image and S > 0");
  const cv::Mat rgb = as_mat(view);
  cv::Mat dst(S, S, CV_8UC3, out);
  if (rgb.rows == S && rgb.cols == S) {
    rgb.copyTo(dst);
    return;
  }
  const double scale = double(S) / std::max(rgb.rows, rgb.cols);
  const LetterboxPlace at = letterbox_place(rgb.rows, rgb.cols, S);
  const int nh = at.h, nw = at.w, x0 = at.x0, y0 = at.y0;
  // Pad only the margins (the resized image covers the rest), then resize into the ROI:
  // a ROI of the right size and type is written in place, never reallocated.
  const cv::Scalar bg(background, background, background);
  dst(cv::Rect(0, 0, S, y0)).setTo(bg);
  dst(cv::Rect(0, y0 + nh, S, S - y0 - nh)).setTo(bg);
  dst(cv::Rect(0, y0, x0, nh)).setTo(bg);
  dst(cv::Rect(x0 + nw, y0, S - x0 - nw, nh)).setTo(bg);
  cv::Mat roi = dst(cv::Rect(x0, y0, nw, nh));
  cv::resize(rgb, roi, cv::Size(nw, nh), 0, 0, scale < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  VLM_ASSERT(roi.data == dst.data + size_t(y0) * dst.step + size_t(x0) * 3, "resize reallocated the ROI");
}

void to_unit_float(const uint8_t* src, size_t n, float* dst) {
  VLM_ASSERT(n <= size_t(std::numeric_limits<int>::max()), "to_unit_float: ", n, " elements");
  if (n == 0) return;
  const cv::Mat in(1, int(n), CV_8U, const_cast<uint8_t*>(src));
  cv::Mat out(1, int(n), CV_32F, dst);
  in.convertTo(out, CV_32F, 1.0 / 255.0);
  VLM_ASSERT(out.data == reinterpret_cast<uint8_t*>(dst), "convertTo reallocated its output");
}

}  // namespace vlm
