// The SigLIP import against transformers (tests/data/hf_tiny, tools/make_siglip_tiny.py;
// the three fixtures hold the same tower: SiglipVisionModel F32 without prefix,
// SiglipModel BF16 under vision_model., LLaVA BF16 under vision_tower.vision_model.):
//  - Preprocessing: image.png, decoded and letterboxed by data/image (no resampling at
//    S x S), then image_to_patches, equals the reference pixel_values (x / 255, then
//    (x - 0.5) / 0.5) to 1e-6.
//  - Golden: on each fixture the encoder (all blocks + post_layernorm) gives
//    transformers' last_hidden_state to 1e-4 relative (max abs error / max abs
//    reference), with the texture array added through the zero-initialised map, and
//    bitwise the same features with vision.texture off.
//  - LLaVA's own readout (hidden_states[vision_feature_layer], no post_layernorm):
//    those features, put through post_layernorm in double here, give last_hidden_state.
//  - Malformed checkpoints are refused with one line naming the file and the tensor or
//    key: a missing tensor, a wrong shape, an unknown model_type, vision.patch
//    disagreeing with patch_size, LLaVA's vision_feature_layer at the embeddings.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "base/config.h"
#include "data/image/texture.h"
#include "siglip_test_util.h"
#include "tests/support/errors.h"
#include "tests/support/mpi.h"
#include "vision/siglip_import.h"

namespace vlm::test {
namespace {

constexpr double kGoldenTol = 1e-4;

struct Golden {
  double err = 0;             // max |features - reference| / max |reference|
  std::vector<float> features;
};

// Features of the image on the fixture `name` with readout r.
std::vector<float> features(const std::string& name, VisionReadout r, bool texture) {
  auto self = self_comm();
  SiglipCheckpoint ck = read_siglip_config(fixture(name));
  ck.vision.texture = texture;
  VisionEncoder enc(ck.vision, cpu_backend(), *self, 1, r);
  enc.init(5);  // anything: load_siglip overwrites every tower tensor, the texture map stays 0
  load_siglip(enc, ck);
  const int S = ck.vision.image_size, G = ck.vision.grid();
  const std::vector<uint8_t> img = fixture_image(S);
  Tensor px = Tensor::empty(cpu_backend(), Shape{1, S, S, 3}, DType::U8);
  std::copy(img.begin(), img.end(), px.ptr<uint8_t>());
  const Tensor tex = Tensor::from_vector(compute_texture(ImageView::packed(img.data(), S, S), G),
                                         Shape{1, kTextureChannels, G, G});
  enc.forward(cpu_backend().default_stream(), px, texture ? tex : Tensor{});
  return to_vector_f32(enc.features());
}

double golden_err(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double e = 0, m = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    e = std::max(e, std::fabs(double(got[i]) - double(ref[i])));
    m = std::max(m, std::fabs(double(ref[i])));
  }
  return e / m;
}

TEST(SiglipGolden, PreprocessingEqualsPixelValues) {
  const SiglipCheckpoint ck = read_siglip_config(fixture("siglip"));
  const int S = ck.vision.image_size, P = ck.vision.patch, G = S / P;
  const std::vector<uint8_t> img = fixture_image(S);
  Tensor px = Tensor::empty(cpu_backend(), Shape{1, S, S, 3}, DType::U8);
  std::copy(img.begin(), img.end(), px.ptr<uint8_t>());
  Tensor rows = Tensor::empty(cpu_backend(), Shape{G * G, 3 * P * P});
  image_to_patches(cpu_backend().default_stream(), rows, px, P, pixel_norm(ck.vision));
  const std::vector<float> got = to_vector_f32(rows), pv = reference("pixel_values");  // [3, S, S]
  ASSERT_EQ(pv.size(), size_t(3 * S * S));
  double worst = 0;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        const size_t row = size_t((y / P) * G + x / P), col = size_t((c * P + y % P) * P + x % P);
        worst = std::max(worst, std::fabs(double(got[row * size_t(3 * P * P) + col]) - pv[size_t((c * S + y) * S + x)]));
      }
  EXPECT_LE(worst, 1e-6);
  std::printf("preprocessing of image.png vs pixel_values: max abs error %.2e\n", worst);
}

TEST(SiglipGolden, LastHiddenStateOnEveryLayout) {
  const std::vector<float> ref = reference("last_hidden_state");
  for (const char* name : {"siglip", "siglip_full", "llava"}) {
    const std::vector<float> f = features(name, {}, true);
    const double e = golden_err(f, ref);
    EXPECT_LE(e, kGoldenTol) << name;
    std::printf("%-12s features vs transformers' last_hidden_state: max abs err / max abs ref = %.2e\n", name, e);
    EXPECT_TRUE(features(name, {}, false) == f) << name << ": the zero texture map changed the features";
  }
}

TEST(SiglipGolden, LlavaReadoutIsTheLastBlockBeforePostNorm) {
  const SiglipCheckpoint ck = read_siglip_config(fixture("llava"));
  const VisionReadout r = siglip_readout(ck);
  EXPECT_EQ(r.layers, 2);  // vision_feature_layer -1 of 2 blocks
  EXPECT_FALSE(r.post_norm);
  const std::vector<float> f = features("llava", r, true);
  // post_layernorm in double, with the checkpoint's weights.
  const SafetensorsCheckpoint st(fixture("llava"));
  const std::vector<float> w = st.read_f32("vision_tower.vision_model.post_layernorm.weight"),
                           b = st.read_f32("vision_tower.vision_model.post_layernorm.bias");
  const size_t d = w.size(), n = f.size() / d;
  std::vector<float> normed(f.size());
  for (size_t t = 0; t < n; ++t) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += f[t * d + j];
    mean /= double(d);
    for (size_t j = 0; j < d; ++j) var += (f[t * d + j] - mean) * (f[t * d + j] - mean);
    const double rstd = 1.0 / std::sqrt(var / double(d) + double(ck.vision.norm_eps));
    for (size_t j = 0; j < d; ++j) normed[t * d + j] = float((f[t * d + j] - mean) * rstd * w[j] + b[j]);
  }
  const std::vector<float> ref = reference("last_hidden_state");
  EXPECT_LE(golden_err(normed, ref), kGoldenTol);
  EXPECT_GT(golden_err(f, ref), 0.1);  // without the post norm the features are another thing
}

// One line, naming every piece in `parts`.
void expect_error(const std::string& msg, const std::vector<std::string>& parts) {
  EXPECT_FALSE(msg.empty());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

std::string load_error(const std::string& dir) {
  return error_of([&] {
    auto self = self_comm();
    const SiglipCheckpoint ck = read_siglip_config(dir);
    VisionEncoder enc(ck.vision, cpu_backend(), *self, 1, siglip_readout(ck));
    load_siglip(enc, ck);
  });
}

TEST(SiglipImportErrors, MalformedCheckpointsNameTheFileAndTensorOrKey) {
  const std::string root = scratch_dir("siglip_errors");
  // A missing tensor (SiglipModel layout: the prefix is part of the name).
  std::string d = root + "/missing";
  copy_fixture("siglip_full", d);
  edit_weights(d, "vision_model.encoder.layers.1.mlp.fc2.bias");
  expect_error(load_error(d), {d + "/model.safetensors", "no tensor 'vision_model.encoder.layers.1.mlp.fc2.bias'"});
  // A wrong shape: a 4 x 4 patch kernel under patch_size 8.
  d = root + "/shape";
  copy_fixture("siglip", d);
  edit_weights(d, "", "embeddings.patch_embedding.weight", {32, 3, 4, 4});
  expect_error(load_error(d), {d + "/model.safetensors", "'embeddings.patch_embedding.weight'", "[32,3,4,4]",
                               "expected [32,3,8,8]"});
  d = root + "/positions";
  copy_fixture("llava", d);
  edit_weights(d, "", "vision_tower.vision_model.embeddings.position_embedding.weight", {9, 32});
  expect_error(load_error(d), {d + "/model.safetensors", "'vision_tower.vision_model.embeddings.position_embedding.weight'",
                               "expected [16,32]"});
  // An unknown model_type, at the top and in LLaVA's vision_config.
  d = root + "/type";
  copy_fixture("siglip", d);
  edit_config(d, "\"siglip_vision_model\"", "\"clip_vision_model\"");
  expect_error(load_error(d), {d + "/config.json", "model_type='clip_vision_model'"});
  d = root + "/llava_type";
  copy_fixture("llava", d);
  edit_config(d, "\"siglip_vision_model\"", "\"clip_vision_model\"");
  expect_error(load_error(d), {d + "/config.json", "vision_config.model_type='clip_vision_model'"});
  // LLaVA features taken from the embeddings (hidden_states[0]).
  d = root + "/layer";
  copy_fixture("llava", d);
  edit_config(d, "\"vision_feature_layer\": -1", "\"vision_feature_layer\": 0");
  expect_error(load_error(d), {d + "/config.json", "vision_feature_layer"});
  // No weights at all.
  d = root + "/no_weights";
  std::filesystem::create_directories(d);
  std::filesystem::copy_file(fixture("siglip") + "/config.json", d + "/config.json");
  expect_error(load_error(d), {d});
  // vision.patch given and disagreeing with the checkpoint's patch_size.
  Config cfg;
  register_vision_options(cfg);
  ASSERT_TRUE(parse_args(cfg, {"--vision.hf", fixture("siglip"), "--vision.patch", "16"}));
  expect_error(error_of([&] { resolve_vision_config(cfg); }),
               {"vision.patch=16", fixture("siglip") + "/config.json", "patch_size=8"});
}

}  // namespace
}  // namespace vlm::test
