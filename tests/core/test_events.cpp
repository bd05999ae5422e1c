// Events of the CPU backend (core/backend.h): complete once recorded, and elapsed_ms is
// the host time between two recordings, bounded below by a sleep between them and above
// by a steady-clock measurement taken around both; unrecorded events are refused.
// (The CUDA events are tested in tests/gpu.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/backend.h"

namespace vlm {
namespace {

TEST(CpuEvents, CompleteOnceRecordedAndTimed) {
  Backend& b = cpu_backend();
  Stream& s = b.default_stream();
  auto start = b.create_event(/*timing=*/true), stop = b.create_event();
  using Clock = std::chrono::steady_clock;
  const auto before = Clock::now();
  s.record(*start);
  EXPECT_TRUE(start->query());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.record(*stop);
  const auto after = Clock::now();
  stop->synchronize();  // returns at once: the work ran when enqueued
  EXPECT_TRUE(stop->query());
  s.wait(*stop);
  const float ms = stop->elapsed_ms(*start);
  const float around = std::chrono::duration<float, std::milli>(after - before).count();
  EXPECT_GE(ms, 20.f);
  EXPECT_LE(ms, around);
  EXPECT_LE(start->elapsed_ms(*stop), -20.f);  // the other way round: negative
}

TEST(CpuEventsDeathTest, ElapsedNeedsBothRecorded) {
  Backend& b = cpu_backend();
  auto recorded = b.create_event(), never = b.create_event();
  b.default_stream().record(*recorded);
  EXPECT_DEATH(recorded->elapsed_ms(*never), "both events must have been recorded");
}

}  // namespace
}  // namespace vlm
