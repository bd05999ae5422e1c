// The convolutional stem (vision.conv_stem) in f64 on CPU:
//  - finite differences (tests/core/gradcheck.h) of every parameter (stem convolutions,
//    1x1 projection, positions, texture map), and its forward against conv2d -> GELU
//    (tanh formula in double) -> conv2d -> GELU -> 1x1 of the NCHW image;
//  - vision.stem_init: the drawn stem weights have their rule's std, and the features of
//    the 4-stage stem keep the image's scale under He's rule, not under PyTorch's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nn/init.h"
#include "tests/core/gradcheck.h"
#include "tests/vision/vision_grad_util.h"

namespace vlm::test {
namespace {

VisionConfig stem_vision() {
  VisionConfig v = tiny_vision();
  v.conv_stem = 2;  // P = 4: two layers, 2 then 4 channels, sides 4 then 2 (= G)
  v.validate();
  return v;
}

TEST(VisionGrad, ConvStemGradients) {
  EmbedRig rig(stem_vision());
  EXPECT_EQ(rig.cfg.stem_layers(), 2);
  EXPECT_EQ(rig.table.params().size(), 8u);  // 2 x (conv weight, bias), projection, bias, positions, texture
  EXPECT_EQ(rig.table.get(kPatchWeight).value.shape(), Shape({8, 4, 1, 1}));
  GradProblem p;
  for (const Param& q : rig.table.params()) p.inputs.push_back(q.value);
  p.forward = [&] { return std::vector<Tensor>{rig.forward()}; };
  p.backward = [&](const std::vector<Tensor>& d) {
    rig.forward();
    return param_grads(rig.table, 8, [&] { rig.embed.backward(cpu_stream(), d[0], rig.texture); });
  };
  gradcheck(p, 9);
}

TEST(VisionGrad, ConvStemMatchesReference) {
  EmbedRig rig(stem_vision());
  const VisionConfig& v = rig.cfg;
  const int64_t S = v.image_size, G = v.grid(), d = v.d_model, B = kImages;
  const Vec got = to_vector_f64(rig.forward());
  Vec x(size_t(B * 3 * S * S));
  const uint8_t* px = rig.pixels.ptr<uint8_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < S; ++y)
        for (int64_t xx = 0; xx < S; ++xx)
          x[size_t(((b * 3 + c) * S + y) * S + xx)] =
              (double(px[((b * S + y) * S + xx) * 3 + c]) * double(1.f / 255.f) - double(v.image_mean[size_t(c)])) /
              double(v.image_std[size_t(c)]);
  Shape in_shape{B, 3, S, S};
  for (int l = 0; l < 2; ++l) {  // conv 3x3 stride 2 pad 1, then GELU (tanh) in double
    const Tensor& w = rig.table.get(stem_weight_name(l)).value;
    const int64_t side = S >> (l + 1);
    Tensor y = zeros(Shape{B, w.size(0), side, side});
    conv2d_forward(cpu_stream(), y, host(x, in_shape), w, rig.table.get(stem_bias_name(l)).value, 2, 1);
    x = to_vector_f64(y);
    for (double& e : x) e = 0.5 * e * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e)));
    in_shape = y.shape();
  }
  const int64_t C = in_shape[1];
  const Vec w = to_vector_f64(rig.table.get(kPatchWeight).value), bias = to_vector_f64(rig.table.get(kPatchBias).value);
  const Vec pos = to_vector_f64(rig.table.get(kPositionTable).value), tex = to_vector_f64(rig.texture);
  const Vec wt = to_vector_f64(rig.table.get(kTextureWeight).value);
  Vec want(got.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t cell = 0; cell < G * G; ++cell)
      for (int64_t j = 0; j < d; ++j) {
        double acc = bias[size_t(j)] + pos[size_t(cell * d + j)];
        for (int64_t c = 0; c < C; ++c) acc += w[size_t(j * C + c)] * x[size_t((b * C + c) * G * G + cell)];
        for (int64_t k = 0; k < kTextureChannels; ++k)
          acc += tex[size_t((b * kTextureChannels + k) * G * G + cell)] * wt[size_t(j * kTextureChannels + k)];
        want[size_t((b * G * G + cell) * d + j)] = acc;
      }
  EXPECT_CLOSE(got, want, 1e-12);
}

// vision.stem_init: the stem's weights are drawn at the std of their rule (1/(3 fan_in) or
// 2/fan_in, measured over the drawn values), and the rule shows in the features: with the
// 4-stage stem of configs/colours.cfg (64-pixel images, P = 16, C = 16), He's keeps the
// features' scale within a factor of 4 of the normalised image's, PyTorch's shrinks it
// more than a hundredfold (the formula: about (1/3)^(1/2) per convolution, GELU halving).
double stem_feature_scale(StemInit init) {
  VisionConfig v;
  v.image_size = 64, v.patch = 16, v.d_model = 64, v.n_layers = 1, v.n_heads = 2, v.d_ff = 128;
  v.conv_stem = 16, v.stem_init = init, v.texture = false;
  v.validate();
  EmbedRig rig(v);
  init_params(rig.table, 7);  // the drawn initialisation, not the rig's random values
  for (int l = 0; l < v.stem_layers(); ++l) {
    const Vec w = to_vector_f64(rig.table.get(stem_weight_name(l)).value);
    const double fan_in = double(l == 0 ? 3 : v.stem_width(l - 1)) * 9;
    double sq = 0;
    for (double e : w) sq += e * e;
    const double want = init == StemInit::He ? std::sqrt(2 / fan_in) : std::sqrt(1 / (3 * fan_in));
    EXPECT_NEAR(std::sqrt(sq / double(w.size())), want, 0.1 * want) << "stem layer " << l;
  }
  const Tensor& pos = rig.table.get(kPositionTable).value;  // 0: the features alone
  std::fill_n(pos.ptr<double>(), pos.numel(), 0.0);
  const Vec y = to_vector_f64(rig.forward());
  double sq = 0;
  for (double e : y) sq += e * e;
  // Over the image's scale: uniform pixels normalised to [-1, 1] have std 1/sqrt(3).
  return std::sqrt(sq / double(y.size()) * 3.0);
}

TEST(VisionGrad, StemInitKeepsTheFeaturesScale) {
  const double he = stem_feature_scale(StemInit::He), torch = stem_feature_scale(StemInit::Torch);
  EXPECT_GT(he, 0.25) << "he " << he;
  EXPECT_LT(he, 4.0) << "he " << he;
  EXPECT_LT(torch, 0.01) << "torch " << torch;
}

}  // namespace
}  // namespace vlm::test
