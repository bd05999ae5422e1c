// PatchEmbed: patch rows (or the convolutional stem's rows), patch linear (= the P x P
// stride-P convolution, or the stem's 1x1 projection), position table and the
// zero-initialised texture map; see patch_embed.h.
#include "vision/patch_embed.h"

#include <cmath>

#include "base/error.h"

namespace vlm {

PixelNorm pixel_norm(const VisionConfig& cfg) {
  PixelNorm n;
  n.scale = 1.f / 255.f;
  n.mean = cfg.image_mean;
  n.stddev = cfg.image_std;
  return n;
}

std::string stem_weight_name(int layer) { return cat("embeddings.stem.", layer, ".weight"); }
std::string stem_bias_name(int layer) { return cat("embeddings.stem.", layer, ".bias"); }

namespace {

// Stem layer l: input channels, output channels, output side (S >> (l + 1)).
int64_t stem_in(const VisionConfig& c, int l) { return l == 0 ? 3 : c.stem_width(l - 1); }
int64_t stem_side(const VisionConfig& c, int l) { return int64_t(c.image_size) >> (l + 1); }
// The std of a stem weight of fan_in inputs (vision/vision_config.h, StemInit).
float fan_in_std(StemInit init, int64_t fan_in) {
  return float(std::sqrt((init == StemInit::He ? 2.0 : 1.0 / 3.0) / double(fan_in)));
}

}  // namespace

PatchEmbed::PatchEmbed(const VisionConfig& cfg) : cfg_(cfg), stem_(size_t(cfg.stem_layers())) {}

std::vector<ParamSpec> PatchEmbed::param_specs(float init_std) const {
  const int64_t d = cfg_.d_model, P = cfg_.patch, GG = cfg_.tokens();
  std::vector<ParamSpec> v;
  const int L = cfg_.stem_layers();
  for (int l = 0; l < L; ++l) {
    const int64_t cin = stem_in(cfg_, l), cout = cfg_.stem_width(l);
    v.push_back(param_spec(stem_weight_name(l), Shape{cout, cin, 3, 3}, -1, InitKind::Normal,
                           fan_in_std(cfg_.stem_init, cin * 9)));
    v.back().f32_reads = true;  // the stem's convolution reads f32 weights
    v.push_back(param_spec(stem_bias_name(l), Shape{cout}, -1, InitKind::Zeros));
  }
  if (L > 0) {
    const int64_t c = cfg_.stem_width(L - 1);
    v.push_back(param_spec(kPatchWeight, Shape{d, c, 1, 1}, -1, InitKind::Normal, fan_in_std(cfg_.stem_init, c)));
  } else {
    v.push_back(param_spec(kPatchWeight, Shape{d, 3, P, P}, -1, InitKind::Normal, init_std));
  }
  v.push_back(param_spec(kPatchBias, Shape{d}, -1, InitKind::Zeros));
  v.push_back(param_spec(kPositionTable, Shape{GG, d}, -1, InitKind::Normal, init_std));
  v.back().f32_reads = true;  // added to the patch features in f32
  v.back().no_decay = true;
  if (cfg_.texture) {
    v.push_back(param_spec(kTextureWeight, Shape{d, kTextureChannels}, -1, InitKind::Zeros));
    v.back().no_decay = true;
  }
  return v;
}

void PatchEmbed::bind(const ParamTable& t) {
  const int L = cfg_.stem_layers();
  const int64_t d = cfg_.d_model, K = L > 0 ? cfg_.stem_width(L - 1) : 3 * int64_t(cfg_.patch) * cfg_.patch;
  for (int l = 0; l < L; ++l) {
    StemLayer& st = stem_[size_t(l)];
    st.w = t.get(stem_weight_name(l)).value;
    st.dw = t.get(stem_weight_name(l)).grad;
    st.b = t.get(stem_bias_name(l)).value;
    st.db = t.get(stem_bias_name(l)).grad;
  }
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

void PatchEmbed::plan(ActPlan& p) {
  using R = ActPlan::Rows;
  const int L = cfg_.stem_layers();
  if (cfg_.texture && bf16_) p.add(&tex16_, R::T, {kTextureChannels});
  if (L == 0) return p.add(&patches_, R::T, {3 * int64_t(cfg_.patch) * cfg_.patch});
  // The stem runs in f32 (add_f32): the NCHW image, the maps and their gradients.
  p.add_f32(&patches_, R::T, {3 * int64_t(cfg_.patch) * cfg_.patch});
  for (int l = 0; l < L; ++l) {  // the maps of one image, per token: C_l * side^2 / GG
    StemLayer& st = stem_[size_t(l)];
    const int64_t side = stem_side(cfg_, l), per_token = cfg_.stem_width(l) * side * side / cfg_.tokens();
    for (Tensor* t : {&st.pre, &st.act, &st.dpre, &st.dact}) p.add_f32(t, R::T, {per_token});
  }
  p.add_f32(&rows_, R::T, {cfg_.stem_width(L - 1)});
  p.add_f32(&drows_, R::T, {cfg_.stem_width(L - 1)});
  if (bf16_) p.add(&rows16_, R::T, {cfg_.stem_width(L - 1)});
}

Tensor PatchEmbed::texture_in(const Tensor& texture, int64_t B) const {
  if (!tex16_.defined()) return texture;
  return tex16_.slice(0, B * cfg_.tokens()).view(texture.shape());
}

double PatchEmbed::forward_macs_per_image() const {
  const double n = double(cfg_.tokens()), d = double(cfg_.d_model);
  const double tex = cfg_.texture ? n * kTextureChannels * d : 0.0;
  const int L = cfg_.stem_layers();
  if (L == 0) return n * 3.0 * cfg_.patch * cfg_.patch * d + tex;
  double m = n * double(cfg_.stem_width(L - 1)) * d;
  for (int l = 0; l < L; ++l)
    m += double(stem_side(cfg_, l) * stem_side(cfg_, l)) * double(cfg_.stem_width(l)) * double(stem_in(cfg_, l)) * 9.0;
  return m + tex;
}

double PatchEmbed::backward_macs_per_image() const {
  const int L = cfg_.stem_layers();
  if (L == 0) return forward_macs_per_image();  // weight gradients only: the pixels need none
  const double n = double(cfg_.tokens()), d = double(cfg_.d_model);
  double m = forward_macs_per_image() + n * double(cfg_.stem_width(L - 1)) * d;  // + the rows' gradient
  for (int l = 1; l < L; ++l)  // + the input gradient of every stem layer but the first
    m += double(stem_side(cfg_, l) * stem_side(cfg_, l)) * double(cfg_.stem_width(l)) * double(stem_in(cfg_, l)) * 9.0;
  return m;
}

namespace {

// The texture of image b as [13, G*G], and a [B*G*G, d] tensor's rows of image b as [G*G, d].
Tensor image_texture(const Tensor& texture, int64_t b, int64_t GG) {
  return texture.slice(b, b + 1).view(Shape{kTextureChannels, GG});
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
  if (stem_.empty())
    image_to_patches(s, patches_, pixels, cfg_.patch, pixel_norm(cfg_));
  else
    stem_forward(s, pixels, B);
  if (rows16_.defined()) convert(s, rows16_, rows_);
  GemmOpts o;
  o.trans_b = true;
  o.bias = &b_;
  matmul(s, out, embed_rows(), w_, o);                                        // conv P x P, stride P (or 1x1)
  bias_add(s, out.view(Shape{B, GG * d}), out.view(Shape{B, GG * d}), pos_.view(Shape{GG * d}));  // + positions
  if (!cfg_.texture) return;
  VLM_ASSERT(texture.defined() && texture.shape() == Shape({B, kTextureChannels, G, G}) &&
                 texture.dtype() == pos_.dtype(),
             "patch embedding: texture ", texture.defined() ? texture.str() : "undefined", ", expected [", B, ",",
             kTextureChannels, ",", G, ",", G, "] of the parameters' dtype");
  const Tensor tex = texture_in(texture, B);
  if (tex16_.defined()) convert(s, tex, texture);
  GemmOpts t;  // out_b [GG, d] += texture_b^T [GG, 13] W_tex^T [13, d], one batched call
  t.trans_a = true;
  t.trans_b = true;
  t.beta = 1.f;
  matmul(s, out.view(Shape{B, GG, d}), tex.view(Shape{B, kTextureChannels, GG}), tex_, t);
}

void PatchEmbed::backward(Stream& s, const Tensor& dout, const Tensor& texture) const {
  const int64_t GG = cfg_.tokens(), d = cfg_.d_model, T = dout.size(0), B = T / GG;
  VLM_ASSERT(dout.shape() == Shape({T, d}) && T % GG == 0 && patches_.rows() == T, "patch embedding backward: dout ",
             dout.str(), " after a forward of ", patches_.rows(), " tokens");
  if (!dw_.defined()) return;  // frozen (nn/param_table.h): nothing to compute, the pixels need no gradient
  GemmOpts g;  // dW [d, 3PP] += dout^T patches (or the stem's rows)
  g.trans_a = true;
  g.beta = 1.f;
  matmul(s, dw_, dout, embed_rows(), g);
  if (!stem_.empty()) stem_backward(s, dout, B);
  bias_backward(s, db_, dout);
  bias_backward(s, dpos_.view(Shape{GG * d}), dout.view(Shape{B, GG * d}));  // sum over the images
  if (!cfg_.texture) return;
  GemmOpts t;  // dW_tex [d, 13] += sum_b dout_b^T [d, GG] texture_b^T [GG, 13] (images in order)
  t.trans_a = true;
  t.trans_b = true;
  t.beta = 1.f;
  const Tensor tex = texture_in(texture, B);  // the forward's bf16 copy at BF16
  for (int64_t b = 0; b < B; ++b) matmul(s, dtex_, image_rows(dout, b, GG), image_texture(tex, b, GG), t);
}

// The stem (patch_embed.h): the NCHW image in patches_, then per layer conv -> GELU; the
// last maps become rows_.
void PatchEmbed::stem_forward(Stream& s, const Tensor& pixels, int64_t B) const {
  const int64_t S = cfg_.image_size;
  image_to_patches(s, patches_.view(Shape{B, 3 * S * S}), pixels, int(S), pixel_norm(cfg_));
  Tensor in = patches_.view(Shape{B, 3, S, S});
  for (size_t l = 0; l < stem_.size(); ++l) {
    const StemLayer& st = stem_[l];
    const int64_t side = stem_side(cfg_, int(l)), c = st.w.size(0);
    conv2d_forward(s, st.pre.view(Shape{B, c, side, side}), in, st.w, st.b, 2, 1);
    gelu_forward(s, st.act, st.pre);
    in = st.act.view(Shape{B, c, side, side});
  }
  maps_to_rows(s, rows_, in);
}

// dout [T, d] -> the rows' gradient -> back through each layer (weight grads +=); the
// image needs no gradient.
void PatchEmbed::stem_backward(Stream& s, const Tensor& dout, int64_t B) const {
  const int64_t S = cfg_.image_size;
  matmul(s, drows_, dout, w_, GemmOpts{});  // [T, C_L] = dout [T, d] W [d, C_L]
  const int L = int(stem_.size());
  const int64_t last = stem_side(cfg_, L - 1);
  rows_to_maps(s, stem_.back().dact.view(Shape{B, stem_.back().w.size(0), last, last}), drows_);
  for (int l = L - 1; l >= 0; --l) {
    const StemLayer& st = stem_[size_t(l)];
    const int64_t side = stem_side(cfg_, l), c = st.w.size(0), cin = st.w.size(1);
    const int64_t in_side = l == 0 ? S : stem_side(cfg_, l - 1);
    gelu_backward(s, st.dpre, st.pre, st.dact);
    const Tensor in = l == 0 ? patches_.view(Shape{B, 3, S, S}) : stem_[size_t(l - 1)].act.view(Shape{B, cin, in_side, in_side});
    const Tensor din = l == 0 ? Tensor{} : stem_[size_t(l - 1)].dact.view(Shape{B, cin, in_side, in_side});
    conv2d_backward(s, din, st.dw, st.db, st.dpre.view(Shape{B, c, side, side}), in, st.w, 2, 1);
  }
}

}  // namespace vlm
