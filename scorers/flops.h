// The FLOPs (nn/flops.h) of the relevance stage for a micro-batch of B images, on one
// rank of a TP group of size tp: the products with weights of the three scorers
// (Scorer::forward_macs_per_image, at the full hidden width) times the share the
// placement gives a rank (ScorerPlacement::share), and the balancer's on every rank;
// `passes` times (forward; input gradient when the scorers or the encoder train; weight
// gradient when the scorers train). Model FLOPs count the scorers once per TP group.
// Not counted (parameter-free): the LOD pooling (the largest: v/(12 d_v L_v) of the
// encoder's blocks, 0.4% for SigLIP-B/16 at 400 tokens), the perspectival box mean, the
// participatory dot product, the balancer's mix.
#pragma once
#include <cstdint>

#include "nn/flops.h"
#include "scorers/options.h"
#include "scorers/scorer.h"

namespace vlm {

// dims: G, d, dq (hidden and k are the options').
Flops stage_flops(const ScorerOptions& o, const ScorerDims& dims, int tp, int64_t images, double passes);

}  // namespace vlm
