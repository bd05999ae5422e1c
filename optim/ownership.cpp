// Ownership of the training state (optim/ownership.h).
#include "optim/ownership.h"

#include "base/error.h"

namespace vlm {

DpShare dp_share(int64_t n, int p, int r) {
  VLM_ASSERT(n >= 0 && p >= 1 && r >= 0 && r < p, "dp_share(", n, ", ", p, ", ", r, ")");
  const int64_t s = n / p;
  return {{r * s, (r + 1) * s}, {p * s, n}};
}

StateShare state_share(int64_t n, const StateOwner& r, bool trainable) {
  const DpShare d = dp_share(n, r.dp, r.dp_rank);
  auto nonempty = [](std::vector<FlatRange> v) {
    std::erase_if(v, [](const FlatRange& x) { return x.empty(); });
    return v;
  };
  StateShare s;
  s.values = nonempty({{0, n}});
  if (trainable) s.moments = effective_zero(r.zero, r.dp) == 0 ? s.values : nonempty({d.block, d.tail});
  s.writes = nonempty(r.dp_rank == 0 ? std::vector<FlatRange>{d.block, d.tail} : std::vector<FlatRange>{d.block});
  s.writes_tp_replicated = r.tp_rank == 0;
  return s;
}

int64_t held_position(const std::vector<FlatRange>& held, int64_t e) {
  int64_t at = 0;
  for (const FlatRange& h : held) {
    if (e >= h.begin && e < h.end) return at + (e - h.begin);
    at += h.size();
  }
  return -1;
}

}  // namespace vlm
