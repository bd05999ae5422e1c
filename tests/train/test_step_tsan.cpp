// The VLM step (train/step.h) in overlap mode on one rank with M = 2 micro-batches on two
// front-end slots (the pipelined graph: micro-batch 1's front end during micro-batch 0's
// backbone), checked bitwise against serial mode. Its own binary so that the
// ThreadSanitizer stage of ./run test (label tsan, build-tsan) runs the step's threads
// without the multi-rank cases of test_step.cpp.
#include <gtest/gtest.h>

#include "tests/train/step_rig.h"

namespace vlm {
namespace {

TEST(VlmStepThreads, PipelinedOverlapStepEqualsSerial) {
  ASSERT_EQ(tiny_config(kImages / kM).front_slots, 2);
  expect_serial_equals_overlap(tiny_config, DType::F32);
}

}  // namespace
}  // namespace vlm
