// The relevance stage's FLOPs (scorers/flops.h).
#include "scorers/flops.h"

#include "scorers/balancer.h"
#include "scorers/placement/placement.h"

namespace vlm {

Flops stage_flops(const ScorerOptions& o, const ScorerDims& dims_in, int tp, int64_t images, double passes) {
  ScorerDims dims = dims_in;
  dims.hidden = o.scorers.hidden, dims.k = o.scorers.k;
  double scorers = 0;  // per image
  for (int k = 0; k < kNumScorers; ++k) scorers += 2 * make_scorer(ScorerKind(k), dims)->forward_macs_per_image();
  const double balancer = 2 * Balancer(dims).forward_macs_per_image(), B = double(images);
  const double share = make_placement(o.scorers.placement, tp)->share(images);
  Flops f;
  f.gemm = B * (share * scorers + balancer) * passes;
  f.model = B * (scorers + balancer) * passes / tp;
  return f;
}

}  // namespace vlm
