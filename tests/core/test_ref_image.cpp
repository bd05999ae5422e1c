// Forward reference test of image_to_patches (core/ops/image.inc, part of
// test_ops_reference), f32 and f64: every output against the formula in double, and
// the patch rows times a conv weight [Cout,3,P,P] viewed as [Cout,3PP] against conv2d
// (stride P, no padding) of the normalised image in NCHW: the identity the ViT patch
// embedding relies on (vision/patch_embed.h). The layout ops maps_to_rows/rows_to_maps
// against their formula, and image_to_patches with one patch per image (P = S) against
// the normalised image in NCHW: the input of the convolutional stem.
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

class RefImage : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
};

Tensor random_pixels(Rng& rng, int64_t B, int64_t S) {
  Tensor t = Tensor::empty(cpu_backend(), Shape{B, S, S, 3}, DType::U8);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<uint8_t>()[i] = uint8_t(rng.randint(0, 255));
  return t;
}

TEST_P(RefImage, PatchRowsAndConvEquivalence) {
  Rng rng(31);
  PixelNorm n;
  n.mean = {0.485f, 0.456f, 0.406f};
  n.stddev = {0.229f, 0.224f, 0.225f};
  struct Cfg {
    int64_t B, S;
    int P;
  };
  for (Cfg c : {Cfg{1, 1, 1}, Cfg{2, 6, 3}, Cfg{3, 8, 8}, Cfg{1, 10, 2}}) {
    const int64_t B = c.B, S = c.S, P = c.P, G = S / P, K = 3 * P * P;
    const Tensor px = random_pixels(rng, B, S);
    const uint8_t* v = px.ptr<uint8_t>();
    Tensor out = zeros(Shape{B, G * G, K}, dt());
    fill(cpu_stream(), out, 1234.5f);  // overwritten
    image_to_patches(cpu_stream(), out, px, int(P), n);

    // The formula, and the normalised image in NCHW for the convolution.
    auto norm = [&](int64_t b, int64_t y, int64_t x, int64_t ch) {
      return (double(v[((b * S + y) * S + x) * 3 + ch]) * double(n.scale) - double(n.mean[size_t(ch)])) /
             double(n.stddev[size_t(ch)]);
    };
    Vec ref(size_t(B * G * G * K)), nchw(size_t(B * 3 * S * S));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t gy = 0; gy < G; ++gy)
        for (int64_t gx = 0; gx < G; ++gx)
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t ky = 0; ky < P; ++ky)
              for (int64_t kx = 0; kx < P; ++kx)
                ref[size_t(((b * G + gy) * G + gx) * K + (ch * P + ky) * P + kx)] = norm(b, gy * P + ky, gx * P + kx, ch);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < S; ++y)
          for (int64_t x = 0; x < S; ++x) nchw[size_t(((b * 3 + ch) * S + y) * S + x)] = norm(b, y, x, ch);
    EXPECT_CLOSE(to_vector_f64(out), ref, dt() == DType::F64 ? 1e-13 : 1e-6) << "S" << S << " P" << P;

    // rows [B*G*G, K] @ W^T [K, Cout] == conv2d(image, W, stride P) permuted to [B, G*G, Cout].
    const int64_t Cout = 5;
    const Vec w = rounded(rng.vec(Cout * K), dt());
    Tensor y = zeros(Shape{B * G * G, Cout}, dt()), conv = zeros(Shape{B, Cout, G, G}, dt());
    GemmOpts o;
    o.trans_b = true;
    matmul(cpu_stream(), y, out.view(Shape{B * G * G, K}), host(w, Shape{Cout, K}, dt()), o);
    conv2d_forward(cpu_stream(), conv, host(nchw, Shape{B, 3, S, S}, dt()), host(w, Shape{Cout, 3, P, P}, dt()),
                   Tensor(), int(P), 0);
    const Vec yv = to_vector_f64(y), cv = to_vector_f64(conv);
    Vec perm(yv.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t co = 0; co < Cout; ++co)
        for (int64_t cell = 0; cell < G * G; ++cell)
          perm[size_t((b * G * G + cell) * Cout + co)] = cv[size_t((b * Cout + co) * G * G + cell)];
    EXPECT_CLOSE(yv, perm, dt() == DType::F64 ? 1e-12 : 2e-5) << "S" << S << " P" << P;
  }
}

TEST_P(RefImage, MapsToRowsAndBackAndTheWholeImageAsOnePatch) {
  Rng rng(37);
  const int64_t B = 2, C = 3, H = 4, W = 5;
  const Vec m = rounded(rng.vec(B * C * H * W), dt());
  Tensor rows = zeros(Shape{B * H * W, C}, dt()), back = zeros(Shape{B, C, H, W}, dt());
  maps_to_rows(cpu_stream(), rows, host(m, Shape{B, C, H, W}, dt()));
  const Vec r = to_vector_f64(rows);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x)
          ASSERT_EQ(r[size_t(((b * H + y) * W + x) * C + c)], m[size_t(((b * C + c) * H + y) * W + x)]);
  rows_to_maps(cpu_stream(), back, rows);
  EXPECT_EQ(to_vector_f64(back), m);

  // image_to_patches with P = S: row b is image b normalised, in (c, y, x) order = NCHW.
  PixelNorm n;
  const int64_t S = 6;
  const Tensor px = random_pixels(rng, B, S);
  Tensor one = zeros(Shape{B, 3 * S * S}, dt());
  image_to_patches(cpu_stream(), one, px, int(S), n);
  const Vec o = to_vector_f64(one);
  const uint8_t* v = px.ptr<uint8_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < S; ++y)
        for (int64_t x = 0; x < S; ++x) {
          const double want = (double(v[((b * S + y) * S + x) * 3 + ch]) * double(n.scale) - double(n.mean[size_t(ch)])) /
                               double(n.stddev[size_t(ch)]);
          ASSERT_NEAR(o[size_t(((b * 3 + ch) * S + y) * S + x)], want, dt() == DType::F64 ? 1e-13 : 1e-6);
        }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RefImage, ::testing::Values(DType::F32, DType::F64),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace vlm::test
