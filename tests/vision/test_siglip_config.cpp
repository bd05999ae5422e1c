// Tests of the SigLIP config reader (vision/siglip_config.h) on config.json files
// written by the test: defaults of absent keys, PaliGemma, LLaVA feature layers, and
// malformed files, each refused with one line naming the file and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "config_test_util.h"
#include "vision/siglip_config.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::parse_args;

// Configs written by the test: each case a config.json in a fresh folder.
class SiglipConfigFile : public test::TempDirTest {
 protected:
  std::string F() const { return (dir_ / "config.json").string(); }
  SiglipCheckpoint read(const std::string& text) {
    write("config.json", text);
    return read_siglip_config(dir_.string());
  }
  std::string err(const std::string& text) {
    write("config.json", text);
    return error_of([&] { read_siglip_config(dir_.string()); });
  }
  // A siglip_vision_model config with `extra` members appended.
  std::string vis(const std::string& extra) {
    return err(R"({"model_type": "siglip_vision_model")" + (extra.empty() ? "" : ", " + extra) + "}");
  }
};

TEST_F(SiglipConfigFile, AbsentKeysTakeTransformersDefaults) {
  const SiglipCheckpoint ck = read(R"({"model_type": "siglip_vision_model", "hidden_act": null})");
  const VisionConfig& v = ck.vision;
  EXPECT_EQ(v.image_size, 224);
  EXPECT_EQ(v.patch, 16);
  EXPECT_EQ(v.d_model, 768);
  EXPECT_EQ(v.n_layers, 12);
  EXPECT_EQ(v.n_heads, 12);
  EXPECT_EQ(v.d_ff, 3072);
  EXPECT_FLOAT_EQ(v.norm_eps, 1e-6f);
  EXPECT_EQ(ck.feature_layers, 12);
  // google/siglip-base-patch16-224 writes only what differs from the defaults.
  const SiglipCheckpoint s = read(R"({"model_type": "siglip", "text_config": {"vocab_size": 32000},
      "vision_config": {"model_type": "siglip_vision_model", "patch_size": [16, 16], "image_size": [256, 256],
      "hidden_act": "gelu_new"}})");
  EXPECT_EQ(s.vision.image_size, 256);
  EXPECT_EQ(s.vision.patch, 16);
  EXPECT_EQ(s.vision.grid(), 16);
}

TEST_F(SiglipConfigFile, PaliGemmaAndLlavaFeatureLayers) {
  const SiglipCheckpoint p = read(R"({"model_type": "paligemma", "vision_config": {"hidden_size": 1152,
      "intermediate_size": 4304, "model_type": "siglip_vision_model", "num_attention_heads": 16,
      "num_hidden_layers": 27, "num_image_tokens": 256, "patch_size": 14, "projection_dim": 2048,
      "projector_hidden_act": "gelu_fast", "vision_use_head": false}})");
  EXPECT_EQ(p.prefix(), "vision_tower.vision_model.");
  EXPECT_EQ(p.prefixes.size(), 4u);
  EXPECT_EQ(p.vision.image_size, 224);
  EXPECT_EQ(p.vision.patch, 14);
  EXPECT_EQ(p.vision.grid(), 16);
  EXPECT_EQ(p.vision.d_model, 1152);
  EXPECT_EQ(p.vision.head_dim(), 72);
  EXPECT_EQ(p.feature_layers, 27);
  EXPECT_TRUE(p.feature_post_norm);

  auto llava = [&](const std::string& layer) {
    return R"({"model_type": "llava", "vision_config": {"model_type": "siglip_vision_model",
        "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4})" +
           (layer.empty() ? "" : ", \"vision_feature_layer\": " + layer) + "}";
  };
  EXPECT_EQ(read(llava("")).feature_layers, 3);  // LlavaConfig's default -2
  EXPECT_FALSE(read(llava("")).feature_post_norm);
  EXPECT_EQ(read(llava("-1")).feature_layers, 4);
  EXPECT_EQ(read(llava("-5")).feature_layers, 0);  // hidden_states[0]: the embeddings
  EXPECT_EQ(read(llava("0")).feature_layers, 0);
  EXPECT_EQ(read(llava("4")).feature_layers, 4);
  EXPECT_EQ(err(llava("5")), F() + ": vision_feature_layer=5: expected an integer in [-5, 4]");
  EXPECT_EQ(err(llava("-6")), F() + ": vision_feature_layer=-6: expected an integer in [-5, 4]");
  EXPECT_EQ(err(llava("[-2, -5]")), F() + ": vision_feature_layer: a list of layers is not supported (expected one integer)");
  EXPECT_EQ(err(llava("\"-2\"")), F() + ": vision_feature_layer=\"-2\": expected an integer in [-5, 4]");
}

TEST_F(SiglipConfigFile, StructureErrorsNameFileAndKey) {
  EXPECT_EQ(err("{}"), F() + ": missing key 'model_type'");
  EXPECT_EQ(err("[]"), F() + ": expected a JSON object, got array");
  EXPECT_EQ(err(R"({"model_type": 3})"), F() + ": model_type: expected a JSON string, got number");
  EXPECT_EQ(err(R"({"model_type": "clip_vision_model"})"),
            F() + ": model_type='clip_vision_model': not supported (expected siglip_vision_model, siglip, llava or paligemma)");
  EXPECT_EQ(err(R"({"model_type": "siglip"})"), F() + ": missing key 'vision_config'");
  EXPECT_EQ(err(R"({"model_type": "paligemma", "vision_config": null})"),
            F() + ": vision_config: expected a JSON object, got null");
  EXPECT_EQ(err(R"({"model_type": "siglip", "vision_config": [1]})"),
            F() + ": vision_config: expected a JSON object, got array");
  EXPECT_EQ(err(R"({"model_type": "llava", "vision_config": {"hidden_size": 32}})"),
            F() + ": vision_config.model_type: missing (expected siglip_vision_model; without it transformers builds a CLIP tower)");
  EXPECT_EQ(err(R"({"model_type": "llava", "vision_config": {"model_type": "clip_vision_model"}})"),
            F() + ": vision_config.model_type='clip_vision_model': not supported (expected siglip_vision_model)");
  EXPECT_EQ(err(R"({"model_type": "siglip", "vision_config": {"model_type": "siglip2_vision_model"}})"),
            F() + ": vision_config.model_type='siglip2_vision_model': not supported (expected siglip_vision_model)");
  const std::string bad_json = err(R"({"model_type": "siglip_vision_model",})");
  EXPECT_EQ(bad_json.rfind(F() + ": JSON error at byte ", 0), 0u) << bad_json;
  const std::string dup = err(R"({"model_type": "siglip_vision_model", "model_type": "siglip"})");
  EXPECT_NE(dup.find("duplicate key 'model_type'"), std::string::npos) << dup;
  fs::remove(dir_ / "config.json");
  EXPECT_EQ(error_of([&] { read_siglip_config(dir_.string()); }),
            F() + ": not found (expected a Hugging Face config.json)");
}

TEST_F(SiglipConfigFile, ValueErrorsNameFileAndKey) {
  const std::string f = F() + ": ";
  EXPECT_EQ(vis(R"("hidden_size": "32")"), f + "hidden_size=\"32\": expected an integer in [1, 65536]");
  EXPECT_EQ(vis(R"("hidden_size": 99999999999999999999)"), f + "hidden_size=1e+20: expected an integer in [1, 65536]");
  EXPECT_EQ(vis(R"("num_hidden_layers": 1e300)"), f + "num_hidden_layers=1e+300: expected an integer in [1, 1024]");
  EXPECT_EQ(vis(R"("intermediate_size": 4294967296)"),
            f + "intermediate_size=4294967296: expected an integer in [1, 1048576]");
  EXPECT_EQ(vis(R"("num_attention_heads": 0)"), f + "num_attention_heads=0: expected an integer in [1, 1024]");
  EXPECT_EQ(vis(R"("patch_size": -8)"), f + "patch_size=-8: expected an integer in [1, 16384]");
  EXPECT_EQ(vis(R"("image_size": 32.5)"), f + "image_size=32.5: expected an integer in [1, 16384]");
  EXPECT_EQ(vis(R"("image_size": true)"), f + "image_size=true: expected an integer in [1, 16384]");
  EXPECT_EQ(vis(R"("image_size": [32, 48])"), f + "image_size=[32, 48]: only square images and patches are supported");
  EXPECT_EQ(vis(R"("patch_size": [8])"), f + "patch_size: expected an integer or a list [height, width], got a list of 1");
  EXPECT_EQ(vis(R"("patch_size": [8, "8"])"), f + "patch_size[1]=\"8\": expected an integer in [1, 16384]");
  EXPECT_EQ(vis(R"("layer_norm_eps": 0)"), f + "layer_norm_eps=0: expected a number in [1e-30, 1]");
  EXPECT_EQ(vis(R"("layer_norm_eps": -1e-6)"), f + "layer_norm_eps=-1e-06: expected a number in [1e-30, 1]");
  EXPECT_EQ(vis(R"("layer_norm_eps": "1e-6")"), f + "layer_norm_eps=\"1e-6\": expected a number in [1e-30, 1]");
  EXPECT_EQ(vis(R"("hidden_act": "gelu")"),
            f + "hidden_act='gelu': not supported (accepted: gelu_pytorch_tanh, gelu_new: the tanh approximation the "
                "op library computes; exact-erf gelu would silently compute something else)");
  EXPECT_EQ(vis(R"("hidden_act": 5)"), f + "hidden_act: expected a JSON string, got number");
  EXPECT_EQ(vis(R"("num_channels": 4)"), f + "num_channels=4: expected 3 (RGB images)");
  EXPECT_EQ(vis(R"("num_channels": 1)"), f + "num_channels=1: expected 3 (RGB images)");
  // Consistency checks of VisionConfig::validate(), with the file's key names.
  EXPECT_EQ(vis(R"("image_size": 30, "patch_size": 8)"),
            f + "image_size=30 is not divisible by patch_size=8 (the grid has image_size / patch cells per side)");
  EXPECT_EQ(vis(R"("image_size": 16, "patch_size": 32)"), f + "patch_size=32: expected a patch side in [1, image_size=16]");
  EXPECT_EQ(err(R"({"model_type": "siglip", "vision_config": {"hidden_size": 30, "num_attention_heads": 4}})"),
            f + "vision_config.hidden_size=30 is not divisible by vision_config.num_attention_heads=4");
}

}  // namespace
}  // namespace vlm
