// Hugging Face SigLIP towers -> the vision encoder (vision/encoder.h), through the one
// safetensors reader (io/safetensors.h).
//
//   SiglipCheckpoint ck = read_siglip_config(dir);          // vision/siglip_config.h
//   VisionEncoder enc(ck.vision, backend, self, B, siglip_readout(ck));
//   load_siglip(enc, ck);
//
// Every encoder parameter except the texture map (ours, left as it is: zero after
// construction or init) is read from the checkpoint tensor <prefix><name>, the prefix
// being the first of ck.prefixes present in the weights (find_tensor_prefix): e.g.
// vision_model.encoder.layers.0.mlp.fc1.weight for a SiglipModel, or
// vision_tower.vision_model.* for LLaVA. Tensors the encoder does not use (a text
// tower, the pooling head, a projector, blocks after the readout layer) are ignored.
// Any float dtype is read (BF16/F16/F32/F64, converted to the table's dtype).
// Refused with one UserError line naming the weights file and the tensor: a tower
// tensor that is missing, or whose shape differs from what config.json implies
// (e.g. a patch_embedding.weight [d,3,16,16] under patch_size 8), or a non-float dtype.
#pragma once
#include <string>

#include "vision/encoder.h"
#include "vision/siglip_config.h"

namespace vlm {

// The features the checkpoint's full model consumes: all blocks + post_layernorm
// (SigLIP, PaliGemma), or LLaVA's hidden_states[vision_feature_layer] (UserError naming
// the file when that is the embeddings, hidden_states[0]).
VisionReadout siglip_readout(const SiglipCheckpoint& ck);

// Loads the tower of `ck` into `enc`, whose config must have ck.vision's shape (any
// readout, texture on or off). Not collective: each rank reads the whole tower.
void load_siglip(VisionEncoder& enc, const SiglipCheckpoint& ck);

}  // namespace vlm
