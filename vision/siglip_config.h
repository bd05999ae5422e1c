// A Hugging Face SigLIP vision tower's config.json -> VisionConfig, plus where the
// tower's tensors live in the checkpoint and which of its outputs the full model uses.
//
// Accepted top-level model_type, where the vision keys are, and the tensor-name
// prefixes of the tower's weights, in order of preference:
//   siglip_vision_model  SiglipVisionModel  top level      vision_model., "" (none)
//   siglip               SiglipModel        vision_config  vision_model.  (text_model.* ignored)
//   llava, paligemma     LLaVA / PaliGemma  vision_config  vision_tower.vision_model.,
//                        (its model_type must be           vision_tower.,
//                         siglip_vision_model)             model.vision_tower.vision_model.,
//                                                          model.vision_tower.
// The first prefix of each is the Hub's spelling (what transformers 4 wrote); transformers
// 5 writes a SiglipVisionModel without prefix, a LLaVA/PaliGemma tower as vision_tower.
// (model.vision_tower. with save_original_format=False). find_tensor_prefix() picks the
// one present in the weights.
//
// Vision keys read; an absent key takes transformers' SiglipVisionConfig default, as
// transformers itself does (save_pretrained omits values equal to the defaults):
//   image_size 224, patch_size 16 (an int, or [n, n]: the encoder is square),
//   hidden_size 768, num_hidden_layers 12, num_attention_heads 12,
//   intermediate_size 3072, layer_norm_eps 1e-6, hidden_act gelu_pytorch_tanh,
//   num_channels 3. Image mean/std are SigLIP's 0.5 (preprocessor_config.json is not read).
// Errors: one UserError line naming the file and the key ("<dir>/config.json:
// vision_config.patch_size=0: expected an integer in [1, 16384]"): a missing model_type,
// vision_config or (LLaVA/PaliGemma) vision_config.model_type, a wrong JSON type, a number that is negative, zero, fractional or
// does not fit its type, an unknown model_type, a hidden_act other than
// gelu_pytorch_tanh / gelu_new (the same tanh formula; exact-erf "gelu" is refused since
// the op library's GELU is the tanh one), num_channels != 3, a non-square image or
// patch, then VisionConfig::validate() with the file's key names.
//
// Encoder output the full model consumes (the encoder must reproduce it):
//   siglip*, paligemma: last_hidden_state = all layers, then post_layernorm;
//   llava: hidden_states[vision_feature_layer] (default -2; 0 = embeddings, negative
//   counts from the end), no post_layernorm. A list of layers is refused.
//   vision_feature_select_strategy is not read: "default" drops the first token (CLIP's
//   class token) of the tower's output, which changes what the projector sees but not
//   the tower's weights; this encoder always keeps the full G x G grid.
// Write (export): the inverse for a SiglipVisionModel without the pooling head
// (model_type siglip_vision_model, vision_use_head false), so that read_siglip_config
// gives back the same shape and transformers' SiglipVisionModel loads the directory.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "vision/vision_config.h"

namespace vlm {

struct SiglipCheckpoint {
  std::string config_file;            // the config.json that was read
  std::string model_type;             // its top-level model_type
  std::vector<std::string> prefixes;  // tensor-name prefixes of the tower, preferred first
  VisionConfig vision;                // the shape (hf_dir = the checkpoint directory)
  VisionKeys keys;                    // the file (source) and key of each shape value
  int feature_layers = 0;             // blocks applied before the features are taken
  bool feature_post_norm = true;      // post_layernorm applied to the features

  const std::string& prefix() const { return prefixes.front(); }
};

// `path` is a checkpoint directory holding config.json, or the config.json itself.
SiglipCheckpoint read_siglip_config(const std::string& path);

// The first of ck.prefixes under which `has_tensor` finds the patch embedding
// (<prefix>embeddings.patch_embedding.weight); UserError naming the file otherwise.
std::string find_tensor_prefix(const SiglipCheckpoint& ck, const std::function<bool(std::string_view)>& has_tensor,
                               std::string_view weights_file);

// The config.json text of a SiglipVisionModel of cfg's shape (keys above, hidden_act
// gelu_pytorch_tanh, num_channels 3, vision_use_head false, torch_dtype float32), and
// the preprocessor_config.json of its image normalisation (rescale 1/255, cfg's mean and
// std, size S x S; the encoder letterboxes where SiglipImageProcessor resizes).
std::string siglip_config_json(const VisionConfig& cfg);
std::string siglip_preprocessor_json(const VisionConfig& cfg);

// UserError when a shape option given explicitly (vision.image_size, vision.patch,
// vision.d_model, vision.layers, vision.heads, vision.d_ff) disagrees with the
// checkpoint, e.g. "vision.patch=16 disagrees with <file>: patch_size=8".
// (The position table fixes image_size: interpolating it is not supported.)
void check_options_agree(const Config& cfg, const SiglipCheckpoint& ck);

// The encoder config of a run: read_vision_config() alone when vision.hf is empty;
// otherwise the checkpoint's shape (after check_options_agree) with vision.texture and
// vision.init_std from the options. Validated either way.
VisionConfig resolve_vision_config(const Config& cfg);

}  // namespace vlm
