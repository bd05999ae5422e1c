// The learning-rate schedule (optim/optimizer.h, lr_at) against values worked out by
// hand: lr 1, min_lr_ratio 0.1, 10 warmup steps of 110. Warmup: step k gives k / 10
// (step 1 already learns, step 10 reaches lr); then the decay over steps 10..110, at
// t = (k - 10) / 100: cosine 0.1 + 0.9 * (1 + cos(pi t)) / 2, linear 0.1 + 0.9 (1 - t),
// constant 1; the last step gives lr * min_lr_ratio.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "optim/optimizer.h"

namespace vlm {
namespace {

constexpr int64_t kTotal = 110;

OptimOptions options(LrSchedule s, int64_t warmup = 10) {
  OptimOptions o;
  o.lr = 1.0, o.min_lr_ratio = 0.1, o.warmup = warmup, o.schedule = s;
  return o;
}

TEST(LrSchedule, WarmupRisesLinearlyFromItsFirstStep) {
  for (LrSchedule s : {LrSchedule::Cosine, LrSchedule::Linear, LrSchedule::Constant}) {
    SCOPED_TRACE(schedule_name(s));
    const OptimOptions o = options(s);
    EXPECT_DOUBLE_EQ(lr_at(o, 1, kTotal), 0.1);
    EXPECT_DOUBLE_EQ(lr_at(o, 5, kTotal), 0.5);
    EXPECT_DOUBLE_EQ(lr_at(o, 10, kTotal), 1.0);
  }
}

TEST(LrSchedule, DecaysToTheMinimumAtTheLastStep) {
  const OptimOptions cos = options(LrSchedule::Cosine), lin = options(LrSchedule::Linear);
  // t = 1/4, 1/2, 1.
  EXPECT_NEAR(lr_at(cos, 35, kTotal), 0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2, 1e-12);
  EXPECT_NEAR(lr_at(cos, 60, kTotal), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(cos, kTotal, kTotal), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(lin, 35, kTotal), 0.775, 1e-12);
  EXPECT_NEAR(lr_at(lin, 60, kTotal), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(lin, kTotal, kTotal), 0.1, 1e-12);
  for (int64_t k : {int64_t(11), int64_t(60), kTotal}) EXPECT_DOUBLE_EQ(lr_at(options(LrSchedule::Constant), k, kTotal), 1.0);
}

TEST(LrSchedule, WithoutWarmupTheFirstStepHasAlmostTheFullRate) {
  const OptimOptions o = options(LrSchedule::Cosine, 0);
  EXPECT_NEAR(lr_at(o, 1, kTotal), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 110)) / 2, 1e-12);
  EXPECT_NEAR(lr_at(o, kTotal, kTotal), 0.1, 1e-12);
}

TEST(LrSchedule, ARunShorterThanItsWarmupEndsBelowTheRate) {
  const OptimOptions o = options(LrSchedule::Cosine, 10);
  EXPECT_DOUBLE_EQ(lr_at(o, 4, 8), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(o, 8, 8), 0.8);
}

}  // namespace
}  // namespace vlm
