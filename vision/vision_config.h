// VisionConfig: the shape of the vision encoder, a ViT over S x S RGB images cut into
// P x P patches (plus, optionally, the 13-channel texture array on the same grid),
// declared once under `vision.*` (vision_options()) and read into a plain struct.
//
// Grid: G = S / P cells per side, G*G tokens per image, row-major (cell (r, c) is token
// r*G + c), the same grid as the texture array.
// Defaults: SigLIP-B/16 at 224 px (google/siglip-base-patch16-224): S=224, P=16 (G=14),
// d_model 768, 12 layers, 12 heads, d_ff 3072, LayerNorm eps 1e-6, GELU with the tanh
// approximation, pixels rescaled to [0,1] then normalised with mean 0.5 / std 0.5 per
// channel (so to [-1,1]). A checkpoint (`vision.hf`) replaces the shape: see
// vision/siglip_config.h.
// Stem (conv_stem = C > 0; vision/patch_embed.h): instead of the P x P patch convolution,
// log2(P) stride-2 3x3 convolutions with C, 2C, 4C, ... channels, each followed by GELU,
// then a 1x1 projection to d_model ("early convolutions", a CNN front end on the same
// G x G grid). A SigLIP checkpoint has no stem, so vision.hf needs conv_stem = 0.
// Invariants after validate(): every size positive and within the k*Max limits below,
// S % P == 0, d_model % n_heads == 0, norm_eps > 0, image std > 0; with a stem, P is a
// power of two >= 2 and the last stem width within kMaxVisionWidth.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/options.h"
#include "core/texture_channels.h"

namespace vlm {


// Upper limits of the sizes (typos and hostile files are refused before any allocation).
inline constexpr int kMaxImageSize = 16384;    // S (and P <= S)
inline constexpr int64_t kMaxVisionWidth = 65536;  // d_model
inline constexpr int64_t kMaxVisionFF = 1 << 20;   // d_ff
inline constexpr int kMaxVisionLayers = 1024;
inline constexpr int kMaxVisionHeads = 1024;

// The op library's GELU is the tanh approximation (core/ops/elementwise.inc), which is
// what SigLIP uses (hidden_act gelu_pytorch_tanh).
enum class VisionActivation { GeluTanh };
// The initialisation of the stem's convolutions and its 1x1 projection (vision/patch_embed.h):
// Torch = N(0, 1/(3 fan_in)), the std of PyTorch's default conv init, under which each
// layer scales a signal by about sqrt(1/3) and GELU about halves it again (the four
// stages of a 16-pixel patch put out a few thousandths of their input, and pass back as
// little gradient); He = N(0, 2/fan_in), which keeps the scale through the GELUs (He et
// al.'s rule for rectifiers). Only with a stem (conv_stem > 0).
enum class StemInit { Torch, He };
const char* activation_name(VisionActivation a);  // the Hugging Face hidden_act name

// The names validate() puts in its messages: the `vision.*` options by default, or the
// keys of the file a config was read from (source "<dir>/config.json: ", names such as
// "vision_config.patch_size"). A message reads "<source><name>=<value> ...".
struct VisionKeys {
  std::string source;
  std::string image_size, patch, d_model, n_layers, n_heads, d_ff, norm_eps;
  static VisionKeys options();
};

struct VisionConfig {
  int image_size = 224;   // S, pixels per side of the (letterboxed) input image
  int patch = 16;         // P, pixels per side of a patch
  int64_t d_model = 768;  // d_v, encoder width
  int n_layers = 12;      // transformer blocks
  int n_heads = 12;       // attention heads (bidirectional attention)
  int64_t d_ff = 3072;    // MLP hidden width
  bool texture = true;    // add the zero-initialised linear of the 13 texture channels
  int64_t conv_stem = 0;  // C: channels of the first stem convolution; 0 = no stem
  StemInit stem_init = StemInit::Torch;  // the stem's initialisation (above)
  std::string hf_dir;     // Hugging Face checkpoint directory; empty = random init
  float init_std = 0.02f; // std of the normal initialisation (no checkpoint)
  float norm_eps = 1e-6f; // LayerNorm epsilon
  VisionActivation activation = VisionActivation::GeluTanh;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};  // RGB, on pixels scaled to [0,1]
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};

  int grid() const { return image_size / patch; }                // G
  int64_t tokens() const { return int64_t(grid()) * grid(); }    // G*G per image
  int64_t head_dim() const { return d_model / n_heads; }
  int stem_layers() const;                  // log2(P) with a stem, else 0
  int64_t stem_width(int layer) const;      // channels after stem layer l (0-based): C << l

  // Throws UserError naming the offending key (see VisionKeys) when the config is invalid.
  void validate(const VisionKeys& keys = VisionKeys::options()) const;
  std::string str() const;  // one line for logs
};

// The `vision.*` options, one per field above but norm_eps, activation and the image
// normalisation (base/options.h); vision.texture is a choice on|off.
const OptionSet<VisionConfig>& vision_options();
void register_vision_options(Config& cfg);
// Reads the options registered above (does not validate: call validate(); does not read
// vision.hf's checkpoint: see resolve_vision_config in vision/siglip_config.h).
VisionConfig read_vision_config(const Config& cfg);

}  // namespace vlm
