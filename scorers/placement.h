// Where the three scorers run in a TP group (scorers.placement), and the bytes each
// placement moves per training step. The balancer and the LOD tokens always run on every
// TP rank (they are small and every rank needs the tokens); the placements differ in
// who encodes and scores which image:
//   replicated:  every TP rank encodes and scores every image. No communication.
//   batch-split: TP rank r encodes and scores images r, r+tp, r+2tp, ... (nb = ceil(B/tp)
//                slots per rank, padded); one all-gather of each rank's [nb, G*G, d + 3]
//                block (features and the three logit maps) gives every rank all of them.
//                Backward: each rank runs the scorers and the encoder backward on its own
//                images; the participatory query gradient [B, dq] is all-reduced (rows of
//                other ranks' images are zero); once per optimizer step the scorers'
//                parameter gradients (per-rank partial sums) are all-reduced.
//   dedicated:   every rank encodes every image; scorer k runs on TP rank k mod tp, which
//                broadcasts its map [B, G*G]. Backward: the owner alone runs scorer k's
//                backward; the feature and query gradients [B, G*G, d] and [B, dq] are
//                all-reduced; once per optimizer step each scorer's parameter gradients
//                are broadcast from its owner.
//   tp2:         every pair of TP ranks (2j, 2j+1) encodes and scores every image, each
//                scorer split over the pair (scorers/scorer.h): the hidden width in two,
//                column-parallel first layers, row-parallel output. On the pair's
//                communicator: forward all-reduces the three partial logit maps
//                [B, G*G]; backward all-reduces the feature-gradient parts [B, G*G, d] of
//                the three scorers and the participatory query part [B, dq]. The pairs
//                compute the same, so the parameter shards need no finalize traffic.
// Bytes per step (Communicator counters: local input bytes, parallel/communicator.h),
// s = element size, P = elements of the three scorers' parameters, all 0 when tp = 1:
//   replicated:  0
//   batch-split: all_gather nb*G*G*(d+3)*s + all_reduce (B*dq + P)*s
//   dedicated:   broadcast (3*B*G*G + P)*s + all_reduce B*(G*G*d + dq)*s
//   tp2:         all_reduce B*(3*G*G + 3*G*G*d + dq)*s on the pair (none on the TP group)
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "scorers/options.h"
#include "scorers/scorer.h"

namespace vlm {

struct PlacementBytes {
  uint64_t all_gather = 0, all_reduce = 0, broadcast = 0;
  uint64_t total() const { return all_gather + all_reduce + broadcast; }
};

// The formula above, for B images, `scorer_params` = P (full tensors), element size `elem`.
PlacementBytes placement_bytes(Placement p, int tp, int64_t B, const ScorerDims& dims, int64_t scorer_params,
                               size_t elem);
// The images TP rank `rank` encodes and scores under batch-split: rank, rank+tp, ...
inline int64_t batch_split_slots(int64_t B, int tp) { return (B + tp - 1) / tp; }

}  // namespace vlm
