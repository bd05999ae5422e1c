// The thread pool under asynchronous CPU streams (core/cpu_threads.h, core/backend.h):
// the worker of each stream runs its ops on a pool of its own budget
// (AsyncStreamOptions::threads), so streams busy at once share the cores without
// oversubscribing them or waiting on each other.
//  - a parallel loop on a stream has exactly its budget of threads at once (tasks that
//    wait for each other all meet), never more, and streams running at once never more
//    than the sum of their budgets;
//  - GEMMs run on three streams at once, each split over its own pool, match the
//    product computed alone, bitwise.
// Labelled tsan as well: the ThreadSanitizer stage runs it (./run test).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/thread_pool.h"
#include "tests/core/cpu_threads_cases.h"

namespace vlm::opcheck {
namespace {

using Clock = std::chrono::steady_clock;

void raise_max(std::atomic<int>& m, int v) {
  for (int cur = m.load(); v > cur && !m.compare_exchange_weak(cur, v);) {
  }
}

struct Occupancy {
  std::atomic<int> active{0}, max{0};
  void enter() { raise_max(max, active.fetch_add(1) + 1); }
  void leave() { active.fetch_sub(1); }
};

TEST(CpuPoolStreams, EachStreamRunsOnItsBudget) {
  constexpr std::array<int, 3> budgets = {1, 2, 3};
  std::array<Occupancy, 3> per_stream;
  Occupancy all;
  std::array<int, 3> seen_budget{};
  std::array<std::atomic<int>, 3> met{};  // barrier rounds whose tasks all met
  std::vector<std::unique_ptr<Stream>> streams;
  for (int s = 0; s < 3; ++s) {
    AsyncStreamOptions opt;
    opt.threads = budgets[size_t(s)];
    streams.push_back(cpu_backend().create_async_stream(cat("s", s), opt));
  }
  for (int s = 0; s < 3; ++s)
    streams[size_t(s)]->launch([&, s] {
      const int b = thread_budget();
      seen_budget[size_t(s)] = b;
      Occupancy& mine = per_stream[size_t(s)];
      for (int round = 0; round < 3; ++round) {
        // b tasks that each wait (10 s at most) until b tasks are active at once: they all
        // meet only when the pool runs b threads together.
        std::atomic<int> arrived{0};
        std::atomic<bool> all_met{true};
        cpu::parallel_tasks(b, b, [&](int64_t) {
          mine.enter(), all.enter();
          arrived.fetch_add(1);
          const auto t0 = Clock::now();
          while (arrived.load() < b && Clock::now() - t0 < std::chrono::seconds(10)) std::this_thread::yield();
          if (arrived.load() < b) all_met.store(false);
          mine.leave(), all.leave();
        });
        if (all_met.load()) met[size_t(s)].fetch_add(1);
        // Many short tasks: never more than b of them at once.
        cpu::parallel_tasks(16 * b, b, [&](int64_t) {
          mine.enter(), all.enter();
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          mine.leave(), all.leave();
        });
      }
    });
  for (auto& s : streams) s->synchronize();
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE(cat("stream with budget ", budgets[size_t(s)]));
    EXPECT_EQ(seen_budget[size_t(s)], budgets[size_t(s)]);
    EXPECT_EQ(met[size_t(s)].load(), 3);
    EXPECT_EQ(per_stream[size_t(s)].max.load(), budgets[size_t(s)]);
  }
  EXPECT_LE(all.max.load(), 1 + 2 + 3);
  EXPECT_GE(all.max.load(), 3);
}

// A product big enough to be cut into several BLAS blocks (core/cpu/blas.cpp), run on
// three streams at once with budgets 1, 2 and 3: each matches the product computed on
// the main thread alone.
TEST(CpuPoolStreams, ConcurrentStreamGemmsMatchAlone) {
  const OpCase c = matmul_case(256, 512, 192, false, true, 0, false, true, true, 1.f, 0.f);
  const std::vector<double> want = to_vector_f64(c.run(cpu_backend())[0].t);
  std::atomic<int> runs{0}, mismatches{0};
  std::vector<std::unique_ptr<Stream>> streams;
  for (int threads : {1, 2, 3}) {
    AsyncStreamOptions opt;
    opt.threads = threads;
    streams.push_back(cpu_backend().create_async_stream(cat("gemm", threads), opt));
  }
  for (auto& s : streams)
    for (int it = 0; it < 4; ++it)
      s->launch([&] {
        runs.fetch_add(1);
        if (to_vector_f64(c.run(cpu_backend())[0].t) != want) mismatches.fetch_add(1);
      });
  for (auto& s : streams) s->synchronize();
  EXPECT_EQ(runs.load(), 12);
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace vlm::opcheck
