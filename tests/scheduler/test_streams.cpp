// The asynchronous CPU stream (core/backend.h): work runs on its own worker in order,
// records complete events only when the work before them is done, waits order streams,
// events re-arm on every record, and an exception from launched work is rethrown by
// synchronize() without blocking the work after it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/backend.h"

namespace vlm {
namespace {

using namespace std::chrono_literals;

TEST(AsyncCpuStream, RunsInOrderOnItsOwnThread) {
  auto s = cpu_backend().create_async_stream("a", {});
  std::vector<int> seen;
  std::thread::id worker;
  for (int i = 0; i < 100; ++i)
    s->launch([&, i] {
      seen.push_back(i);
      worker = std::this_thread::get_id();
    });
  s->synchronize();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[size_t(i)], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(AsyncCpuStream, EventCompletesAfterTheWorkBeforeIt) {
  auto s = cpu_backend().create_async_stream("a", {});
  auto e = cpu_backend().create_event();
  EXPECT_TRUE(e->query());  // never recorded
  std::atomic<bool> release{false}, ran{false};
  s->launch([&] {
    while (!release.load()) std::this_thread::sleep_for(100us);
    ran = true;
  });
  s->record(*e);
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(e->query());
  release = true;
  e->synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(e->query());
  s->synchronize();
}

TEST(AsyncCpuStream, WaitOrdersTwoStreams) {
  auto a = cpu_backend().create_async_stream("a", {});
  auto b = cpu_backend().create_async_stream("b", {});
  auto e = cpu_backend().create_event();
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<int> value{0};
    int observed = -1;
    a->launch([&] {
      std::this_thread::sleep_for(200us);
      value = 1;
    });
    a->record(*e);  // re-armed every repetition
    b->wait(*e);
    b->launch([&] { observed = value.load(); });
    b->synchronize();
    EXPECT_EQ(observed, 1) << "repetition " << rep;
    a->synchronize();
  }
}

TEST(AsyncCpuStream, ElapsedMsMeasuresTheWork) {
  auto s = cpu_backend().create_async_stream("a", {});
  auto e0 = cpu_backend().create_event(true), e1 = cpu_backend().create_event(true);
  s->record(*e0);
  s->launch([] { std::this_thread::sleep_for(20ms); });
  s->record(*e1);
  float ms = e1->elapsed_ms(*e0);
  EXPECT_GE(ms, 19.f);
  EXPECT_LT(ms, 2000.f);
}

TEST(AsyncCpuStream, ExceptionIsRethrownAndLaterWorkStillRuns) {
  auto s = cpu_backend().create_async_stream("a", {});
  auto e = cpu_backend().create_event();
  bool after = false;
  s->launch([] { throw std::runtime_error("boom"); });
  s->launch([&] { after = true; });
  s->record(*e);
  e->synchronize();  // completes despite the exception before it
  EXPECT_THROW(s->synchronize(), std::runtime_error);
  EXPECT_TRUE(after);
  EXPECT_NO_THROW(s->synchronize());  // reported once
}

TEST(SyncCpuStream, DefaultStreamKeepsItsBehaviour) {
  Stream& d = cpu_backend().default_stream();
  auto e = cpu_backend().create_event();
  bool ran = false;
  d.launch([&] { ran = true; });
  EXPECT_TRUE(ran);  // runs at once on the caller
  d.record(*e);
  EXPECT_TRUE(e->query());
  d.wait(*e);
  d.synchronize();
}

TEST(ThreadBudget, SetPerThread) {
  int outer = thread_budget();
  int inner = 0;
  std::thread t([&] {
    set_thread_budget(3);
    inner = thread_budget();
  });
  t.join();
  EXPECT_EQ(inner, 3);
  EXPECT_EQ(thread_budget(), outer);
}

}  // namespace
}  // namespace vlm
