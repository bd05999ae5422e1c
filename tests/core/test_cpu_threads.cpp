// The CPU backend's thread pool and thread policy (core/cpu_threads.h,
// core/cpu/thread_pool.h); the op-level checks are in test_cpu_threads_ops.cpp (same
// binary):
//  - one pool: BLAS runs one thread per call, and starting the backend stops the
//    threads OpenBLAS starts when it is loaded;
//  - thread counts are per calling thread (what stream workers will rely on), and two
//    threads running ops at once each get the right results;
//  - the pool runs every task exactly once, on several threads at once, runs nested
//    calls inline and passes a task's exception to the caller.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/cpu/thread_pool.h"
#include "core/cpu_threads.h"
#include "tests/core/cpu_threads_cases.h"

namespace vlm::opcheck {
namespace {

TEST(CpuThreads, OneBlasThreadPerCall) {
  const CpuThreadPolicy p = cpu_thread_policy();
  EXPECT_EQ(p.blas_threads, 1) << "BLAS calls run threads of their own (a second pool)";
  EXPECT_GE(p.cores, 1);
  EXPECT_GE(p.default_threads, 1);
  EXPECT_NE(cpu_backend().description().find("one pool"), std::string::npos) << cpu_backend().description();
}

int process_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// In a fresh process where OpenBLAS starts a thread of its own when loaded, starting the
// CPU backend stops it: afterwards the process runs the main thread only.
TEST(CpuThreadsDeathTest, BackendStopsBlasThreads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EXIT(
      {
        const int before = process_threads();  // main + OpenBLAS's (one when 2+ cores)
        cpu_backend();
        const int after = process_threads();
        std::fprintf(stderr, "threads before %d after %d\n", before, after);
        std::exit(before >= std::min(2, cpu_cores()) && after == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "threads before [0-9]+ after 1");
  unsetenv("OPENBLAS_NUM_THREADS");
}

TEST(CpuThreads, CountIsPerCallingThread) {
  const int dflt = cpu_thread_policy().default_threads;
  {
    ThreadBudgetScope scope(3);
    EXPECT_EQ(thread_budget(), 3);
    int seen = 0, after = 0;
    std::thread t([&] {
      seen = thread_budget();  // a new thread starts from the process default
      set_thread_budget(1);
      after = thread_budget();
    });
    t.join();
    EXPECT_EQ(seen, dflt);
    EXPECT_EQ(after, 1);
    EXPECT_EQ(thread_budget(), 3);  // untouched by the other thread
  }
  EXPECT_EQ(thread_budget(), dflt);
}

TEST(CpuThreads, TasksRunOnceAndConcurrently) {
  ThreadBudgetScope scope(4);
  constexpr int64_t n = 1000;
  std::vector<std::atomic<int>> runs(n);
  std::atomic<int> started{0};
  std::atomic<bool> met{false};
  cpu::parallel_tasks(n, 4, [&](int64_t i) {
    runs[size_t(i)].fetch_add(1);
    if (i < 2) {  // tasks 0 and 1 wait for each other: they must run on two threads at once
      started.fetch_add(1);
      const auto t0 = std::chrono::steady_clock::now();
      while (started.load() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      }
      if (started.load() >= 2) met = true;
    }
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[size_t(i)].load(), 1) << "task " << i;
  EXPECT_TRUE(met) << "tasks 0 and 1 never ran at the same time";
}

TEST(CpuThreads, NestedCallsRunInline) {
  ThreadBudgetScope scope(3);
  std::atomic<int> bad{0};
  cpu::parallel_tasks(6, 3, [&](int64_t) {
    if (cpu::threads_for(1 << 30, 1) != 1) bad.fetch_add(1);
    const auto self = std::this_thread::get_id();
    cpu::parallel_tasks(4, 3, [&](int64_t) {
      if (std::this_thread::get_id() != self) bad.fetch_add(1);
    });
  });
  EXPECT_EQ(bad.load(), 0);
}

TEST(CpuThreads, TaskExceptionReachesCaller) {
  ThreadBudgetScope scope(3);
  for (int64_t thrower : {int64_t(0), int64_t(37)}) {
    EXPECT_THROW(cpu::parallel_tasks(64, 3,
                                     [&](int64_t i) {
                                       if (i == thrower) throw UserError("task failed");
                                     }),
                 UserError);
  }
  std::atomic<int64_t> sum{0};  // the pool still works afterwards
  cpu::parallel_tasks(100, 3, [&](int64_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 4950);
}

// Two threads (streams) run GEMMs at once with different thread counts; both match the
// product computed alone.
TEST(CpuThreads, ConcurrentCallersEachGetTheirPool) {
  const OpCase c = matmul_case(150, 600, 100, false, true, 0, false, true, true, 1.f, 0.f);
  const OpOutputs ref = c.run(cpu_backend());
  std::vector<double> want = to_vector_f64(ref[0].t);
  std::atomic<int> mismatches{0};
  auto worker = [&](int threads) {
    set_thread_budget(threads);
    for (int it = 0; it < 20; ++it)
      if (to_vector_f64(c.run(cpu_backend())[0].t) != want) mismatches.fetch_add(1);
  };
  std::thread a(worker, 2), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace vlm::opcheck
