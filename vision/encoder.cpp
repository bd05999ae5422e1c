// VisionEncoder: parameters, activation plan, forward and backward; see encoder.h.
#include "vision/encoder.h"

#include <vector>

#include "base/error.h"
#include "core/ops.h"
#include "nn/init.h"

namespace vlm {

namespace {

const char* block_suffix(BlockParam r) {
  switch (r) {
    case BlockParam::Norm1Weight: return "layer_norm1.weight";
    case BlockParam::Norm1Bias: return "layer_norm1.bias";
    case BlockParam::QWeight: return "self_attn.q_proj.weight";
    case BlockParam::KWeight: return "self_attn.k_proj.weight";
    case BlockParam::VWeight: return "self_attn.v_proj.weight";
    case BlockParam::QBias: return "self_attn.q_proj.bias";
    case BlockParam::KBias: return "self_attn.k_proj.bias";
    case BlockParam::VBias: return "self_attn.v_proj.bias";
    case BlockParam::OWeight: return "self_attn.out_proj.weight";
    case BlockParam::OBias: return "self_attn.out_proj.bias";
    case BlockParam::Norm2Weight: return "layer_norm2.weight";
    case BlockParam::Norm2Bias: return "layer_norm2.bias";
    case BlockParam::UpWeight: return "mlp.fc1.weight";
    case BlockParam::UpBias: return "mlp.fc1.bias";
    case BlockParam::DownWeight: return "mlp.fc2.weight";
    case BlockParam::DownBias: return "mlp.fc2.bias";
    case BlockParam::GateWeight:  // SiglipMLP has no gate (GELU MLP)
    case BlockParam::GateBias: break;
  }
  VLM_ASSERT(false, "SigLIP blocks have no parameter role ", int(r));
  return "";
}

// The blocks the readout runs: all (-1) or the first `layers`.
int readout_blocks(const VisionConfig& cfg, const VisionReadout& r) {
  const int L = r.layers < 0 ? cfg.n_layers : r.layers;
  VLM_REQUIRE(L >= 1 && L <= cfg.n_layers, "vision encoder: features after ", L, " of ", cfg.n_layers,
              " blocks (expected 1 to ", cfg.n_layers, "; the patch embeddings alone are not supported)");
  return L;
}

}  // namespace

std::string siglip_block_param_name(int layer, BlockParam role) {
  return cat("encoder.layers.", layer, ".", block_suffix(role));
}

BlockConfig vision_block_config(const VisionConfig& cfg) {
  BlockConfig c;
  c.C = cfg.d_model;
  c.n_heads = cfg.n_heads;
  c.n_kv_heads = cfg.n_heads;
  c.head_dim = cfg.head_dim();
  c.d_ff = cfg.d_ff;
  c.norm = NormKind::LayerNorm;
  c.norm_eps = cfg.norm_eps;
  c.mlp = MlpKind::GeluTanh;  // VisionActivation::GeluTanh, the only one
  c.qkv_bias = true;
  c.linear_bias = true;
  c.rope = false;
  c.causal = false;
  return c;
}

VisionEncoder::VisionEncoder(const VisionConfig& cfg, Backend& backend, Communicator& self, int64_t max_images,
                             VisionReadout readout, DType dtype, bool grads, Precision precision, DpSharding dp)
    : cfg_(cfg),
      readout_(readout),
      backend_(backend),
      self_(self),
      max_images_(max_images),
      dtype_(dtype),
      embed_(cfg),
      stack_(vision_block_config(cfg), readout_blocks(cfg, readout), 1, siglip_block_param_name) {
  std::vector<ParamSpec> specs = embed_.param_specs(cfg.init_std);
  for (ParamSpec& s : stack_.param_specs(cfg.init_std)) specs.push_back(std::move(s));
  if (readout.post_norm)
    for (ParamSpec& s : Norm::param_specs(NormKind::LayerNorm, cfg.d_model, kPostNormWeight, kPostNormBias, false))
      specs.push_back(std::move(s));
  own_params_ = std::make_unique<ParamTable>(std::move(specs), 1, 0, dtype, true);
  params_ = own_params_.get();
  if (precision == Precision::BF16) params_->add_bf16_working_copy();
  params_->allocate(backend, grads, dp);
  VLM_ASSERT(params_->layout().units() == blocks() + 1 + int(readout.post_norm) &&
                 params_->layout().unit_layer(layer_unit(0)) == 0,
             "vision encoder units: the embeddings, the blocks, the post norm");
  bind_and_plan();
}

VisionEncoder::VisionEncoder(VisionEncoder& weights, Backend& backend, Communicator& self, int64_t max_images)
    : cfg_(weights.cfg_),
      readout_(weights.readout_),
      backend_(backend),
      self_(self),
      max_images_(max_images),
      params_(weights.params_),
      dtype_(weights.dtype_),
      embed_(weights.cfg_),
      stack_(vision_block_config(weights.cfg_), readout_blocks(weights.cfg_, weights.readout_), 1,
             siglip_block_param_name) {
  bind_and_plan();
}

void VisionEncoder::set_zero_hooks(LayerFetch fetch, LayerGrads grads) {
  stack_.set_layer_fetch(std::move(fetch));
  stack_.set_layer_grads(std::move(grads));
}

void VisionEncoder::bind_and_plan() {
  const VisionConfig& cfg = cfg_;
  Backend& backend = backend_;
  VLM_ASSERT(self_.size() == 1 && self_.device() == backend.device(), "vision encoder: needs a size-1 communicator on ",
             device_name(backend.device()), ", got size ", self_.size(), " on ", device_name(self_.device()));
  VLM_REQUIRE(max_images_ >= 1, "vision encoder: at least one image per micro-batch, got ", max_images_);
  const int64_t GG = cfg.tokens(), d = cfg.d_model, max_images = max_images_, max_T = max_images * GG;
  embed_.bind(*params_);
  stack_.bind(*params_);
  if (readout_.post_norm)
    post_ = Norm::bind(*params_, NormKind::LayerNorm, cfg.norm_eps, kPostNormWeight, kPostNormBias);

  using R = ActPlan::Rows;
  const DType act = params_->has_working() ? DType::BF16 : dtype_;
  stack_.plan(acts_);
  embed_.plan(acts_);
  if (readout_.post_norm) {
    acts_.add(&ln_, R::T, {d});
    acts_.add_f32(&ln_mean_, R::T);
    acts_.add_f32(&ln_rstd_, R::T);
  }
  acts_.add(&dres_, R::T, {d});
  if (act != dtype_) acts_.add_f32(&feat_, R::T, {d});
  acts_.allocate(backend, max_T, max_T, act);
  stack_.reserve_scratch(backend, max_T);
  last_ = readout_.post_norm ? &ln_ : &stack_.output();
  out_ = feat_.defined() ? &feat_ : last_;

  // Image b is tokens [b*GG, (b+1)*GG); positions are unused (no RoPE) but kept valid.
  std::vector<int32_t> cu(static_cast<size_t>(max_images + 1)), pos(static_cast<size_t>(max_T));
  for (int64_t b = 0; b <= max_images; ++b) cu[size_t(b)] = int32_t(b * GG);
  for (int64_t t = 0; t < max_T; ++t) pos[size_t(t)] = int32_t(t % GG);
  cu_all_ = to_backend(backend, Tensor::from_vector(cu, Shape{max_images + 1}));
  pos_all_ = to_backend(backend, Tensor::from_vector(pos, Shape{max_T}));
}

void VisionEncoder::init(uint64_t seed) { init_params(*params_, seed); }

void VisionEncoder::forward(Stream& s, const Tensor& pixels, const Tensor& texture) {
  VLM_REQUIRE(pixels.ndim() == 4 && pixels.size(0) >= 1 && pixels.size(0) <= max_images_,
              "vision encoder: a batch of ", pixels.ndim() == 4 ? pixels.size(0) : -1, " images, planned for 1 to ",
              max_images_);
  VLM_REQUIRE(!cfg_.texture || texture.defined(),
              "vision encoder: vision.texture=on needs the texture array [B,13,G,G] of the images");
  const int64_t B = pixels.size(0), T = B * cfg_.tokens();
  acts_.cut(T, T);
  last_B_ = B;
  TpContext ctx{s, self_, false};
  const PackedSeqs seq{cu_all_.slice(0, B + 1), int(cfg_.tokens()), pos_all_.slice(0, T)};
  embed_.forward(s, stack_.input(), pixels, texture);
  stack_.forward(ctx, seq);
  if (readout_.post_norm) post_.forward(s, ln_, ln_mean_, ln_rstd_, stack_.output());
  if (feat_.defined()) convert(s, feat_, *last_);
}

void VisionEncoder::backward(Stream& s, const Tensor& dfeatures, const Tensor& texture) {
  const int64_t B = last_B_, T = B * cfg_.tokens();
  VLM_ASSERT(B > 0, "vision encoder: backward before forward");
  require_shape(dfeatures, Shape{T, cfg_.d_model}, "vision encoder dfeatures");
  TpContext ctx{s, self_, false};
  const PackedSeqs seq{cu_all_.slice(0, B + 1), int(cfg_.tokens()), pos_all_.slice(0, T)};
  if (!feat_.defined()) {
    if (readout_.post_norm)
      post_.backward(s, dres_, dfeatures, stack_.output(), ln_mean_, ln_rstd_);
    else
      copy(s, dres_, dfeatures);
  } else {  // bf16 activations: the f32 gradients converted into dres_, the norm's backward in place
    convert(s, dres_, dfeatures);
    if (readout_.post_norm) post_.backward(s, dres_, dres_, stack_.output(), ln_mean_, ln_rstd_);
  }
  stack_.backward(ctx, seq, dres_);  // dres_ = dL/dh[0]
  embed_.backward(s, dres_, texture);
}

namespace {
// One block's multiply-adds per image (the cost formula in encoder.h); the embedding's
// are PatchEmbed's.
double block_macs_per_image(const VisionConfig& c) {
  const double n = double(c.tokens()), d = double(c.d_model), F = double(c.d_ff);
  return n * (4 * d * d + 2 * d * F) + 2 * n * n * d;
}
}  // namespace

double VisionEncoder::forward_macs_per_image() const {
  return embed_.forward_macs_per_image() + blocks() * block_macs_per_image(cfg_);
}

double VisionEncoder::backward_macs_per_image() const {
  return embed_.backward_macs_per_image() + 2.0 * blocks() * block_macs_per_image(cfg_);
}

}  // namespace vlm
