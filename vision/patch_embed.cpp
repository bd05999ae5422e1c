// PatchEmbed: patch rows, patch linear (= the P x P stride-P convolution), position table
// and the zero-initialised texture map; see patch_embed.h.
#include "vision/patch_embed.h"

#include "core/error.h"
#include "nn/linear.h"

namespace vlm {

PixelNorm pixel_norm(const VisionConfig& cfg) {
  PixelNorm n;
  n.scale = 1.f / 255.f;
  n.mean = cfg.image_mean;
  n.stddev = cfg.image_std;
  return n;
}

PatchEmbed::PatchEmbed(const VisionConfig& cfg) : cfg_(cfg) {}

std::vector<ParamSpec> PatchEmbed::param_specs(float init_std) const {
  const int64_t d = cfg_.d_model, P = cfg_.patch, GG = cfg_.tokens();
  std::vector<ParamSpec> v;
  v.push_back(param_spec(kPatchWeight, Shape{d, 3, P, P}, -1, InitKind::Normal, init_std));
  v.push_back(param_spec(kPatchBias, Shape{d}, -1, InitKind::Zeros));
  v.push_back(param_spec(kPositionTable, Shape{GG, d}, -1, InitKind::Normal, init_std));
  if (cfg_.texture) v.push_back(param_spec(kTextureWeight, Shape{d, kVisionTextureChannels}, -1, InitKind::Zeros));
  return v;
}

void PatchEmbed::bind(const ParamTable& t) {
  const int64_t d = cfg_.d_model, K = 3 * int64_t(cfg_.patch) * cfg_.patch;
  const Param& w = t.get(kPatchWeight);
  w_ = (w.work.defined() ? w.work : w.value).view(Shape{d, K});  // the matmul's weights
  bf16_ = t.has_working();
  dw_ = w.grad.defined() ? w.grad.view(Shape{d, K}) : Tensor{};  // undefined: frozen
  b_ = t.get(kPatchBias).value;
  db_ = t.get(kPatchBias).grad;
  pos_ = t.get(kPositionTable).value;
  dpos_ = t.get(kPositionTable).grad;
  if (cfg_.texture) {
    const Param& tw = t.get(kTextureWeight);
    tex_ = tw.work.defined() ? tw.work : tw.value;
    dtex_ = t.get(kTextureWeight).grad;
  }
}

void PatchEmbed::plan(ActPlan& p) { p.add(&patches_, ActPlan::Rows::T, {3 * int64_t(cfg_.patch) * cfg_.patch}); }

namespace {

// The texture of image b as [13, G*G], and a [B*G*G, d] tensor's rows of image b as [G*G, d].
Tensor image_texture(const Tensor& texture, int64_t b, int64_t GG) {
  return texture.slice(b, b + 1).view(Shape{kVisionTextureChannels, GG});
}
Tensor image_rows(const Tensor& x, int64_t b, int64_t GG) { return x.slice(b * GG, (b + 1) * GG); }

}  // namespace

void PatchEmbed::forward(Stream& s, const Tensor& out, const Tensor& pixels, const Tensor& texture) const {
  const int64_t S = cfg_.image_size, G = cfg_.grid(), GG = cfg_.tokens(), d = cfg_.d_model;
  VLM_ASSERT(pixels.dtype() == DType::U8 && pixels.ndim() == 4 && pixels.size(1) == S && pixels.size(2) == S &&
                 pixels.size(3) == 3,
             "patch embedding: pixels ", pixels.str(), ", expected u8[B,", S, ",", S, ",3]");
  const int64_t B = pixels.size(0), T = B * GG;
  VLM_ASSERT(out.shape() == Shape({T, d}) && patches_.rows() == T, "patch embedding: out ", out.str(),
             ", patch rows ", patches_.str(), " for ", B, " images of ", GG, " tokens");
  image_to_patches(s, patches_, pixels, cfg_.patch, pixel_norm(cfg_));
  GemmOpts o;
  o.trans_b = true;
  o.bias = &b_;
  matmul(s, out, patches_, w_, o);                                             // conv P x P, stride P
  bias_add(s, out.view(Shape{B, GG * d}), out.view(Shape{B, GG * d}), pos_.view(Shape{GG * d}));  // + positions
  if (!cfg_.texture) return round_act(s, out, bf16_);
  VLM_ASSERT(texture.defined() && texture.shape() == Shape({B, kVisionTextureChannels, G, G}) &&
                 texture.dtype() == out.dtype(),
             "patch embedding: texture ", texture.defined() ? texture.str() : "undefined", ", expected [", B, ",",
             kVisionTextureChannels, ",", G, ",", G, "] of the embedding's dtype");
  GemmOpts t;  // out_b [GG, d] += texture_b^T [GG, 13] W_tex^T [13, d], one batched call
  t.trans_a = true;
  t.trans_b = true;
  t.beta = 1.f;
  matmul(s, out.view(Shape{B, GG, d}), texture.view(Shape{B, kVisionTextureChannels, GG}), tex_, t);
  round_act(s, out, bf16_);
}

void PatchEmbed::backward(Stream& s, const Tensor& dout, const Tensor& texture) const {
  const int64_t GG = cfg_.tokens(), d = cfg_.d_model, T = dout.size(0), B = T / GG;
  VLM_ASSERT(dout.shape() == Shape({T, d}) && T % GG == 0 && patches_.rows() == T, "patch embedding backward: dout ",
             dout.str(), " after a forward of ", patches_.rows(), " tokens");
  if (!dw_.defined()) return;  // frozen (nn/param_table.h): nothing to compute, the pixels need no gradient
  GemmOpts g;  // dW [d, 3PP] += dout^T patches
  g.trans_a = true;
  g.beta = 1.f;
  matmul(s, dw_, dout, patches_, g);
  bias_backward(s, db_, dout);
  bias_backward(s, dpos_.view(Shape{GG * d}), dout.view(Shape{B, GG * d}));  // sum over the images
  if (!cfg_.texture) return;
  GemmOpts t;  // dW_tex [d, 13] += sum_b dout_b^T [d, GG] texture_b^T [GG, 13] (images in order)
  t.trans_a = true;
  t.trans_b = true;
  t.beta = 1.f;
  for (int64_t b = 0; b < B; ++b) matmul(s, dtex_, image_rows(dout, b, GG), image_texture(texture, b, GG), t);
}

}  // namespace vlm
