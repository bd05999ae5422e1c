// DistributedSampler: deterministic, DP-sharded order of sample indices 0..n-1.
// Per epoch e the n indices are shuffled by a Fisher-Yates pass driven by SplitMix64
// seeded with (seed, e) (portable: no std::shuffle / std::uniform_int_distribution,
// whose outputs differ between standard libraries). Global step s takes the slice
// [s*B*dp, (s+1)*B*dp) of the permutation; DP rank r takes its contiguous sub-slice
// [r*B, (r+1)*B) of it (B = per-rank batch size).
// End-of-epoch policy:
//  - Pad (default): steps_per_epoch = ceil(n / (B*dp)); positions past n wrap to the
//    start of the same permutation and are flagged is_pad, so every sample is seen
//    exactly once per epoch as a real (non-pad) sample across all ranks, and every rank
//    runs the same number of full-size steps. The trainer gives pad samples zero weight.
//  - Drop: steps_per_epoch = floor(n / (B*dp)); the tail of each epoch's permutation is
//    skipped (each sample at most once per epoch; a different tail every epoch).
// State {seed, epoch, step} is all that is needed to resume exactly.
#pragma once
#include <cstdint>
#include <vector>

namespace vlm {

enum class EpochPolicy { Pad, Drop };

struct SamplerState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t step = 0;  // next step within the epoch
  bool operator==(const SamplerState&) const = default;
};

struct SampleRef {
  int64_t index;  // into 0..n-1
  bool is_pad;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t n, int batch_size, int dp_size, int dp_rank, uint64_t seed,
                     EpochPolicy policy = EpochPolicy::Pad);

  int64_t steps_per_epoch() const;
  // The batch of this rank for the current (epoch, step); then advances.
  std::vector<SampleRef> next();
  // The batch of this rank at an arbitrary (epoch, step) (no state change).
  std::vector<SampleRef> batch_at(int64_t epoch, int64_t step) const;

  SamplerState state() const { return state_; }
  // Whether `s` is a position of this sampler (its step inside an epoch).
  bool fits(const SamplerState& s) const;
  void restore(const SamplerState& s);  // UserError when !fits(s)
  int64_t size() const { return n_; }

  // The epoch's permutation of 0..n-1 (exposed for tests).
  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

 private:
  int64_t n_;
  int batch_, dp_, rank_;
  EpochPolicy policy_;
  SamplerState state_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> perm_;
};

}  // namespace vlm
