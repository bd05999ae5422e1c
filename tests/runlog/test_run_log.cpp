// The progress line's time left (runlog/run_log.h): the mean of this process's steps
// times the steps left, for a run from step 1, one resumed after a checkpoint and one
// that stops early (train.stop_after).
#include <gtest/gtest.h>

#include "runlog/run_log.h"

namespace vlm {

TEST(RunLog, TimeLeftCountsOnlyThisProcesssSteps) {
  StepLine fresh;
  fresh.step = 100, fresh.total = 1000, fresh.elapsed_s = 10.0;  // 0.1 s a step
  EXPECT_DOUBLE_EQ(eta_seconds(fresh), 900 * 0.1);
  StepLine resumed = fresh;  // from a checkpoint of step 4,800: 700 steps in 70 s
  resumed.first = 4801, resumed.step = 5500, resumed.total = 8000, resumed.elapsed_s = 70.0;
  EXPECT_DOUBLE_EQ(eta_seconds(resumed), 2500 * 0.1);
  StepLine last = resumed;  // nothing left at the last step
  last.step = 8000;
  EXPECT_DOUBLE_EQ(eta_seconds(last), 0.0);
  StepLine stopping = fresh;  // train.stop_after: the time to the step it stops after
  stopping.last = 400;
  EXPECT_DOUBLE_EQ(eta_seconds(stopping), 300 * 0.1);
  StepLine first = resumed;  // the first step of a resumed run is one step
  first.step = 4801, first.elapsed_s = 0.2;
  EXPECT_DOUBLE_EQ(eta_seconds(first), 3199 * 0.2);
}

}  // namespace vlm
