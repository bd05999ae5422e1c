// Tests of the SigLIP config reader (vision/siglip_config.h) on the three
// transformers-written fixtures (tests/data/hf_tiny/{siglip,siglip_full,llava}, made by
// tools/make_siglip_tiny.py): shape, prefixes and output layer read from config.json;
// the prefix found in each model.safetensors and every tower tensor there with the
// shape the config implies; the reference file's tensors; then the agreement of
// explicit `vision.*` options with a checkpoint and resolve_vision_config.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "config_test_util.h"
#include "vision/siglip_config.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::parse_args;

const fs::path kFixtures = fs::path(VLM_SOURCE_DIR) / "tests" / "data" / "hf_tiny";

// Shape and dtype of tensor `name` in a safetensors header ("" shape when absent).
std::string shape_of(const json::Value& header, const std::string& name, std::string* dtype = nullptr) {
  const json::Value* t = header.find(name);
  if (!t) return "";
  if (dtype) *dtype = t->at("dtype").as_string();
  std::string s;
  for (const auto& d : t->at("shape").as_array()) {
    if (!s.empty()) s += ',';
    s += std::to_string(d.as_int());
  }
  return s;
}

// Every tensor of the SigLIP tower the encoder imports, with the shape `v` implies.
void expect_tower(const json::Value& header, const std::string& p, const VisionConfig& v, const std::string& dtype) {
  const std::string d = std::to_string(v.d_model), f = std::to_string(v.d_ff);
  std::vector<std::pair<std::string, std::string>> want = {
      {"embeddings.patch_embedding.weight", d + ",3," + std::to_string(v.patch) + "," + std::to_string(v.patch)},
      {"embeddings.patch_embedding.bias", d},
      {"embeddings.position_embedding.weight", std::to_string(v.tokens()) + "," + d},
      {"post_layernorm.weight", d},
      {"post_layernorm.bias", d}};
  for (int l = 0; l < v.n_layers; ++l) {
    const std::string b = "encoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"layer_norm1", "layer_norm2"}) {
      want.emplace_back(b + n + ".weight", d);
      want.emplace_back(b + n + ".bias", d);
    }
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      want.emplace_back(b + "self_attn." + n + ".weight", d + "," + d);
      want.emplace_back(b + "self_attn." + n + ".bias", d);
    }
    want.emplace_back(b + "mlp.fc1.weight", f + "," + d);
    want.emplace_back(b + "mlp.fc1.bias", f);
    want.emplace_back(b + "mlp.fc2.weight", d + "," + f);
    want.emplace_back(b + "mlp.fc2.bias", d);
  }
  for (const auto& [name, shape] : want) {
    std::string dt;
    EXPECT_EQ(shape_of(header, p + name, &dt), shape) << p + name;
    EXPECT_EQ(dt, dtype) << p + name;
  }
  EXPECT_EQ(header.find(p + "encoder.layers." + std::to_string(v.n_layers) + ".layer_norm1.weight"), nullptr);
}

void expect_tiny_shape(const VisionConfig& v) {
  EXPECT_EQ(v.image_size, 32);
  EXPECT_EQ(v.patch, 8);
  EXPECT_EQ(v.grid(), 4);
  EXPECT_EQ(v.d_model, 32);
  EXPECT_EQ(v.n_layers, 2);
  EXPECT_EQ(v.n_heads, 4);
  EXPECT_EQ(v.d_ff, 64);
  EXPECT_FLOAT_EQ(v.norm_eps, 1e-6f);
  EXPECT_EQ(v.activation, VisionActivation::GeluTanh);
}

TEST(SiglipFixtures, VisionModelFlatF32) {
  const std::string dir = (kFixtures / "siglip").string();
  const SiglipCheckpoint ck = read_siglip_config(dir);
  EXPECT_EQ(ck.config_file, dir + "/config.json");
  EXPECT_EQ(ck.model_type, "siglip_vision_model");
  EXPECT_EQ(ck.prefixes, (std::vector<std::string>{"vision_model.", ""}));
  EXPECT_EQ(ck.prefix(), "vision_model.");
  expect_tiny_shape(ck.vision);
  EXPECT_EQ(ck.vision.hf_dir, dir);
  EXPECT_EQ(ck.feature_layers, 2);
  EXPECT_TRUE(ck.feature_post_norm);
  // transformers >= 5 saves a SiglipVisionModel without the vision_model. prefix.
  const std::string weights = dir + "/model.safetensors";
  const json::Value h = test::safetensors_header(weights);
  const auto has = [&](std::string_view n) { return h.find(n) != nullptr; };
  EXPECT_EQ(find_tensor_prefix(ck, has, weights), "");
  expect_tower(h, "", ck.vision, "F32");
  EXPECT_EQ(shape_of(h, "head.probe"), "1,1,32");  // the pooling head is there, and not imported

  // The reference: preprocessed pixels and the tower's output on image.png.
  const json::Value r = test::safetensors_header(dir + "/reference.safetensors");
  std::string dt;
  EXPECT_EQ(shape_of(r, "pixel_values", &dt), "3,32,32");
  EXPECT_EQ(dt, "F32");
  EXPECT_EQ(shape_of(r, "last_hidden_state", &dt), "16,32");
  EXPECT_EQ(dt, "F32");
  const double max_abs = std::stod(r.at("__metadata__").at("max_abs").as_string());
  EXPECT_GT(max_abs, 0.5);
  EXPECT_LT(max_abs, 100.0);
  EXPECT_TRUE(fs::is_regular_file(dir + "/image.png"));
  // The same file named directly gives the same result.
  const SiglipCheckpoint by_file = read_siglip_config(dir + "/config.json");
  EXPECT_EQ(by_file.vision.str(), ck.vision.str());
}

TEST(SiglipFixtures, SiglipModelBf16) {
  const std::string dir = (kFixtures / "siglip_full").string();
  const SiglipCheckpoint ck = read_siglip_config(dir);
  EXPECT_EQ(ck.model_type, "siglip");
  EXPECT_EQ(ck.prefixes, (std::vector<std::string>{"vision_model."}));
  expect_tiny_shape(ck.vision);
  EXPECT_EQ(ck.feature_layers, 2);
  EXPECT_TRUE(ck.feature_post_norm);
  const std::string weights = dir + "/model.safetensors";
  const json::Value h = test::safetensors_header(weights);
  EXPECT_EQ(find_tensor_prefix(ck, [&](std::string_view n) { return h.find(n) != nullptr; }, weights),
            "vision_model.");
  expect_tower(h, "vision_model.", ck.vision, "BF16");
  EXPECT_NE(h.find("text_model.embeddings.token_embedding.weight"), nullptr);
}

TEST(SiglipFixtures, LlavaHubNamesBf16) {
  const std::string dir = (kFixtures / "llava").string();
  const SiglipCheckpoint ck = read_siglip_config(dir);
  EXPECT_EQ(ck.model_type, "llava");
  EXPECT_EQ(ck.prefixes, (std::vector<std::string>{"vision_tower.vision_model.", "vision_tower.",
                                                   "model.vision_tower.vision_model.", "model.vision_tower."}));
  EXPECT_EQ(ck.prefix(), "vision_tower.vision_model.");
  expect_tiny_shape(ck.vision);
  EXPECT_EQ(ck.feature_layers, 2);  // vision_feature_layer = -1: after the last block,
  EXPECT_FALSE(ck.feature_post_norm);  // without post_layernorm
  const std::string weights = dir + "/model.safetensors";
  const json::Value h = test::safetensors_header(weights);
  EXPECT_EQ(find_tensor_prefix(ck, [&](std::string_view n) { return h.find(n) != nullptr; }, weights),
            "vision_tower.vision_model.");
  expect_tower(h, "vision_tower.vision_model.", ck.vision, "BF16");
  EXPECT_NE(h.find("multi_modal_projector.linear_1.weight"), nullptr);
}

TEST(SiglipFixtures, MissingPatchEmbeddingNamesTheFile) {
  const SiglipCheckpoint ck = read_siglip_config((kFixtures / "siglip").string());
  EXPECT_EQ(error_of([&] { find_tensor_prefix(ck, [](std::string_view) { return false; }, "w.safetensors"); }),
            "w.safetensors: no tensor vision_model.embeddings.patch_embedding.weight or "
            "embeddings.patch_embedding.weight (a siglip_vision_model checkpoint per " +
                ck.config_file + ")");
}

// A Config with the vision options registered and `args` parsed (Config does not move).
std::unique_ptr<Config> options(const std::vector<std::string>& args) {
  auto c = std::make_unique<Config>();
  register_vision_options(*c);
  EXPECT_TRUE(parse_args(*c, args));
  return c;
}

TEST(SiglipOptions, ExplicitShapeOptionsMustAgree) {
  const SiglipCheckpoint ck = read_siglip_config((kFixtures / "siglip").string());
  const auto agree = options({"--vision.patch=8", "--vision.image_size=32", "--vision.d_model=32"});
  EXPECT_EQ(error_of([&] { check_options_agree(*agree, ck); }), "");
  const auto unset = options({"--vision.texture=off"});  // the defaults differ but were not given
  EXPECT_EQ(error_of([&] { check_options_agree(*unset, ck); }), "");
  EXPECT_EQ(error_of([&] { check_options_agree(*options({"--vision.patch=16"}), ck); }),
            "vision.patch=16 disagrees with " + ck.config_file +
                ": patch_size=8 (leave vision.patch unset to take the checkpoint's value)");
  EXPECT_EQ(error_of([&] { check_options_agree(*options({"--vision.image_size=64"}), ck); }),
            "vision.image_size=64 disagrees with " + ck.config_file +
                ": image_size=32 (leave vision.image_size unset to take the checkpoint's value)");
  const SiglipCheckpoint full = read_siglip_config((kFixtures / "siglip_full").string());
  for (const auto& [arg, key] : std::vector<std::pair<std::string, std::string>>{
           {"--vision.d_model=64", "vision_config.hidden_size=32"},
           {"--vision.layers=3", "vision_config.num_hidden_layers=2"},
           {"--vision.heads=2", "vision_config.num_attention_heads=4"},
           {"--vision.d_ff=128", "vision_config.intermediate_size=64"}}) {
    const std::string e = error_of([&] { check_options_agree(*options({arg}), full); });
    EXPECT_NE(e.find(" disagrees with " + full.config_file + ": " + key + " (leave "), std::string::npos) << e;
  }
}

TEST(SiglipOptions, ResolveVisionConfig) {
  const std::string dir = (kFixtures / "llava").string();
  const VisionConfig v = resolve_vision_config(
      *options({"--vision.hf", dir, "--vision.texture=off", "--vision.init_std=0.05", "--vision.patch=8"}));
  expect_tiny_shape(v);
  EXPECT_FALSE(v.texture);
  EXPECT_FLOAT_EQ(v.init_std, 0.05f);
  EXPECT_EQ(v.hf_dir, dir);
  // Without a checkpoint: the options, validated.
  const VisionConfig d = resolve_vision_config(*options({"--vision.texture=on"}));
  EXPECT_EQ(d.str(), VisionConfig{}.str());
  EXPECT_EQ(error_of([] { resolve_vision_config(*options({"--vision.patch=15"})); }),
            "vision.image_size=224 is not divisible by vision.patch=15 (the grid has image_size / patch cells per side)");
  EXPECT_EQ(error_of([&] { resolve_vision_config(*options({"--vision.hf", dir, "--vision.layers=12"})); }),
            "vision.layers=12 disagrees with " + dir +
                "/config.json: vision_config.num_hidden_layers=2 (leave vision.layers unset to take the "
                "checkpoint's value)");
  const std::string missing = (kFixtures / "no_such_checkpoint").string();
  EXPECT_EQ(error_of([&] { resolve_vision_config(*options({"--vision.hf", missing})); }),
            "vision.hf=" + missing + ": expected a Hugging Face checkpoint directory (config.json and *.safetensors)");
  const std::string file = dir + "/config.json";
  EXPECT_EQ(error_of([&] { resolve_vision_config(*options({"--vision.hf", file})); }),
            "vision.hf=" + file + ": expected a Hugging Face checkpoint directory (config.json and *.safetensors)");
}

}  // namespace
}  // namespace vlm
