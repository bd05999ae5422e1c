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
// Parameter names (Hugging Face SigLIP, without the tower's prefix; the texture map is
// ours): below. Gradients follow the rule of nn/context.h (parameter grads +=); pixels
// and the texture array are data, so no input gradient is computed.
// Element type: the parameter table's (f32; f64 on CPU for gradient checks); the texture
// array has the same dtype.
#pragma once
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

// The image normalisation of cfg for the op (rescale 1/255, cfg's mean and std).
PixelNorm pixel_norm(const VisionConfig& cfg);

class PatchEmbed {
 public:
  explicit PatchEmbed(const VisionConfig& cfg);

  // The parameters above (replicated): patch weight and positions N(0, init_std), patch
  // bias 0, texture weight 0 (only when cfg.texture).
  std::vector<ParamSpec> param_specs(float init_std) const;
  void bind(const ParamTable& t);
  // Declares the patch rows [T, 3PP] (T = tokens of the micro-batch, B*G*G).
  void plan(ActPlan& p);

  // pixels [B,S,S,3] u8; texture [B,13,G,G] (required iff cfg.texture); out [B*G*G, d].
  void forward(Stream& s, const Tensor& out, const Tensor& pixels, const Tensor& texture) const;
  // dout [B*G*G, d] (after forward with the same texture): parameter grads +=.
  void backward(Stream& s, const Tensor& dout, const Tensor& texture) const;

 private:
  VisionConfig cfg_;
  Tensor w_, dw_, b_, db_;      // patch weight viewed [d, 3PP] (bf16 working copy at BF16), bias [d]
  bool bf16_ = false;           // train.precision=bf16: the output is rounded to bf16
  Tensor pos_, dpos_;           // [G*G, d]
  Tensor tex_, dtex_;           // [d, 13] (texture on)
  Tensor patches_;              // [T, 3PP] (planned)
};

}  // namespace vlm
