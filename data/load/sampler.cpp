// Implementation of DistributedSampler (order and policies documented in sampler.h).
#include "data/load/sampler.h"

#include "base/error.h"
#include "base/splitmix.h"

namespace vlm {

// Unbiased integer in [0, bound) by rejection.
static uint64_t bounded(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r;
  do r = splitmix64_next(state);
  while (r >= limit);
  return r % bound;
}

std::vector<int64_t> DistributedSampler::permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  uint64_t st = seed * 0x2545F4914F6CDD1Dull ^ (uint64_t(epoch) + 0x632BE59BD9B4E019ull);
  splitmix64_next(st);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[bounded(st, uint64_t(i) + 1)]);
  return p;
}

DistributedSampler::DistributedSampler(int64_t n, int batch_size, int dp_size, int dp_rank,
                                       uint64_t seed, EpochPolicy policy)
    : n_(n), batch_(batch_size), dp_(dp_size), rank_(dp_rank), policy_(policy) {
  VLM_REQUIRE(batch_size >= 1, "batch size must be >= 1 (got ", batch_size, ")");
  VLM_REQUIRE(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size, "bad DP rank ", dp_rank, " of ", dp_size);
  VLM_REQUIRE(n >= 1, "the sampler needs at least one sample (the split is empty)");
  VLM_REQUIRE(policy == EpochPolicy::Pad || n >= int64_t(batch_size) * dp_size, "only ", n,
              " samples: fewer than one global batch (", batch_size, " x ", dp_size,
              ") with the drop policy");
  state_.seed = seed;
}

int64_t DistributedSampler::steps_per_epoch() const {
  const int64_t g = int64_t(batch_) * dp_;
  return policy_ == EpochPolicy::Pad ? (n_ + g - 1) / g : n_ / g;
}

std::vector<SampleRef> DistributedSampler::batch_at(int64_t epoch, int64_t step) const {
  VLM_ASSERT(step >= 0 && step < steps_per_epoch(), "step ", step, " outside the epoch");
  if (cached_epoch_ != epoch) {
    perm_ = permutation(n_, state_.seed, epoch);
    cached_epoch_ = epoch;
  }
  std::vector<SampleRef> out;
  out.reserve(size_t(batch_));
  const int64_t base = (step * dp_ + rank_) * batch_;
  for (int j = 0; j < batch_; ++j) {
    const int64_t g = base + j;
    out.push_back(g < n_ ? SampleRef{perm_[size_t(g)], false} : SampleRef{perm_[size_t(g % n_)], true});
  }
  return out;
}

std::vector<SampleRef> DistributedSampler::next() {
  std::vector<SampleRef> b = batch_at(state_.epoch, state_.step);
  if (++state_.step == steps_per_epoch()) state_.step = 0, state_.epoch++;
  return b;
}

bool DistributedSampler::fits(const SamplerState& s) const {
  return s.step >= 0 && s.step < steps_per_epoch() && s.epoch >= 0;
}

void DistributedSampler::restore(const SamplerState& s) {
  VLM_REQUIRE(fits(s),
              "sampler state (epoch ", s.epoch, ", step ", s.step, ") does not fit ", steps_per_epoch(),
              " steps per epoch");
  state_ = s;
}

}  // namespace vlm
