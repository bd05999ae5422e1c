// The number of channels of the texture array, [B, 13, G, G]: the one constant that the
// loader, which computes the array (data/image/texture.h: the channels, their order and
// normalisation), and the models that read it as a tensor (the encoder's texture map,
// vision/patch_embed.h; the scorers, scorers/scorer.h) must agree on. Defined here, below
// both, so that neither includes the other.
#pragma once

namespace vlm {

inline constexpr int kTextureChannels = 13;

}  // namespace vlm
