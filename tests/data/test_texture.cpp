// Texture channels against values computed by hand on synthetic images: a flat colour
// (Lab from the sRGB/D65 formulas), a vertical black/white edge (Sobel response and
// in-cell contrast), and a horizontal grey ramp; then the per-image normalisation; and
// agreement with a straightforward float reference on noise images of awkward sizes; and
// a view with padded rows (a crop of a larger image) reads the same pixels as a copy.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "data/image/image.h"
#include "data/image/texture.h"

using namespace vlm;

namespace {
float at(const std::vector<float>& t, int G, int c, int r, int x) {
  return t[size_t(c) * G * G + size_t(r) * G + size_t(x)];
}

// CIE Lab of an sRGB colour (components in [0,1]), D65 white, written from the
// definitions (sRGB companding, the sRGB->XYZ matrix, the CIE f(t)).
void lab_of(double R, double G, double B, double* L, double* a, double* b) {
  auto lin = [](double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); };
  const double r = lin(R), g = lin(G), bl = lin(B);
  const double X = (0.4124564 * r + 0.3575761 * g + 0.1804375 * bl) / 0.95047;
  const double Y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * bl;
  const double Z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * bl) / 1.08883;
  auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
  *L = 116 * f(Y) - 16;
  *a = 500 * (f(X) - f(Y));
  *b = 200 * (f(Y) - f(Z));
}

const TextureOptions kRaw{false, 0.05f};

// The test images are OpenCV Mats (RGB order); compute_texture takes a view of pixels.
ImageView view(const cv::Mat& m) {
  EXPECT_EQ(m.type(), CV_8UC3);
  return {m.data, m.rows, m.cols, m.step};
}
}  // namespace

TEST(Texture, FlatColour) {
  const int G = 4;
  cv::Mat img(32, 32, CV_8UC3, cv::Scalar(200, 100, 50));  // RGB order
  const auto t = compute_texture(view(img), G, kRaw);
  ASSERT_EQ(t.size(), size_t(13 * G * G));
  double L, a, b;
  lab_of(200 / 255.0, 100 / 255.0, 50 / 255.0, &L, &a, &b);
  for (int r = 0; r < G; ++r)
    for (int x = 0; x < G; ++x) {
      EXPECT_NEAR(at(t, G, kTexR, r, x), 200 / 255.0, 1e-6);
      EXPECT_NEAR(at(t, G, kTexG, r, x), 100 / 255.0, 1e-6);
      EXPECT_NEAR(at(t, G, kTexB, r, x), 50 / 255.0, 1e-6);
      EXPECT_NEAR(at(t, G, kTexL, r, x), L, 0.3);
      EXPECT_NEAR(at(t, G, kTexA, r, x), a, 0.5);
      EXPECT_NEAR(at(t, G, kTexLabB, r, x), b, 0.5);
      for (int c : {kTexGx, kTexGy, kTexGmag, kTexContrast}) EXPECT_NEAR(at(t, G, c, r, x), 0, 1e-5);
      const double cy = (r + 0.5) / G, cx = (x + 0.5) / G;
      EXPECT_FLOAT_EQ(at(t, G, kTexY, r, x), float(cy));
      EXPECT_FLOAT_EQ(at(t, G, kTexX, r, x), float(cx));
      EXPECT_NEAR(at(t, G, kTexEcc, r, x), std::hypot(cy - 0.5, cx - 0.5) / std::sqrt(0.5), 1e-6);
    }
  // Corner cell of a fine grid is close to eccentricity 1.
  const auto fine = compute_texture(view(img), 32, kRaw);
  EXPECT_NEAR(at(fine, 32, kTexEcc, 0, 0), 1.0, 0.05);
  // Normalised: a flat image has nothing to standardise; appearance channels are 0,
  // position channels unchanged.
  const auto n = compute_texture(view(img), G);
  for (int c = 0; c < 13; ++c)
    for (int r = 0; r < G; ++r)
      for (int x = 0; x < G; ++x) {
        if (c == kTexY || c == kTexX || c == kTexEcc) EXPECT_EQ(at(n, G, c, r, x), at(t, G, c, r, x));
        else EXPECT_NEAR(at(n, G, c, r, x), 0, 1e-4) << texture_channel_name(c);
      }
}

TEST(Texture, VerticalEdge) {
  // Columns 0..15 black, 16..31 white. Luma step of 1 between x=15 and x=16: the Sobel
  // x-response is 4 at x=15 and x=16 (weights 1+2+1 times the step), 0 elsewhere.
  cv::Mat img(32, 32, CV_8UC3, cv::Scalar(0, 0, 0));
  img(cv::Rect(16, 0, 16, 32)).setTo(cv::Scalar(255, 255, 255));
  const int G = 4;  // cells of 8 columns: x=15 is in cell column 1, x=16 in column 2
  const auto t = compute_texture(view(img), G, kRaw);
  for (int r = 0; r < G; ++r)
    for (int x = 0; x < G; ++x) {
      const double want = (x == 1 || x == 2) ? 4.0 / 8.0 : 0.0;
      EXPECT_NEAR(at(t, G, kTexGx, r, x), want, 1e-5);
      EXPECT_NEAR(at(t, G, kTexGmag, r, x), want, 1e-5);
      EXPECT_NEAR(at(t, G, kTexGy, r, x), 0, 1e-6);
      EXPECT_NEAR(at(t, G, kTexContrast, r, x), 0, 1e-5);  // each cell on one side
      EXPECT_NEAR(at(t, G, kTexL, r, x), x < 2 ? 0.0 : 100.0, 0.05);
    }
  // G = 3: cell column 1 spans x in [11, 22) (x*3/32 == 1), i.e. 5 black and 6 white
  // columns: mean 6/11, std sqrt(p(1-p)) = sqrt(30)/11.
  const auto t3 = compute_texture(view(img), 3, kRaw);
  EXPECT_NEAR(at(t3, 3, kTexContrast, 1, 1), std::sqrt(30.0) / 11.0, 1e-5);
  EXPECT_NEAR(at(t3, 3, kTexContrast, 1, 0), 0.0, 1e-5);
  EXPECT_NEAR(at(t3, 3, kTexR, 1, 1), 6.0 / 11.0, 1e-6);
}

TEST(Texture, HorizontalRamp) {
  // Grey value 8x at column x: luma step s = 8/255 per column. Interior Sobel gx =
  // 4 * 2s; at the replicated borders 4 * s. Cell contrast = s * std{0..7} = s*sqrt(63/12).
  cv::Mat img(32, 32, CV_8UC3);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) img.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(8 * x), uchar(8 * x), uchar(8 * x));
  const double s = 8.0 / 255.0;
  const int G = 4;
  const auto t = compute_texture(view(img), G, kRaw);
  for (int r = 0; r < G; ++r)
    for (int x = 0; x < G; ++x) {
      double gx = 8 * s;
      if (x == 0 || x == 3) gx = (7 * 8 * s + 4 * s) / 8;
      EXPECT_NEAR(at(t, G, kTexGx, r, x), gx, 1e-5);
      EXPECT_NEAR(at(t, G, kTexGy, r, x), 0, 1e-5);
      EXPECT_NEAR(at(t, G, kTexContrast, r, x), s * std::sqrt(63.0 / 12.0), 1e-5);
      EXPECT_NEAR(at(t, G, kTexR, r, x), s * (8 * x + 3.5), 1e-5);
    }
  // Normalised R: per image zero mean and std v/sqrt(v + eps^2) over the cells.
  const auto n = compute_texture(view(img), G);
  double m = 0, v = 0, raw_v = 0, raw_m = 0;
  for (int k = 0; k < G * G; ++k) m += n[size_t(kTexR * G * G + k)], raw_m += t[size_t(kTexR * G * G + k)];
  m /= G * G, raw_m /= G * G;
  for (int k = 0; k < G * G; ++k) {
    v += std::pow(n[size_t(kTexR * G * G + k)] - m, 2);
    raw_v += std::pow(t[size_t(kTexR * G * G + k)] - raw_m, 2);
  }
  v /= G * G, raw_v /= G * G;
  EXPECT_NEAR(m, 0, 1e-5);
  EXPECT_NEAR(v, raw_v / (raw_v + 0.05 * 0.05), 1e-4);
}

// The texture computed directly from the definitions in double precision (per-pixel Lab
// by lab_of, Sobel on double luma, sums per cell over the pixels x with x*G/W == c): the
// straightforward reading of texture.h that the fast one-pass implementation must match.
static std::vector<float> reference_texture(const cv::Mat& rgb, int G) {
  const int H = rgb.rows, W = rgb.cols;
  cv::Mat gx, gy;
  cv::Mat luma(H, W, CV_64F);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const cv::Vec3b p = rgb.at<cv::Vec3b>(y, x);
      luma.at<double>(y, x) = (0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]) / 255.0;
    }
  cv::Sobel(luma, gx, CV_64F, 1, 0, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  cv::Sobel(luma, gy, CV_64F, 0, 1, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  std::vector<float> out(size_t(13) * G * G);
  for (int r = 0; r < G; ++r)
    for (int c = 0; c < G; ++c) {
      double s[11] = {0};
      int n = 0;
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          if (y * G / H != r || x * G / W != c) continue;
          ++n;
          const cv::Vec3b p = rgb.at<cv::Vec3b>(y, x);
          double l[3];
          lab_of(p[0] / 255.0, p[1] / 255.0, p[2] / 255.0, &l[0], &l[1], &l[2]);
          const double dx = gx.at<double>(y, x), dy = gy.at<double>(y, x), Y = luma.at<double>(y, x);
          for (int k = 0; k < 3; ++k) s[k] += p[k] / 255.0, s[3 + k] += l[k];
          s[6] += dx, s[7] += dy, s[8] += std::hypot(dx, dy), s[9] += Y, s[10] += Y * Y;
        }
      const auto put = [&](int ch, double v) { out[size_t(ch) * G * G + size_t(r) * G + size_t(c)] = float(v); };
      for (int k = 0; k < 9; ++k) put(k, s[k] / n);
      const double cy = (r + 0.5) / G, cx = (c + 0.5) / G;
      put(kTexY, cy), put(kTexX, cx), put(kTexEcc, std::hypot(cy - 0.5, cx - 0.5) / std::sqrt(0.5));
      put(kTexContrast, std::sqrt(std::max(0.0, s[10] / n - (s[9] / n) * (s[9] / n))));
    }
  return out;
}

TEST(Texture, MatchesReferenceOnNoiseAndOddSizes) {
  cv::RNG rng(7);
  for (const auto& [H, W, G] : std::vector<std::array<int, 3>>{{64, 64, 8}, {37, 53, 5}, {31, 33, 31}, {40, 40, 1}}) {
    cv::Mat img(H, W, CV_8UC3);
    rng.fill(img, cv::RNG::UNIFORM, 0, 256);
    cv::GaussianBlur(img(cv::Rect(0, 0, W / 2, H)), img(cv::Rect(0, 0, W / 2, H)), cv::Size(5, 5), 2.0);
    const auto t = compute_texture(view(img), G, kRaw), ref = reference_texture(img, G);
    for (int ch = 0; ch < 13; ++ch) {
      const double tol = (ch >= kTexL && ch <= kTexLabB) ? 1e-3 : 2e-6;
      for (int k = 0; k < G * G; ++k)
        ASSERT_NEAR(t[size_t(ch * G * G + k)], ref[size_t(ch * G * G + k)], tol)
            << texture_channel_name(ch) << " cell " << k << " of " << H << "x" << W << " G=" << G;
    }
  }
}

TEST(Texture, PaddedRowsEqualPackedCopy) {
  cv::RNG rng(11);
  cv::Mat big(50, 70, CV_8UC3);
  rng.fill(big, cv::RNG::UNIFORM, 0, 256);
  const cv::Mat crop = big(cv::Rect(5, 3, 41, 37));  // rows 70*3 bytes apart, not 41*3
  ASSERT_FALSE(crop.isContinuous());
  const cv::Mat packed = crop.clone();
  for (bool norm : {false, true}) {
    const TextureOptions opt{norm, 0.05f};
    const auto a = compute_texture(view(crop), 6, opt), b = compute_texture(view(packed), 6, opt);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], b[k]) << "element " << k;
  }
}
