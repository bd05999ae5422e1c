// replicated: every TP rank encodes and scores every image (ScorerPlacement's default
// path: scorers/placement/placement.h). No communication; the three scorers may run at
// once. Bytes: 0. Share of the scorers' FLOPs per rank: 1. At TP size 1 every placement
// is this one.
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

class Replicated final : public ScorerPlacement {
 public:
  explicit Replicated(int tp) : ScorerPlacement(tp) {}
  const char* name() const override { return "replicated"; }
  bool communicates() const override { return false; }
  double share(int64_t) const override { return 1.0; }
};

}  // namespace

std::unique_ptr<ScorerPlacement> make_replicated_placement(int tp) { return std::make_unique<Replicated>(tp); }

}  // namespace vlm
