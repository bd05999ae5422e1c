// DistributedSampler: coverage and disjointness across 1..8 DP ranks over several
// epochs (pad and drop policies), different orders per epoch, and exact resume.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "data/load/sampler.h"

using namespace vlm;

TEST(Sampler, PermutationIsAPermutation) {
  for (int64_t n : {1, 2, 10, 1000}) {
    auto p = DistributedSampler::permutation(n, 42, 3);
    std::sort(p.begin(), p.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[size_t(i)], i);
  }
  EXPECT_NE(DistributedSampler::permutation(100, 1, 0), DistributedSampler::permutation(100, 1, 1));
  EXPECT_NE(DistributedSampler::permutation(100, 1, 0), DistributedSampler::permutation(100, 2, 0));
  EXPECT_EQ(DistributedSampler::permutation(100, 7, 5), DistributedSampler::permutation(100, 7, 5));
}

TEST(Sampler, PadPolicyEverySampleExactlyOncePerEpoch) {
  for (int dp = 1; dp <= 8; ++dp)
    for (int B : {1, 3, 8})
      for (int64_t n : {1, 7, 50, 64}) {
        std::vector<DistributedSampler> ranks;
        for (int r = 0; r < dp; ++r) ranks.emplace_back(n, B, dp, r, 1234, EpochPolicy::Pad);
        const int64_t steps = ranks[0].steps_per_epoch();
        ASSERT_EQ(steps, (n + B * dp - 1) / (B * dp));
        std::vector<int64_t> prev;
        for (int epoch = 0; epoch < 3; ++epoch) {
          std::vector<int64_t> seen(size_t(n), 0), order;
          int64_t pads = 0;
          for (int64_t s = 0; s < steps; ++s)
            for (auto& smp : ranks) {
              const auto b = smp.next();
              ASSERT_EQ(int(b.size()), B);
              for (const auto& ref : b) {
                ASSERT_GE(ref.index, 0);
                ASSERT_LT(ref.index, n);
                if (ref.is_pad) ++pads;
                else seen[size_t(ref.index)]++, order.push_back(ref.index);
              }
            }
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[size_t(i)], 1) << "dp " << dp << " n " << n;
          ASSERT_EQ(pads, steps * B * dp - n);
          for (auto& smp : ranks) ASSERT_EQ(smp.state().epoch, epoch + 1);
          if (n >= 50 && epoch > 0) {
            EXPECT_NE(order, prev);  // reshuffled each epoch
          }
          prev = order;
        }
      }
}

TEST(Sampler, DropPolicyAtMostOnceAndFullBatches) {
  for (int dp = 1; dp <= 8; ++dp) {
    const int64_t n = 100;
    const int B = 4;
    std::vector<DistributedSampler> ranks;
    for (int r = 0; r < dp; ++r) ranks.emplace_back(n, B, dp, r, 9, EpochPolicy::Drop);
    const int64_t steps = ranks[0].steps_per_epoch();
    ASSERT_EQ(steps, n / (B * dp));
    for (int epoch = 0; epoch < 3; ++epoch) {
      std::vector<int> seen(size_t(n), 0);
      for (int64_t s = 0; s < steps; ++s)
        for (auto& smp : ranks)
          for (const auto& ref : smp.next()) {
            ASSERT_FALSE(ref.is_pad);
            ASSERT_EQ(++seen[size_t(ref.index)], 1);
          }
      ASSERT_EQ(std::count(seen.begin(), seen.end(), 1), steps * B * dp);
    }
  }
}

TEST(Sampler, ResumeContinuesTheSameSequence) {
  DistributedSampler a(37, 5, 3, 1, 77);
  for (int i = 0; i < 4; ++i) a.next();  // crosses into epoch 1 (3 steps per epoch)
  const SamplerState saved = a.state();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.step, 1);
  std::vector<std::vector<int64_t>> want;
  for (int i = 0; i < 7; ++i) {
    std::vector<int64_t> v;
    for (const auto& r : a.next()) v.push_back(r.index);
    want.push_back(v);
  }
  DistributedSampler b(37, 5, 3, 1, 0);  // seed comes from the state
  b.restore(saved);
  for (int i = 0; i < 7; ++i) {
    std::vector<int64_t> v;
    for (const auto& r : b.next()) v.push_back(r.index);
    ASSERT_EQ(v, want[size_t(i)]) << "batch " << i;
  }
  EXPECT_THROW(b.restore({77, 0, 99}), UserError);
}
