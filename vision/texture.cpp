// Implementation of the 13-channel texture array (layout and normalisation: texture.h).
// Per-pixel planes are computed with OpenCV at the working resolution, then summed per
// cell in one pass using precomputed pixel -> cell maps.
#include "vision/texture.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace vlm {

const char* texture_channel_name(int c) {
  static const char* names[kTextureChannels] = {"R", "G", "B", "L*", "a*", "b*", "gx", "gy",
                                                "|g|", "y", "x", "eccentricity", "contrast"};
  VLM_ASSERT(c >= 0 && c < kTextureChannels, "texture channel ", c);
  return names[c];
}

void compute_texture(const cv::Mat& rgb, int G, float* out, const TextureOptions& opt) {
  VLM_ASSERT(rgb.type() == CV_8UC3, "compute_texture needs CV_8UC3 RGB");
  const int H = rgb.rows, W = rgb.cols;
  VLM_ASSERT(G >= 1 && H >= G && W >= G, "image ", H, "x", W, " smaller than grid ", G);

  cv::Mat f;  // RGB float in [0,1]
  rgb.convertTo(f, CV_32FC3, 1.0 / 255.0);
  cv::Mat lab;  // float input: OpenCV linearises sRGB, L in [0,100], a/b about [-127,127]
  cv::cvtColor(f, lab, cv::COLOR_RGB2Lab);
  cv::Mat luma(H, W, CV_32F);
  for (int y = 0; y < H; ++y) {
    const float* p = f.ptr<float>(y);
    float* q = luma.ptr<float>(y);
    for (int x = 0; x < W; ++x) q[x] = 0.299f * p[3 * x] + 0.587f * p[3 * x + 1] + 0.114f * p[3 * x + 2];
  }
  cv::Mat gx, gy;
  cv::Sobel(luma, gx, CV_32F, 1, 0, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  cv::Sobel(luma, gy, CV_32F, 0, 1, 3, 1.0, 0.0, cv::BORDER_REPLICATE);

  // Sums per cell: R G B L a b gx gy |g| Y Y^2.
  constexpr int kSums = 11;
  std::vector<double> sum(size_t(kSums) * G * G, 0.0);
  std::vector<int> col_cell(static_cast<size_t>(W)), count(static_cast<size_t>(G) * G, 0);
  for (int x = 0; x < W; ++x) col_cell[size_t(x)] = int(int64_t(x) * G / W);
  for (int y = 0; y < H; ++y) {
    const int r = int(int64_t(y) * G / H);
    const float* pf = f.ptr<float>(y);
    const float* pl = lab.ptr<float>(y);
    const float* px = gx.ptr<float>(y);
    const float* py = gy.ptr<float>(y);
    const float* pY = luma.ptr<float>(y);
    for (int x = 0; x < W; ++x) {
      const size_t cell = size_t(r) * G + size_t(col_cell[size_t(x)]);
      double* s = &sum[cell * kSums];
      s[0] += pf[3 * x], s[1] += pf[3 * x + 1], s[2] += pf[3 * x + 2];
      s[3] += pl[3 * x], s[4] += pl[3 * x + 1], s[5] += pl[3 * x + 2];
      s[6] += px[x], s[7] += py[x];
      s[8] += std::sqrt(double(px[x]) * px[x] + double(py[x]) * py[x]);
      s[9] += pY[x], s[10] += double(pY[x]) * pY[x];
      count[cell]++;
    }
  }
  const size_t GG = size_t(G) * G;
  for (int r = 0; r < G; ++r)
    for (int c = 0; c < G; ++c) {
      const size_t cell = size_t(r) * G + size_t(c);
      const double* s = &sum[cell * kSums];
      const double n = count[cell];
      for (int k = 0; k < 9; ++k) out[size_t(k) * GG + cell] = float(s[k] / n);
      const double cy = (r + 0.5) / G, cx = (c + 0.5) / G;
      out[kTexY * GG + cell] = float(cy);
      out[kTexX * GG + cell] = float(cx);
      out[kTexEcc * GG + cell] =
          float(std::sqrt((cy - 0.5) * (cy - 0.5) + (cx - 0.5) * (cx - 0.5)) / std::sqrt(0.5));
      const double mean = s[9] / n;
      out[kTexContrast * GG + cell] = float(std::sqrt(std::max(0.0, s[10] / n - mean * mean)));
    }
  if (!opt.normalize) return;

  // Nominal ranges make eps comparable across channels (texture.h).
  static const double range[kTextureChannels] = {1, 1, 1, 100, 128, 128, 4, 4, 4 * 1.41421356237,
                                                 1, 1, 1, 1};
  for (int k = 0; k < kTextureChannels; ++k) {
    if (k == kTexY || k == kTexX || k == kTexEcc) continue;
    float* ch = out + size_t(k) * GG;
    double m = 0, v = 0;
    for (size_t i = 0; i < GG; ++i) m += ch[i] / range[k];
    m /= double(GG);
    for (size_t i = 0; i < GG; ++i) {
      const double d = ch[i] / range[k] - m;
      v += d * d;
    }
    v /= double(GG);
    const double inv = 1.0 / std::sqrt(v + double(opt.eps) * opt.eps);
    for (size_t i = 0; i < GG; ++i) ch[i] = float((ch[i] / range[k] - m) * inv);
  }
}

std::vector<float> compute_texture(const cv::Mat& rgb, int G, const TextureOptions& opt) {
  std::vector<float> out(size_t(kTextureChannels) * G * G);
  compute_texture(rgb, G, out.data(), opt);
  return out;
}

}  // namespace vlm
