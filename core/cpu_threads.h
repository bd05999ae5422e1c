// Threads of the CPU backend: one pool, and how many of its threads a caller uses.
// The policy (what and why, with figures: README "CPU performance"; implemented in
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
//  - Threads are per calling thread. cpu_threads() / set_cpu_threads() read and set the
//    count of the calling thread only; each thread that calls ops gets its own pool of
//    cpu_threads() - 1 helpers. So streams that run at once divide the cores: each stream
//    worker calls set_cpu_threads(std::max(1, cpu_cores() / streams_at_once)) when it
//    starts (a new thread starts from the process default, not its creator's count).
//  - Results never depend on the thread count (core/cpu/thread_pool.h).
#pragma once
#include <string>

namespace vlm {

// CPUs this process may run on (its affinity mask at start-up).
int cpu_cores();
// Threads the calling thread's CPU ops use (the caller included).
int cpu_threads();
// Sets cpu_threads() for the calling thread only; n >= 1.
void set_cpu_threads(int n);

// Sets cpu_threads() for a scope and restores the previous value on exit.
class CpuThreadsScope {
 public:
  explicit CpuThreadsScope(int n) : saved_(cpu_threads()) { set_cpu_threads(n); }
  ~CpuThreadsScope() { set_cpu_threads(saved_); }
  CpuThreadsScope(const CpuThreadsScope&) = delete;
  CpuThreadsScope& operator=(const CpuThreadsScope&) = delete;

 private:
  int saved_;
};

struct CpuThreadPolicy {
  int cores = 1;               // cpu_cores()
  int default_threads = 1;     // cpu_threads() of a thread that never set it
  std::string threads_source;  // "OMP_NUM_THREADS", "all cores", "2 cores / 2 ranks per node"
  int blas_threads = 0;        // threads of one BLAS call: 1 (BLAS runs on the pool's threads)
  int spin_us = 0;             // longest spin of an idle thread before it sleeps
};
CpuThreadPolicy cpu_thread_policy();
// One line for logs: "2 threads (all cores, 2 cores), one pool, spin 50 us then sleep".
std::string cpu_thread_summary();

// Test hook: when on, every CPU loop that may run in parallel does so whatever its
// size, so tests can check on small inputs that results do not depend on the thread
// count. Off by default; not for production use.
void set_cpu_force_parallel(bool on);
bool cpu_force_parallel();

}  // namespace vlm
