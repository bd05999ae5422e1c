// VisionEncoder: the ViT that turns B letterboxed images (+ their texture arrays) into
// cell features F [B, G*G, d_v] on the G x G grid of the texture array (G = S / P):
//   h[0]   = PatchEmbed(pixels, texture)                 (vision/patch_embed.h)
//   h[L']  = nn/'s TransformerStack of L' pre-norm blocks: LayerNorm, bidirectional
//            attention inside each image, GELU-tanh MLP, biases on every linear
//   F      = LayerNorm(h[L'])  (post_layernorm; or h[L'] itself, see VisionReadout)
// L' = L unless a LLaVA-style readout takes an earlier layer. The encoder is replicated:
// it runs at TP = 1 on every rank over a size-1 communicator given by the owner (the
// stack's regions are then identities; nothing is communicated).
//
// Parameters: one ParamTable with Hugging Face SigLIP names without the tower's prefix
// (embeddings.*, encoder.layers.{l}.*, post_layernorm.*; vision/siglip_import.h maps
// them onto a checkpoint) plus embeddings.texture_embedding.weight (ours, zero-init).
// Activations: one ActPlan (nn/act_plan.h) for max_images images, cut per micro-batch.
// Gradients follow the rule of nn/context.h: parameter grads accumulate until
// zero_grads(); pixels and textures are data (no input gradient).
// Element type: f32, or f64 on CPU (gradient checks); the texture array has the same dtype.
// At Precision::BF16 the activations are bf16 (statistics f32: docs/training.md,
// "Numerics"); the features stay f32 for the relevance stage (an f32 copy of the last
// hidden state) and the feature gradients arrive in f32.
// The encoder is neither copied nor moved (its plan binds fields by address). A second
// encoder can share the parameters of a first (the sharing constructor): its own
// activations, the same weights, and its parameter gradients accumulate into the same
// gradient arena (the owner orders the two encoders' backward, e.g. on one stream).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "nn/act_plan.h"
#include "nn/norm.h"
#include "nn/param_table.h"
#include "nn/stack.h"
#include "parallel/communicator.h"
#include "vision/patch_embed.h"
#include "vision/vision_config.h"

namespace vlm {

// Which hidden state the features are: after the first `layers` blocks (-1 = all of
// them), then the final LayerNorm when post_norm. SigLIP: all + post_norm; LLaVA:
// hidden_states[vision_feature_layer] without it (SiglipCheckpoint::feature_layers).
struct VisionReadout {
  int layers = -1;
  bool post_norm = true;
};

inline constexpr const char* kPostNormWeight = "post_layernorm.weight";
inline constexpr const char* kPostNormBias = "post_layernorm.bias";
// The SigLIP name of parameter `role` of block `layer` ("encoder.layers.{layer}.<...>").
std::string siglip_block_param_name(int layer, BlockParam role);
// nn's BlockConfig of cfg's blocks (SigLIP: LayerNorm, GELU-tanh, biases, no RoPE,
// bidirectional, TP = 1).
BlockConfig vision_block_config(const VisionConfig& cfg);

class VisionEncoder {
 public:
  // cfg must be validated (VisionConfig::validate); `self` is a communicator of size 1 on
  // the backend's device. Parameters are zero until init() or a load. grads = false: frozen,
  // no gradient arena (nn/param_table.h); backward still gives the input gradients.
  // dp: the ZeRO sharding of the table (nn/param_layout.h: units as the backbone's, the
  // embeddings, each block, the post norm; the blocks pooled at zero >= 2, see set_zero_hooks).
  VisionEncoder(const VisionConfig& cfg, Backend& backend, Communicator& self, int64_t max_images,
                VisionReadout readout = {}, DType dtype = DType::F32, bool grads = true,
                Precision precision = Precision::FP32, DpSharding dp = {});
  // An encoder over `weights`' parameter table (config, readout, dtype, precision and
  // gradients as weights'), with activations of its own for max_images images; `weights`
  // must outlive it.
  VisionEncoder(VisionEncoder& weights, Backend& backend, Communicator& self, int64_t max_images);
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  const VisionConfig& config() const { return cfg_; }
  int blocks() const { return stack_.n_layers(); }  // L'
  bool post_norm() const { return readout_.post_norm; }
  ParamTable& params() { return *params_; }
  const ParamTable& params() const { return *params_; }
  void init(uint64_t seed);  // nn/init.h: every tensor from (seed, name)
  // The layout unit of block l (the embeddings are unit 0).
  int layer_unit(int l) const { return l + 1; }
  // ZeRO >= 2 (the blocks pooled: nn/param_layout.h): `fetch` gathers block l's weights
  // into their pool slot before each forward and backward of it (zero 3), `grads` clears
  // its gradient slot before its backward and reduce-scatters it after (null when frozen).
  // The encoder runs them on its own stream (optim/dp_grads.h attaches them).
  void set_zero_hooks(LayerFetch fetch, LayerGrads grads);
  void zero_grads() { params_->zero_grads(); }

  // pixels [B,S,S,3] u8 and texture [B,13,G,G] (required iff cfg.texture), B <=
  // max_images, on the backend. Keeps what backward needs.
  void forward(Stream& s, const Tensor& pixels, const Tensor& texture);
  // The features of the last forward, [B*G*G, d_v] in the table's dtype (a view into the
  // activation arena, valid until the next forward).
  const Tensor& features() const { return *out_; }
  // dfeatures [B*G*G, d_v] (the table's dtype) of the last forward (same texture):
  // parameter grads +=.
  void backward(Stream& s, const Tensor& dfeatures, const Tensor& texture);

  int64_t max_images() const { return max_images_; }
  size_t activation_bytes() const { return acts_.bytes(); }
  // Multiply-adds of one image (n = G*G tokens, K = 3P^2, L' blocks):
  //   forward  = n K d + [13 n d] + L' (n (4 d^2 + 2 d F) + 2 n^2 d)   (linears; QK^T, PV)
  //   backward = n K d + [13 n d] + 2 L' (...)   (weight gradients only for the patch and
  //              texture maps; weight and input gradients, dQ dK dV dP, in the blocks)
  // With a convolutional stem the embedding's terms are the stem's (PatchEmbed's
  // *_macs_per_image). Norms, softmax and GELU are not counted. FLOPs = 2 x MACs.
  double forward_macs_per_image() const;
  double backward_macs_per_image() const;

 private:
  // Binds the layers to *params_ and plans the activations (both constructors).
  void bind_and_plan();

  VisionConfig cfg_;
  VisionReadout readout_;
  Backend& backend_;
  Communicator& self_;
  int64_t max_images_;
  std::unique_ptr<ParamTable> own_params_;  // null when shared
  ParamTable* params_ = nullptr;
  DType dtype_;
  PatchEmbed embed_;
  TransformerStack stack_;
  Norm post_;
  ActPlan acts_;
  Tensor ln_, ln_mean_, ln_rstd_;  // post norm [T, d], [T], [T]
  Tensor dres_;                    // [T, d]
  Tensor feat_;                    // bf16 activations: the features in f32 [T, d]
  const Tensor* last_ = nullptr;   // ln_ or the stack's output: the last hidden state
  const Tensor* out_ = nullptr;    // it, or feat_ (bf16 activations)
  Tensor cu_all_, pos_all_;        // [max_images+1], [max_T] i32: image boundaries, positions
  int64_t last_B_ = 0;
};

}  // namespace vlm
