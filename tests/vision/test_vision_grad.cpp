// The vision modules in f64 on CPU (TP = 1 over a size-1 MPI communicator):
//  - Central finite differences (tests/core/gradcheck.h) of every parameter of the patch
//    embedding (patch weight and bias, position table), of the texture map (its weight
//    set away from zero so that its path carries gradient), of a tiny encoder (2
//    blocks, post norm) and of a LLaVA-style readout (1 of 2 blocks, no post norm), and
//    of the projector (input and parameters). Parameter gradients are checked to
//    ACCUMULATE (they start from random values subtracted after), dx to be overwritten.
//  - The patch embedding against an independent reference: conv2d (stride P) of the
//    normalised NCHW image + the position row + the texture channels times W_tex.
//  - The convolutional stem: tests/vision/test_vision_stem_grad.cpp.
//  - The zero-initialised texture map leaves the encoder's features unchanged, and a
//    texture change then moves no feature (while it does once the map is non-zero).
#include <gtest/gtest.h>

#include <cmath>

#include <memory>

#include "nn/init.h"
#include "tests/core/gradcheck.h"
#include "tests/vision/vision_grad_util.h"
#include "tests/support/mpi.h"
#include "vision/encoder.h"
#include "vision/projector.h"

namespace vlm::test {
namespace {

TEST(VisionGrad, PatchEmbeddingAndTextureMap) {
  EmbedRig rig;
  EXPECT_EQ(rig.table.params().size(), 4u);  // patch weight, bias, positions, texture map
  GradProblem p;
  for (const Param& q : rig.table.params()) p.inputs.push_back(q.value);
  p.forward = [&] { return std::vector<Tensor>{rig.forward()}; };
  p.backward = [&](const std::vector<Tensor>& d) {
    rig.forward();
    return param_grads(rig.table, 6, [&] { rig.embed.backward(cpu_stream(), d[0], rig.texture); });
  };
  gradcheck(p, 7);
}

TEST(VisionGrad, PatchEmbeddingMatchesConvolutionReference) {
  EmbedRig rig;
  const VisionConfig& v = rig.cfg;
  const int64_t S = v.image_size, P = v.patch, G = v.grid(), d = v.d_model, B = kImages;
  const Vec got = to_vector_f64(rig.forward());
  // Normalised NCHW image, conv2d with stride P, then [B, d, G, G] -> [B*G*G, d].
  Vec nchw(size_t(B * 3 * S * S));
  const uint8_t* px = rig.pixels.ptr<uint8_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < S; ++y)
        for (int64_t x = 0; x < S; ++x)
          nchw[size_t(((b * 3 + c) * S + y) * S + x)] =
              (double(px[((b * S + y) * S + x) * 3 + c]) * double(1.f / 255.f) - double(v.image_mean[size_t(c)])) /
              double(v.image_std[size_t(c)]);
  Tensor conv = zeros(Shape{B, d, G, G});
  conv2d_forward(cpu_stream(), conv, host(nchw, Shape{B, 3, S, S}), rig.table.get(kPatchWeight).value,
                 rig.table.get(kPatchBias).value, int(P), 0);
  const Vec cv = to_vector_f64(conv), pos = to_vector_f64(rig.table.get(kPositionTable).value);
  const Vec tex = to_vector_f64(rig.texture), wt = to_vector_f64(rig.table.get(kTextureWeight).value);
  Vec want(got.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t cell = 0; cell < G * G; ++cell)
      for (int64_t j = 0; j < d; ++j) {
        double x = cv[size_t((b * d + j) * G * G + cell)] + pos[size_t(cell * d + j)];
        for (int64_t k = 0; k < kTextureChannels; ++k)
          x += tex[size_t((b * kTextureChannels + k) * G * G + cell)] * wt[size_t(j * kTextureChannels + k)];
        want[size_t((b * G * G + cell) * d + j)] = x;
      }
  EXPECT_CLOSE(got, want, 1e-12);
}

// An encoder in f64 with random parameters and inputs.
struct EncoderRig {
  std::unique_ptr<Communicator> self = self_comm();
  VisionEncoder enc;
  Tensor pixels, texture;

  explicit EncoderRig(VisionReadout r = {}, bool random_texture_map = true)
      : enc(tiny_vision(), cpu_backend(), *self, kImages, r, DType::F64),
        pixels(random_pixels(11, kImages, tiny_vision().image_size)),
        texture(random_texture(12, tiny_vision())) {
    randomize(enc.params(), 13);
    if (!random_texture_map) fill(cpu_stream(), enc.params().get(kTextureWeight).value, 0.f);
  }
  Tensor forward() {
    enc.forward(cpu_stream(), pixels, texture);
    return to_host(enc.features());
  }
};

void check_encoder(VisionReadout r, uint64_t seed) {
  EncoderRig rig(r);
  GradProblem p;
  for (const Param& q : rig.enc.params().params()) p.inputs.push_back(q.value);
  p.forward = [&] { return std::vector<Tensor>{rig.forward()}; };
  p.backward = [&](const std::vector<Tensor>& d) {
    rig.forward();
    return param_grads(rig.enc.params(), seed, [&] { rig.enc.backward(cpu_stream(), d[0], rig.texture); });
  };
  gradcheck(p, seed + 1);
}

TEST(VisionGrad, EncoderTwoBlocksPostNorm) {
  EncoderRig rig;
  EXPECT_EQ(rig.enc.blocks(), 2);
  EXPECT_EQ(rig.enc.params().params().size(), size_t(4 + 2 * 16 + 2));
  // Cost formula (encoder.h) for n = 4 tokens, K = 48, d = 8, F = 16, 2 blocks:
  // embed 4*48*8 + 13*4*8 = 1952; block 4*(4*64 + 2*8*16) + 2*16*8 = 2304.
  EXPECT_EQ(rig.enc.forward_macs_per_image(), 1952.0 + 2 * 2304.0);
  EXPECT_EQ(rig.enc.backward_macs_per_image(), 1952.0 + 4 * 2304.0);
  check_encoder({}, 21);
}

TEST(VisionGrad, EncoderLlavaReadoutOneBlockNoPostNorm) {
  EncoderRig rig({1, false});
  EXPECT_EQ(rig.enc.blocks(), 1);
  EXPECT_FALSE(rig.enc.params().has(kPostNormWeight));
  EXPECT_FALSE(rig.enc.params().has("encoder.layers.1.mlp.fc1.weight"));
  check_encoder({1, false}, 31);
}

TEST(VisionGrad, ZeroTextureMapLeavesTheFeaturesUnchanged) {
  // After init the texture map is zero: features do not depend on the texture array.
  EncoderRig rig({}, false);
  const Vec f0 = to_vector_f64(rig.forward());
  rig.texture = random_texture(99, tiny_vision());
  EXPECT_TRUE(to_vector_f64(rig.forward()) == f0);
  // ... but it receives gradient, so training moves it away from zero.
  rig.enc.zero_grads();
  rig.enc.backward(cpu_stream(), host(Rng(5).vec(rig.enc.features().numel()), rig.enc.features().shape()),
                   rig.texture);
  double g = 0;
  for (double x : to_vector_f64(rig.enc.params().get(kTextureWeight).grad)) g = std::max(g, std::fabs(x));
  EXPECT_GT(g, 1e-3);
  // The same after init(): zero-initialised, by the table's spec.
  rig.enc.init(7);
  for (double x : to_vector_f64(rig.enc.params().get(kTextureWeight).value)) EXPECT_EQ(x, 0.0);
  // A non-zero map makes the texture matter.
  EncoderRig moved;
  const Vec m0 = to_vector_f64(moved.forward());
  moved.texture = random_texture(99, tiny_vision());
  EXPECT_GT(max_err(to_vector_f64(moved.forward()), m0), 1e-3);
}

// ZeRO over a DP group of 2 (nn/param_layout.h), as this rank's table sees it: the
// encoder's blocks are pooled units like the backbone's layers (optim/dp_grads.h runs
// them): at zero 2 their gradients live in two slots instead of one buffer each; at
// zero 3 also their compute copies, the rank keeping only its share of their values.
TEST(VisionZero, BlocksArePooledUnits) {
  VisionConfig v = tiny_vision();
  v.n_layers = 6;
  const std::unique_ptr<Communicator> self = self_comm();
  auto encoder = [&](int zero) {
    return std::make_unique<VisionEncoder>(v, cpu_backend(), *self, kImages, VisionReadout{}, DType::F32, true,
                                           Precision::FP32, DpSharding{zero, 2, 0});
  };
  const auto z1 = encoder(1), z2 = encoder(2), z3 = encoder(3);
  EXPECT_TRUE(z1->params().layout().pooled_units().empty());
  const ParamLayout& L = z3->params().layout();
  ASSERT_EQ(L.pooled_units().size(), 6u);
  const auto [b0, b1] = L.unit_range(z3->layer_unit(0));
  const size_t block = size_t(b1 - b0) * 4;  // one block's f32 slot, padding included
  for (int l = 0; l < 6; ++l) {
    const auto [u0, u1] = L.unit_range(z3->layer_unit(l));
    EXPECT_EQ(L.unit_layer(z3->layer_unit(l)), l);
    EXPECT_EQ(size_t(u1 - u0) * 4, block);
  }
  EXPECT_EQ(z2->params().grad_bytes(), z1->params().grad_bytes() - 4 * block) << "6 blocks' gradients in 2 slots";
  EXPECT_EQ(z3->params().pool_bytes(), 2 * block);
  EXPECT_EQ(z2->params().pool_bytes(), 0u);
  // zero 3: of each block's values the rank keeps what it owns (half of each run, and
  // its tail), and two slots: 6 blocks' values become 3 + 2.
  size_t not_held = 0;
  for (const ShardRun& r : L.runs()) {
    EXPECT_EQ(L.resident(int(&r - L.runs().data())), !r.pooled);
    if (r.pooled) not_held += size_t(r.size() - r.owned()) * 4;
  }
  const size_t z3_values = z3->params().value_bytes() + z3->params().pool_bytes();
  EXPECT_EQ(z3_values, z1->params().value_bytes() - not_held + 2 * block);
  EXPECT_LT(z3_values, z1->params().value_bytes() - block * 9 / 10);
}

TEST(VisionGrad, Projector) {
  const int64_t N = 5, d_in = 6, d_out = 4;
  Projector proj(d_in, d_out, 0.5f, cpu_backend(), 8, DType::F64);
  randomize(proj.params(), 41);
  GradProblem p;
  p.inputs.push_back(host(Rng(42).vec(N * d_in, -2, 2), Shape{N, d_in}));
  for (const Param& q : proj.params().params()) p.inputs.push_back(q.value);
  Tensor y = zeros(Shape{N, d_out});
  p.forward = [&] {
    proj.forward(cpu_stream(), y, p.inputs[0]);
    return std::vector<Tensor>{to_host(y)};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    proj.forward(cpu_stream(), y, p.inputs[0]);
    Tensor dx = garbage(Shape{N, d_in});  // overwritten
    std::vector<Tensor> g = param_grads(proj.params(), 43, [&] { proj.backward(cpu_stream(), dx, d[0], p.inputs[0]); });
    g.insert(g.begin(), dx);
    return g;
  };
  gradcheck(p, 44);
  // Without dx the parameter gradients are the same.
  proj.forward(cpu_stream(), y, p.inputs[0]);
  const Tensor dy = host(Rng(45).vec(N * d_out), Shape{N, d_out});
  proj.zero_grads();
  proj.backward(cpu_stream(), zeros(Shape{N, d_in}), dy, p.inputs[0]);
  std::vector<Vec> with_dx;
  for (const Param& q : proj.params().params()) with_dx.push_back(to_vector_f64(q.grad));
  proj.zero_grads();
  proj.backward(cpu_stream(), Tensor{}, dy, p.inputs[0]);
  for (size_t i = 0; i < with_dx.size(); ++i) EXPECT_TRUE(to_vector_f64(proj.params().params()[i].grad) == with_dx[i]);
}

}  // namespace
}  // namespace vlm::test
