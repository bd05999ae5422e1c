// Threads of the CPU backend: one pool, and how many of its threads a caller uses.
// The policy (what and why, with figures: docs/cpu-performance.md; implemented in
// core/cpu/thread_pool.cpp):
//  - One pool. The CPU ops' parallel loops and their BLAS calls (OpenBLAS held to one
//    thread per call, products cut into blocks by core/cpu/blas.cpp) run on the same
//    threads; OpenBLAS's own threads are stopped at start-up and no OpenMP runtime is
//    linked.
//  - Waiting: idle threads spin for at most a few tens of microseconds (the gap between
//    two ops of a step), then sleep; no spinning at all when the pools hold more threads
//    than the process has cores. Set in code: nothing to put in the environment.
//  - Default threads: OMP_NUM_THREADS when set, else the cores of the process's
//    affinity mask divided by the MPI ranks on this node (mpirun, srun), at least 1.
//  - Threads are per calling thread: set_thread_budget() / thread_budget() (declared in
//    core/backend.h) set and read the count of the calling thread only, and each thread
//    that runs ops gets its own pool of thread_budget() - 1 helpers. So streams that
//    run at once divide the cores: each asynchronous CPU stream's worker calls
//    set_thread_budget(AsyncStreamOptions::threads) when it starts, and the scheduler
//    gives each of its S streams max(1, T / S) of the T threads of the thread that
//    creates them (scheduler/streams.h). A new thread starts from the process default,
//    not its creator's count. Call it outside parallel loops.
//  - Results never depend on the thread count (core/cpu/thread_pool.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/backend.h"

namespace vlm {

// CPUs this process may run on (its affinity mask at start-up).
int cpu_cores();

// Sets the calling thread's thread_budget() for a scope and restores it on exit.
class ThreadBudgetScope {
 public:
  explicit ThreadBudgetScope(int n) : saved_(thread_budget()) { set_thread_budget(n); }
  ~ThreadBudgetScope() { set_thread_budget(saved_); }
  ThreadBudgetScope(const ThreadBudgetScope&) = delete;
  ThreadBudgetScope& operator=(const ThreadBudgetScope&) = delete;

 private:
  int saved_;
};

struct CpuThreadPolicy {
  int cores = 1;               // cpu_cores()
  int default_threads = 1;     // thread_budget() of a thread that never set it
  std::string threads_source;  // "OMP_NUM_THREADS", "all cores", "2 cores / 2 ranks per node"
  int blas_threads = 0;        // threads of one BLAS call: 1 (BLAS runs on the pool's threads)
  int spin_us = 0;             // longest spin of an idle thread before it sleeps
};
CpuThreadPolicy cpu_thread_policy();
// One line for logs: "2 threads (all cores, 2 cores), one pool, spin 50 us then sleep".
std::string cpu_thread_summary();

// f(begin, end) over contiguous chunks of [0, n) on the calling thread's pool, on at
// most n / grain of its threads (core/cpu/thread_pool.h's parallel_for): host work
// outside the ops, e.g. nn/init.cpp's draws. f writes only its own chunk's outputs, so
// the result does not depend on the thread count.
void host_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

// Test hook: when on, every CPU loop that may run in parallel does so whatever its
// size, so tests can check on small inputs that results do not depend on the thread
// count. Off by default; not for production use.
void set_cpu_force_parallel(bool on);
bool cpu_force_parallel();

}  // namespace vlm
