// VisionConfig options (`vision.*`) and validation; see vision_config.h.
#include "vision/vision_config.h"

#include <cmath>

#include "base/error.h"

namespace vlm {

const char* activation_name(VisionActivation a) {
  switch (a) {
    case VisionActivation::GeluTanh: return "gelu_pytorch_tanh";
  }
  return "?";
}

VisionKeys VisionKeys::options() {
  const OptionSet<VisionConfig>& o = vision_options();
  // norm_eps is not an option (SigLIP's 1e-6, or a checkpoint's layer_norm_eps).
  return {"",
          o.name_of(&VisionConfig::image_size),
          o.name_of(&VisionConfig::patch),
          o.name_of(&VisionConfig::d_model),
          o.name_of(&VisionConfig::n_layers),
          o.name_of(&VisionConfig::n_heads),
          o.name_of(&VisionConfig::d_ff),
          "vision norm_eps"};
}

void VisionConfig::validate(const VisionKeys& k) const {
  const std::string& src = k.source;
  VLM_REQUIRE(image_size >= 1 && image_size <= kMaxImageSize, src, k.image_size, "=", image_size,
              ": expected an image side in [1, ", kMaxImageSize, "]");
  VLM_REQUIRE(patch >= 1 && patch <= image_size, src, k.patch, "=", patch, ": expected a patch side in [1, ",
              k.image_size, "=", image_size, "]");
  VLM_REQUIRE(image_size % patch == 0, src, k.image_size, "=", image_size, " is not divisible by ", k.patch, "=",
              patch, " (the grid has image_size / patch cells per side)");
  VLM_REQUIRE(n_layers >= 1 && n_layers <= kMaxVisionLayers, src, k.n_layers, "=", n_layers, ": expected [1, ",
              kMaxVisionLayers, "]");
  VLM_REQUIRE(n_heads >= 1 && n_heads <= kMaxVisionHeads, src, k.n_heads, "=", n_heads, ": expected [1, ",
              kMaxVisionHeads, "]");
  VLM_REQUIRE(d_model >= 1 && d_model <= kMaxVisionWidth, src, k.d_model, "=", d_model, ": expected [1, ",
              kMaxVisionWidth, "]");
  VLM_REQUIRE(d_model % n_heads == 0, src, k.d_model, "=", d_model, " is not divisible by ", k.n_heads, "=",
              n_heads);
  VLM_REQUIRE(d_ff >= 1 && d_ff <= kMaxVisionFF, src, k.d_ff, "=", d_ff, ": expected [1, ", kMaxVisionFF, "]");
  VLM_REQUIRE(norm_eps > 0 && std::isfinite(norm_eps), src, k.norm_eps, "=", norm_eps, ": expected > 0");
  if (conv_stem != 0) {
    VLM_REQUIRE(conv_stem > 0 && conv_stem <= kMaxVisionWidth, "vision.conv_stem=", conv_stem,
                ": expected 0 (no stem) or stem channels in [1, ", kMaxVisionWidth, "]");
    VLM_REQUIRE(patch >= 2 && (patch & (patch - 1)) == 0, src, k.patch, "=", patch,
                " with vision.conv_stem=", conv_stem, ": the stem halves the image log2(patch) times, so the patch "
                "must be a power of two >= 2");
    VLM_REQUIRE(stem_width(stem_layers() - 1) <= kMaxVisionWidth, "vision.conv_stem=", conv_stem, ": its last layer has ",
                stem_width(stem_layers() - 1), " channels, expected at most ", kMaxVisionWidth);
    VLM_REQUIRE(hf_dir.empty(), "vision.conv_stem=", conv_stem, " with vision.hf=", hf_dir,
                ": a SigLIP checkpoint has no convolutional stem (set vision.conv_stem=0)");
  }
  VLM_REQUIRE(conv_stem > 0 || stem_init == StemInit::Torch,
              "vision.stem_init=he with vision.conv_stem=0: there is no stem to initialise");
  VLM_REQUIRE(init_std >= 0 && std::isfinite(init_std), "vision.init_std=", init_std, ": expected >= 0");
  for (int c = 0; c < 3; ++c)
    VLM_REQUIRE(image_std[c] > 0 && std::isfinite(image_std[c]) && std::isfinite(image_mean[c]),
                "vision image normalisation: channel ", c, " has mean ", image_mean[c], " and std ",
                image_std[c], " (expected finite values, std > 0)");
}

int VisionConfig::stem_layers() const {
  int l = 0;
  if (conv_stem > 0)
    for (int p = patch; p > 1; p /= 2) ++l;
  return l;
}

int64_t VisionConfig::stem_width(int layer) const { return conv_stem << layer; }

std::string VisionConfig::str() const {
  return cat("S=", image_size, " P=", patch, " G=", grid(), " d=", d_model, " L=", n_layers, " NH=", n_heads,
             " F=", d_ff, " eps=", norm_eps, " act=", activation_name(activation),
             texture ? " texture" : " no-texture", conv_stem > 0 ? cat(" stem=", conv_stem, "x", stem_layers(), stem_init == StemInit::He ? " he" : "")
                           : "",
             hf_dir.empty() ? "" : cat(" hf=", hf_dir));
}

const OptionSet<VisionConfig>& vision_options() {
  static const OptionSet<VisionConfig> set([](OptionSet<VisionConfig>& s) {
    s.option("vision.image_size", &VisionConfig::image_size,
             "side S of the square (letterboxed) input image in pixels; G = S / P")
        .range(1, kMaxImageSize);
    s.option("vision.patch", &VisionConfig::patch, "patch side P in pixels (must divide vision.image_size)")
        .range(1, kMaxImageSize);
    s.option("vision.d_model", &VisionConfig::d_model, "encoder width d_v").range(1, kMaxVisionWidth);
    s.option("vision.layers", &VisionConfig::n_layers, "encoder transformer blocks").range(1, kMaxVisionLayers);
    s.option("vision.heads", &VisionConfig::n_heads, "encoder attention heads (must divide vision.d_model)")
        .range(1, kMaxVisionHeads);
    s.option("vision.d_ff", &VisionConfig::d_ff, "encoder MLP hidden width").range(1, kMaxVisionFF);
    s.option("vision.texture", &VisionConfig::texture,
             "add the 13-channel texture array through a zero-initialised linear (on|off)")
        .choices({{"on", true}, {"off", false}});
    s.option("vision.conv_stem", &VisionConfig::conv_stem,
             "channels C of a convolutional stem in place of the patch convolution: log2(vision.patch) stride-2 "
             "3x3 convolutions with C, 2C, ... channels and GELU, then a 1x1 projection (0 = none, as SigLIP)")
        .range(0, kMaxVisionWidth);
    s.option("vision.stem_init", &VisionConfig::stem_init,
             "initialisation of the stem's convolutions: torch = N(0, 1/(3 fan_in)), PyTorch's default; he = "
             "N(0, 2/fan_in), which keeps the signal's scale through the stem's GELUs")
        .choices({{"torch", StemInit::Torch}, {"he", StemInit::He}});
    s.option("vision.hf", &VisionConfig::hf_dir,
             "Hugging Face SigLIP checkpoint directory (SiglipVisionModel, SiglipModel, LLaVA or PaliGemma); "
             "its config.json sets the encoder's shape; empty = random init");
    s.option("vision.init_std", &VisionConfig::init_std, "std of the normal initialisation of the encoder's weights")
        .range(0.0, 10.0);
  });
  return set;
}

void register_vision_options(Config& cfg) { vision_options().add_to(cfg); }
VisionConfig read_vision_config(const Config& cfg) { return vision_options().read(cfg); }

}  // namespace vlm
