// PatchEmbed: the input layer of the vision encoder. For B images of S x S pixels and
// the G x G grid (G = S / P), token t = b*G*G + cell (cells row-major):
//   patches [T, 3*P*P] = image_to_patches(pixels [B,S,S,3] u8)      (core/ops/image.inc:
//                        x / 255, then (x - mean) / std per channel: SigLIP's preprocessing)
//   out [T, d]  = patches W_patch^T + b_patch       the P x P, stride P convolution, its
//                                                   weight [d,3,P,P] seen as [d, 3PP]
//               + pos[cell]                        learned position table [G*G, d]
//               + texture[b, :, cell] W_tex^T      (vision.texture on) the 13 channels of
//                                                   the cell, W_tex [d, 13], no bias,
//                                                   ZERO-initialised: an imported tower
//                                                   starts out unchanged
// With a convolutional stem (cfg.conv_stem = C > 0; vision/vision_config.h) the patch rows
// are replaced: image [B,3,S,S] (image_to_patches with one patch per image, which is the
// normalised image in NCHW) -> L = log2(P) times { 3x3 conv, stride 2, pad 1 (C, 2C, ...
// channels), GELU } -> maps [B, C_L, G, G] -> rows [B*G*G, C_L] (maps_to_rows); W_patch
// is then the 1x1 projection [d, C_L, 1, 1]. Positions and texture as above.
// Parameter names (Hugging Face SigLIP, without the tower's prefix; the texture map and
// the stem are ours): below. Gradients follow the rule of nn/context.h (parameter grads +=); pixels
// and the texture array are data, so no input gradient is computed.
// Element type: the parameter table's (f32; f64 on CPU for gradient checks); the texture
// array has the same dtype. With a bf16 working copy (train.precision=bf16) the patch
// rows and the output are bf16, the matmuls read bf16 copies of the texture and of the
// stem's rows; the stem itself runs in f32 (docs/training.md, "Numerics").
#pragma once
#include <string>
#include <vector>

#include "core/ops.h"
#include "nn/act_plan.h"
#include "nn/param_table.h"
#include "vision/vision_config.h"

namespace vlm {

inline constexpr const char* kPatchWeight = "embeddings.patch_embedding.weight";    // [d, 3, P, P]
inline constexpr const char* kPatchBias = "embeddings.patch_embedding.bias";        // [d]
inline constexpr const char* kPositionTable = "embeddings.position_embedding.weight";  // [G*G, d]
inline constexpr const char* kTextureWeight = "embeddings.texture_embedding.weight";   // [d, 13]
std::string stem_weight_name(int layer);  // "embeddings.stem.<l>.weight" [C_l, C_{l-1}, 3, 3] (C_{-1} = 3)
std::string stem_bias_name(int layer);    // "embeddings.stem.<l>.bias"   [C_l]

// The image normalisation of cfg for the op (rescale 1/255, cfg's mean and std).
PixelNorm pixel_norm(const VisionConfig& cfg);

class PatchEmbed {
 public:
  explicit PatchEmbed(const VisionConfig& cfg);

  // The parameters above (replicated): patch weight and positions N(0, init_std), patch
  // bias 0, texture weight 0 (only when cfg.texture). With a stem, its convolutions and
  // the 1x1 projection are N(0, 1/(3 fan_in)) (the std of PyTorch's default conv init)
  // or, with vision.stem_init=he, N(0, 2/fan_in) (vision/vision_config.h, StemInit),
  // their biases 0.
  std::vector<ParamSpec> param_specs(float init_std) const;
  void bind(const ParamTable& t);
  // Declares the patch rows [T, 3PP] (T = tokens of the micro-batch, B*G*G; with a stem
  // the same buffer holds the NCHW image) and the stem's maps and their gradients.
  void plan(ActPlan& p);
  // Multiply-adds per image of forward and backward (the backward computes no pixel
  // gradient), for throughput figures.
  double forward_macs_per_image() const;
  double backward_macs_per_image() const;

  // pixels [B,S,S,3] u8; texture [B,13,G,G] (required iff cfg.texture); out [B*G*G, d].
  void forward(Stream& s, const Tensor& out, const Tensor& pixels, const Tensor& texture) const;
  // dout [B*G*G, d] (after forward with the same texture): parameter grads +=.
  void backward(Stream& s, const Tensor& dout, const Tensor& texture) const;

 private:
  VisionConfig cfg_;
  Tensor w_, dw_, b_, db_;      // patch weight viewed [d, 3PP] (bf16 working copy at BF16), bias [d]
  bool bf16_ = false;           // train.precision=bf16: bf16 activations
  Tensor pos_, dpos_;           // [G*G, d]
  Tensor tex_, dtex_;           // [d, 13] (texture on)
  Tensor patches_;              // [T, 3PP] (planned)
  struct StemLayer {
    Tensor w, dw, b, db;        // [C_l, C_{l-1}, 3, 3], [C_l]
    Tensor pre, act, dpre, dact;  // conv output, GELU(pre) and their gradients, planned [T, ...]
  };
  std::vector<StemLayer> stem_;  // empty without a stem
  Tensor rows_, drows_;          // stem: the last maps as rows [T, C_L] and their gradient
  Tensor rows16_;                // bf16: rows_ in bf16 (the 1x1 projection's input)
  Tensor tex16_;                 // bf16 with texture: the texture array in bf16 [T, 13]

  // The input rows of W_patch: the patch rows, or the stem's rows (in bf16 at BF16).
  const Tensor& embed_rows() const { return stem_.empty() ? patches_ : rows16_.defined() ? rows16_ : rows_; }
  // The texture array the texture map reads: texture, or its bf16 copy [B,13,G,G].
  Tensor texture_in(const Tensor& texture, int64_t B) const;
  void stem_forward(Stream& s, const Tensor& pixels, int64_t B) const;
  void stem_backward(Stream& s, const Tensor& dout, int64_t B) const;
};

}  // namespace vlm
