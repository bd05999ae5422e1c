// Tests of VisionConfig (vision/vision_config.h): the `vision.*` options' defaults
// (SigLIP-B/16 at 224 px), values from the command line and INI files, each bad value
// refused with a message naming the option, validate(); and the
// range-checked JSON number getters (base/json.h int_in / double_in) they build on.
#include <gtest/gtest.h>

#include <cmath>

#include "config_test_util.h"
#include "vision/vision_config.h"

namespace vlm {
namespace {

using test::error_of;
using test::parse_args;

VisionConfig from_args(const std::vector<std::string>& args) {
  Config c;
  register_vision_options(c);
  EXPECT_TRUE(parse_args(c, args));
  return read_vision_config(c);
}

std::string parse_error(const std::vector<std::string>& args) {
  Config c;
  register_vision_options(c);
  return error_of([&] { parse_args(c, args); });
}

TEST(VisionOptions, DefaultsAreSiglipBase16At224) {
  const VisionConfig v = from_args({});
  EXPECT_EQ(v.image_size, 224);
  EXPECT_EQ(v.patch, 16);
  EXPECT_EQ(v.grid(), 14);
  EXPECT_EQ(v.tokens(), 196);
  EXPECT_EQ(v.d_model, 768);
  EXPECT_EQ(v.n_layers, 12);
  EXPECT_EQ(v.n_heads, 12);
  EXPECT_EQ(v.head_dim(), 64);
  EXPECT_EQ(v.d_ff, 3072);
  EXPECT_TRUE(v.texture);
  EXPECT_EQ(v.hf_dir, "");
  EXPECT_FLOAT_EQ(v.init_std, 0.02f);
  EXPECT_FLOAT_EQ(v.norm_eps, 1e-6f);
  EXPECT_EQ(v.activation, VisionActivation::GeluTanh);
  EXPECT_STREQ(activation_name(v.activation), "gelu_pytorch_tanh");
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(v.image_mean[c], 0.5f);
    EXPECT_FLOAT_EQ(v.image_std[c], 0.5f);
  }
  EXPECT_NO_THROW(v.validate());
  EXPECT_EQ(v.str(), "S=224 P=16 G=14 d=768 L=12 NH=12 F=3072 eps=1e-06 act=gelu_pytorch_tanh texture");
}

TEST(VisionOptions, CommandLineAndIniValues) {
  const VisionConfig v = from_args({"--vision.image_size=384", "--vision.patch", "14", "--vision.d_model=1152",
                                    "--vision.layers=27", "--vision.heads=16", "--vision.d_ff=4304",
                                    "--vision.texture=off", "--vision.hf=/some/dir", "--vision.init_std=0.01"});
  EXPECT_EQ(v.image_size, 384);
  EXPECT_EQ(v.patch, 14);
  EXPECT_EQ(v.d_model, 1152);
  EXPECT_EQ(v.n_layers, 27);
  EXPECT_EQ(v.n_heads, 16);
  EXPECT_EQ(v.d_ff, 4304);
  EXPECT_FALSE(v.texture);
  EXPECT_EQ(v.hf_dir, "/some/dir");
  EXPECT_FLOAT_EQ(v.init_std, 0.01f);
  // 384 / 14 is not an integer: the parse succeeds, validate() refuses.
  EXPECT_EQ(error_of([&] { v.validate(); }),
            "vision.image_size=384 is not divisible by vision.patch=14 (the grid has image_size / patch cells per side)");
}

class VisionOptionsIni : public test::TempDirTest {};

TEST_F(VisionOptionsIni, FileValuesAndCommandLineWins) {
  const std::string ini = write("v.cfg", "[vision]\nimage_size = 448\npatch = 14\ntexture = off\ntexture = on\n");
  {
    Config c;
    register_vision_options(c);
    EXPECT_EQ(error_of([&] { parse_args(c, {"--config", ini}); }), ini + ":5: 'vision.texture' is already set on line 4");
  }
  write("v.cfg", "[vision]\nimage_size = 448\npatch = 14\ntexture = on\n");
  const VisionConfig w = from_args({"--config", ini, "--vision.patch=16"});  // command line wins
  EXPECT_EQ(w.image_size, 448);
  EXPECT_EQ(w.patch, 16);
  EXPECT_EQ(w.grid(), 28);
  EXPECT_TRUE(w.texture);
}

TEST(VisionOptions, BadValuesNameTheOption) {
  EXPECT_EQ(parse_error({"--vision.patch=0"}), "--vision.patch: 0 is out of range [1, 16384]");
  EXPECT_EQ(parse_error({"--vision.image_size=-224"}), "--vision.image_size: -224 is out of range [1, 16384]");
  EXPECT_EQ(parse_error({"--vision.image_size=99999999999999999999"}),
            "--vision.image_size: '99999999999999999999' is not an integer");
  EXPECT_EQ(parse_error({"--vision.d_model=70000"}), "--vision.d_model: 70000 is out of range [1, 65536]");
  EXPECT_EQ(parse_error({"--vision.layers=0"}), "--vision.layers: 0 is out of range [1, 1024]");
  EXPECT_EQ(parse_error({"--vision.heads=2000"}), "--vision.heads: 2000 is out of range [1, 1024]");
  EXPECT_EQ(parse_error({"--vision.d_ff=0"}), "--vision.d_ff: 0 is out of range [1, 1048576]");
  EXPECT_EQ(parse_error({"--vision.texture=maybe"}), "--vision.texture: 'maybe' is not one of on, off");
  EXPECT_EQ(parse_error({"--vision.init_std=-1"}), "--vision.init_std: -1 is out of range [0, 10]");
  EXPECT_EQ(parse_error({"--vision.d_modle=3"}), "unknown option '--vision.d_modle' (did you mean '--vision.d_model'?)");
}

TEST(VisionOptions, ValidateNamesTheOption) {
  auto err = [](auto edit) {
    VisionConfig v;
    edit(v);
    return error_of([&] { v.validate(); });
  };
  EXPECT_EQ(err([](VisionConfig&) {}), "");
  EXPECT_EQ(err([](VisionConfig& v) { v.patch = 15; }),
            "vision.image_size=224 is not divisible by vision.patch=15 (the grid has image_size / patch cells per side)");
  EXPECT_EQ(err([](VisionConfig& v) { v.patch = 448; }),
            "vision.patch=448: expected a patch side in [1, vision.image_size=224]");
  EXPECT_EQ(err([](VisionConfig& v) { v.d_model = 100; }), "vision.d_model=100 is not divisible by vision.heads=12");
  EXPECT_EQ(err([](VisionConfig& v) { v.n_heads = 0; }), "vision.heads=0: expected [1, 1024]");
  EXPECT_EQ(err([](VisionConfig& v) { v.n_layers = -1; }), "vision.layers=-1: expected [1, 1024]");
  EXPECT_EQ(err([](VisionConfig& v) { v.d_ff = 0; }), "vision.d_ff=0: expected [1, 1048576]");
  EXPECT_EQ(err([](VisionConfig& v) { v.image_size = 0; }), "vision.image_size=0: expected an image side in [1, 16384]");
  EXPECT_EQ(err([](VisionConfig& v) { v.norm_eps = 0; }), "vision norm_eps=0: expected > 0");
  EXPECT_EQ(err([](VisionConfig& v) { v.image_std[1] = 0; }),
            "vision image normalisation: channel 1 has mean 0.5 and std 0 (expected finite values, std > 0)");
  // The convolutional stem: log2(P) layers, P a power of two, no checkpoint.
  EXPECT_EQ(err([](VisionConfig& v) { v.conv_stem = 32; }), "");
  EXPECT_EQ(err([](VisionConfig& v) {
              v.conv_stem = 8;
              v.image_size = 48;
              v.patch = 12;
            }),
            "vision.patch=12 with vision.conv_stem=8: the stem halves the image log2(patch) times, so the patch must be "
            "a power of two >= 2");
  EXPECT_EQ(err([](VisionConfig& v) {
              v.conv_stem = 8;
              v.hf_dir = "ckpt";
            }),
            "vision.conv_stem=8 with vision.hf=ckpt: a SigLIP checkpoint has no convolutional stem (set vision.conv_stem=0)");
  EXPECT_EQ(err([](VisionConfig& v) { v.stem_init = StemInit::He; }),
            "vision.stem_init=he with vision.conv_stem=0: there is no stem to initialise");
  EXPECT_EQ(err([](VisionConfig& v) {
              v.conv_stem = 32;
              v.stem_init = StemInit::He;
            }),
            "");
  EXPECT_EQ(err([](VisionConfig& v) { v.conv_stem = 40000; }),
            "vision.conv_stem=40000: its last layer has 320000 channels, expected at most 65536");
  {
    VisionConfig v;
    v.conv_stem = 32;
    EXPECT_EQ(v.stem_layers(), 4);  // P = 16
    EXPECT_EQ(v.stem_width(3), 256);
  }
  // Keys of another source (what the SigLIP reader passes) replace the option names.
  VisionKeys k{"x/config.json: ", "image_size", "patch_size", "hidden_size", "num_hidden_layers",
               "num_attention_heads", "intermediate_size", "layer_norm_eps"};
  VisionConfig v;
  v.image_size = 30;
  v.patch = 8;
  EXPECT_EQ(error_of([&] { v.validate(k); }),
            "x/config.json: image_size=30 is not divisible by patch_size=8 (the grid has image_size / patch cells per side)");
}

TEST(JsonRangeChecks, IntegersAndNumbers) {
  auto v = [](const char* text) { return json::parse(text); };
  EXPECT_EQ(json::int_in(v("5"), 1, 10, "f: k"), 5);
  EXPECT_EQ(json::int_in(v("-3"), -5, 0, "f: k"), -3);
  EXPECT_EQ(error_of([&] { json::int_in(v("0"), 1, 10, "f: k"); }), "f: k=0: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("-1"), 1, 10, "f: k"); }), "f: k=-1: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("11"), 1, 10, "f: k"); }), "f: k=11: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("1.5"), 1, 10, "f: k"); }), "f: k=1.5: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("4.0"), 1, 10, "f: k"); }), "f: k=4: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("\"5\""), 1, 10, "f: k"); }), "f: k=\"5\": expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("null"), 1, 10, "f: k"); }), "f: k=null: expected an integer in [1, 10]");
  // Beyond int64: kept as a double by the parser, refused here.
  EXPECT_EQ(error_of([&] { json::int_in(v("99999999999999999999"), 1, 10, "f: k"); }),
            "f: k=1e+20: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("1e300"), 1, 10, "f: k"); }), "f: k=1e+300: expected an integer in [1, 10]");
  EXPECT_EQ(error_of([&] { json::int_in(v("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]"), 1, 10, "f: k"); }),
            "f: k=[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,...: expected an integer in [1, 10]");

  EXPECT_DOUBLE_EQ(json::double_in(v("1e-06"), 0, 1, "f: eps"), 1e-6);
  EXPECT_DOUBLE_EQ(json::double_in(v("1"), 0, 1, "f: eps"), 1.0);
  EXPECT_EQ(error_of([&] { json::double_in(v("2.5"), 0, 1, "f: eps"); }), "f: eps=2.5: expected a number in [0, 1]");
  EXPECT_EQ(error_of([&] { json::double_in(v("true"), 0, 1, "f: eps"); }), "f: eps=true: expected a number in [0, 1]");
  EXPECT_EQ(error_of([&] { json::double_in(json::Value::number(std::nan("")), 0, 1, "f: eps"); }),
            "f: eps=nan: expected a number in [0, 1]");
}

}  // namespace
}  // namespace vlm
