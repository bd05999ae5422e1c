// The FLOPs (nn/flops.h) of the vision side for a micro-batch, on one rank of a TP group
// of size tp (both are replicated: every TP rank runs them in full, and model FLOPs
// count them once per group, 1/tp per rank).
//  - encoder_flops: the patch embedding's own count (vision/patch_embed.h: the patch
//    convolution or the stem, the texture map) and the blocks (q, k, v, o, the MLP;
//    bidirectional attention over the G*G cells); forward, and when the encoder trains its
//    backward (input and weight gradients of the blocks; the embedding computes no pixel
//    gradient).
//  - projector_flops: its two layers d_in -> d_out -> d_out per visual token, `passes`
//    times (forward, input gradient, weight gradient when it trains).
#pragma once
#include <cstdint>

#include "nn/flops.h"
#include "vision/vision_config.h"

namespace vlm {

Flops encoder_flops(const VisionConfig& v, int tp, double images, bool trains);
Flops projector_flops(int64_t d_in, int64_t d_out, int tp, double tokens, double passes);

}  // namespace vlm
