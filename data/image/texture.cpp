// Implementation of the 13-channel texture array (layout and normalisation: texture.h).
// One pass over the rows of the uint8 image, no per-image heap allocation after the first
// image of a thread (thread-local scratch):
//  - luma is kept as the exact integer Yi = 299R + 587G + 114B (Y = Yi / 255000), so the
//    Sobel responses, cell means of R, G, B, Y and the luma variance are exact integer sums;
//  - Lab is computed per pixel from an sRGB -> linear table and a branch-free cube root
//    (vectorisable), |g| with OpenCV's SIMD intrinsics;
//  - per-pixel values are first summed down the rows of a cell row into per-column
//    accumulators (vertical adds vectorise), then each cell sums its columns once.
// Precision: Lab and |g| are float per pixel, summed in double per column; everything else
// is exact. Per pixel, L*a*b* is within 1e-4 of the double-precision CIE formulas (OpenCV's
// float cvtColor RGB2Lab, used before, was up to 0.3 off); tests/data/test_texture.cpp
// compares the whole array with a direct double-precision reading of texture.h.
#include "data/image/texture.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <opencv2/core/hal/intrin.hpp>

#include "base/error.h"

namespace vlm {

const char* texture_channel_name(int c) {
  static const char* names[kTextureChannels] = {"R", "G", "B", "L*", "a*", "b*", "gx", "gy",
                                                "|g|", "y", "x", "eccentricity", "contrast"};
  VLM_ASSERT(c >= 0 && c < kTextureChannels, "texture channel ", c);
  return names[c];
}

namespace {

constexpr double kLumaScale = 255000.0;  // Y in [0,1] = Yi / kLumaScale
constexpr float kLabEps = 216.0f / 24389.0f;  // CIE (6/29)^3

// sRGB 8-bit code -> linear light (the sRGB companding, computed in double once).
const std::array<float, 256>& srgb_to_linear() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int i = 0; i < 256; ++i) {
      const double c = i / 255.0;
      a[size_t(i)] = float(c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4));
    }
    return a;
  }();
  return t;
}

// Cube root of t > 0 without division: r ~ t^(-1/3) from the exponent bits (about 3%
// off), three Newton steps r <- r (4 - t r^3) / 3 (error squares each step: 1e-3, 1e-6,
// float round-off), then t^(1/3) = t r^2. Branch-free so loops of it vectorise.
inline float cbrt_pos(float t) {
  // Bits / 3 via float (SIMD has no integer divide): ~1e-5 off, irrelevant for a guess.
  const int32_t i = std::bit_cast<int32_t>(t);
  float r = std::bit_cast<float>(1419967116 - int32_t(float(i) * (1.0f / 3.0f)));
  for (int k = 0; k < 3; ++k) r = r * (4.0f / 3.0f - (1.0f / 3.0f) * t * (r * r * r));
  return t * r * r;
}

// CIE f(t) (cube root above (6/29)^3, linear below), t >= 0. Both sides are computed and
// the choice is made with integer masks (non-negative floats order like their bits): with
// GCC's default -ftrapping-math a float compare or select keeps the loop scalar.
inline float lab_f(float t) {
  const int32_t ti = std::bit_cast<int32_t>(t), ei = std::bit_cast<int32_t>(kLabEps);
  const int32_t above = -int32_t(ti > ei);  // all ones or zero
  const float root = cbrt_pos(std::bit_cast<float>(std::max(ti, ei)));
  const float line = (24389.0f / 27.0f * t + 16.0f) / 116.0f;
  return std::bit_cast<float>((std::bit_cast<int32_t>(root) & above) |
                              (std::bit_cast<int32_t>(line) & ~above));
}

// One row of linear RGB -> L*, a*, b* (sRGB -> XYZ, D65 white-normalised, then the CIE
// f). __restrict: without it GCC sees six possibly aliasing arrays and keeps it scalar.
void lab_row(const float* __restrict lr, const float* __restrict lg, const float* __restrict lb,
             float* __restrict L, float* __restrict A, float* __restrict B, size_t n) {
  for (size_t x = 0; x < n; ++x) {
    const float X = (0.4124564f * lr[x] + 0.3575761f * lg[x] + 0.1804375f * lb[x]) * (1.0f / 0.95047f);
    const float Y = 0.2126729f * lr[x] + 0.7151522f * lg[x] + 0.0721750f * lb[x];
    const float Z = (0.0193339f * lr[x] + 0.1191920f * lg[x] + 0.9503041f * lb[x]) * (1.0f / 1.08883f);
    const float fX = lab_f(X), fY = lab_f(Y), fZ = lab_f(Z);
    L[x] = 116.0f * fY - 16.0f;
    A[x] = 500.0f * (fX - fY);
    B[x] = 200.0f * (fY - fZ);
  }
}

// |g| of one row from the integer Sobel responses (|gx|, |gy| < 2^21: exact in float). OpenCV's
// universal intrinsics: std::sqrt does not vectorise under GCC's default -fmath-errno.
void magnitude_row(const int32_t* gx, const int32_t* gy, float* mag, size_t n) {
  size_t x = 0;
#if CV_SIMD128
  for (; x + 4 <= n; x += 4) {
    const cv::v_float32x4 a = cv::v_cvt_f32(cv::v_load(gx + x)), b = cv::v_cvt_f32(cv::v_load(gy + x));
    cv::v_store(mag + x, cv::v_sqrt(a * a + b * b));
  }
#endif
  for (; x < n; ++x) mag[x] = std::sqrt(float(gx[x]) * float(gx[x]) + float(gy[x]) * float(gy[x]));
}

// Per-thread working memory, grown on demand and reused for every image.
struct Scratch {
  std::vector<int32_t> luma;                    // [H, W] Yi
  std::vector<int32_t> gx, gy;                  // [W] Sobel of one row (Yi units)
  std::vector<float> mag, lr, lg, lb, L, A, B;  // [W] per-pixel values of one row
  std::vector<int32_t> col_rgb;                 // [W*3] column sums over the cell row
  std::vector<int64_t> col_y, col_y2, col_gx, col_gy;  // [W]
  std::vector<double> col_L, col_A, col_B, col_mag;    // [W]
};

template <class T>
void fit(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

void compute_texture(const ImageView& rgb, int G, float* out, const TextureOptions& opt) {
  VLM_ASSERT(rgb.data != nullptr && rgb.stride >= size_t(rgb.width) * 3, "compute_texture needs RGB pixels");
  const int H = rgb.height, W = rgb.width;
  VLM_ASSERT(G >= 1 && H >= G && W >= G, "image ", H, "x", W, " smaller than grid ", G);
  const size_t w = size_t(W), GG = size_t(G) * G;

  thread_local Scratch s;
  fit(s.luma, size_t(H) * w);
  for (auto* v : {&s.gx, &s.gy}) fit(*v, w);
  for (auto* v : {&s.mag, &s.lr, &s.lg, &s.lb, &s.L, &s.A, &s.B}) fit(*v, w);
  fit(s.col_rgb, 3 * w);
  for (auto* v : {&s.col_y, &s.col_y2, &s.col_gx, &s.col_gy}) fit(*v, w);
  for (auto* v : {&s.col_L, &s.col_A, &s.col_B, &s.col_mag}) fit(*v, w);
  // Plain local pointers: through the thread_local vectors the compiler must assume every
  // store may change their data pointers, which keeps the loops scalar.
  int32_t* luma = s.luma.data();
  int32_t *gx = s.gx.data(), *gy = s.gy.data(), *crgb = s.col_rgb.data();
  float* mag = s.mag.data();
  float *lr = s.lr.data(), *lg = s.lg.data(), *lb = s.lb.data(), *L = s.L.data(), *A = s.A.data(), *B = s.B.data();
  int64_t *cY = s.col_y.data(), *cY2 = s.col_y2.data(), *cgx = s.col_gx.data(), *cgy = s.col_gy.data();
  double *cL = s.col_L.data(), *cA = s.col_A.data(), *cB = s.col_B.data(), *cmag = s.col_mag.data();

  for (int y = 0; y < H; ++y) {
    const uint8_t* p = rgb.row(y);
    int32_t* q = luma + size_t(y) * w;
    for (size_t x = 0; x < w; ++x) q[x] = 299 * p[3 * x] + 587 * p[3 * x + 1] + 114 * p[3 * x + 2];
  }
  // Pixel x lies in cell column floor(x*G/W), so column c starts at ceil(c*W/G) (rows alike).
  const auto first = [G](int c, int extent) { return int((int64_t(c) * extent + G - 1) / G); };
  std::vector<int> x0(size_t(G) + 1);
  for (int c = 0; c <= G; ++c) x0[size_t(c)] = first(c, W);
  const std::array<float, 256>& lin = srgb_to_linear();

  for (int r = 0; r < G; ++r) {
    const int y0 = first(r, H), y1 = first(r + 1, H);
    std::fill_n(crgb, 3 * w, 0);
    for (int64_t* v : {cY, cY2, cgx, cgy}) std::fill_n(v, w, 0);
    for (double* v : {cL, cA, cB, cmag}) std::fill_n(v, w, 0.0);
    for (int y = y0; y < y1; ++y) {
      const uint8_t* p = rgb.row(y);
      const int32_t* um = luma + size_t(std::max(y - 1, 0)) * w;  // border replicated
      const int32_t* u0 = luma + size_t(y) * w;
      const int32_t* up = luma + size_t(std::min(y + 1, H - 1)) * w;
      // 3x3 Sobel: gx = right - left columns weighted 1 2 1 down, gy = below - above.
      auto sobel = [&](size_t x, size_t xl, size_t xr) {
        gx[x] = (um[xr] - um[xl]) + 2 * (u0[xr] - u0[xl]) + (up[xr] - up[xl]);
        gy[x] = (up[xl] + 2 * up[x] + up[xr]) - (um[xl] + 2 * um[x] + um[xr]);
      };
      sobel(0, 0, std::min<size_t>(1, w - 1));
      for (size_t x = 1; x + 1 < w; ++x) sobel(x, x - 1, x + 1);
      if (w > 1) sobel(w - 1, w - 2, w - 1);
      magnitude_row(gx, gy, mag, w);
      // Lab: linearise by table (scalar lookups), then the vectorised arithmetic.
      for (size_t x = 0; x < w; ++x) lr[x] = lin[p[3 * x]], lg[x] = lin[p[3 * x + 1]], lb[x] = lin[p[3 * x + 2]];
      lab_row(lr, lg, lb, L, A, B, w);
      // Down the column: every add below is element-wise over x, so it vectorises.
      for (size_t i = 0; i < 3 * w; ++i) crgb[i] += p[i];
      for (size_t x = 0; x < w; ++x) {
        const int64_t v = u0[x];
        cY[x] += v;
        cY2[x] += v * v;
        cgx[x] += gx[x];
        cgy[x] += gy[x];
      }
      for (size_t x = 0; x < w; ++x) {
        cL[x] += L[x], cA[x] += A[x], cB[x] += B[x];
        cmag[x] += mag[x];
      }
    }
    // Each cell of this row sums its columns.
    for (int c = 0; c < G; ++c) {
      const size_t a = size_t(x0[size_t(c)]), e = size_t(x0[size_t(c) + 1]);
      int64_t sr = 0, sg = 0, sb = 0, sy = 0, sy2 = 0, sgx = 0, sgy = 0;
      double sl = 0, sa = 0, slb = 0, sm = 0;
      for (size_t x = a; x < e; ++x) {
        sr += crgb[3 * x], sg += crgb[3 * x + 1], sb += crgb[3 * x + 2];
        sy += cY[x], sy2 += cY2[x], sgx += cgx[x], sgy += cgy[x];
        sl += cL[x], sa += cA[x], slb += cB[x], sm += cmag[x];
      }
      const int64_t n = int64_t(y1 - y0) * int64_t(e - a);
      const double dn = double(n);
      const size_t cell = size_t(r) * G + size_t(c);
      out[kTexR * GG + cell] = float(double(sr) / (255.0 * dn));
      out[kTexG * GG + cell] = float(double(sg) / (255.0 * dn));
      out[kTexB * GG + cell] = float(double(sb) / (255.0 * dn));
      out[kTexL * GG + cell] = float(sl / dn);
      out[kTexA * GG + cell] = float(sa / dn);
      out[kTexLabB * GG + cell] = float(slb / dn);
      out[kTexGx * GG + cell] = float(double(sgx) / (kLumaScale * dn));
      out[kTexGy * GG + cell] = float(double(sgy) / (kLumaScale * dn));
      out[kTexGmag * GG + cell] = float(sm / (kLumaScale * dn));
      const double cy = (r + 0.5) / G, cx = (c + 0.5) / G;
      out[kTexY * GG + cell] = float(cy);
      out[kTexX * GG + cell] = float(cx);
      out[kTexEcc * GG + cell] =
          float(std::sqrt((cy - 0.5) * (cy - 0.5) + (cx - 0.5) * (cx - 0.5)) / std::sqrt(0.5));
      // Population variance n^2 var = n*sum(Yi^2) - sum(Yi)^2, exact in 128-bit integers
      // (GCC/Clang extension; the 64-bit products would overflow for large cells).
      __extension__ using i128 = __int128;
      const i128 num = i128(n) * sy2 - i128(sy) * sy;
      const double var = double(num) / (dn * dn) / (kLumaScale * kLumaScale);
      out[kTexContrast * GG + cell] = float(std::sqrt(std::max(0.0, var)));
    }
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

std::vector<float> compute_texture(const ImageView& rgb, int G, const TextureOptions& opt) {
  std::vector<float> out(size_t(kTextureChannels) * G * G);
  compute_texture(rgb, G, out.data(), opt);
  return out;
}

}  // namespace vlm
