// The CPU backend's thread pool (core/cpu/thread_pool.h) and the thread policy of
// core/cpu_threads.h. Policy, with the figures behind it: docs/cpu-performance.md.
//  - One pool per calling thread (the main thread, later each stream worker), holding
//    thread_budget() - 1 worker threads created on the thread's first parallel call and
//    kept; the caller runs tasks too. BLAS calls run on these threads, one thread each
//    (core/cpu/blas.cpp stops OpenBLAS's own threads), so there is no second pool.
//  - Waiting: an idle worker spins for at most kSpinUs, then sleeps on a futex (C++20
//    atomic wait); the caller waiting for the last tasks does the same. Spinning pays
//    for the back-to-back ops of a step (gaps of a few microseconds) and costs at most
//    kSpinUs per idle period otherwise. When the pools hold more threads than the
//    process has cores (oversubscription, e.g. several streams), nobody spins.
//  - Default threads: OMP_NUM_THREADS when set (the variable OpenMP programs and
//    PyTorch honour), else the cores of the affinity mask divided by the ranks of this
//    node under mpirun (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS) or srun
//    (SLURM_NTASKS_PER_NODE), at least 1.
// Nothing here depends on the environment being set before the process starts, and
// nothing allocates per parallel call.
#include "core/cpu/thread_pool.h"

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"

namespace vlm {
namespace {

constexpr int kMaxThreads = 255;  // participants fit in the low 8 bits of the ticket
constexpr int kSpinUs = 50;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int affinity_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

// A positive integer from the start of an environment variable ("4" or "4,2"), else 0.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && n > 0 && n <= 1 << 20 ? int(n) : 0;
}

struct Defaults {
  int cores = 1, threads = 1;
  std::string source;
};

const Defaults& defaults() {
  static const Defaults d = [] {
    Defaults r;
    r.cores = affinity_cores();
    if (int n = env_int("OMP_NUM_THREADS")) {
      r.threads = std::min(n, kMaxThreads);
      r.source = "OMP_NUM_THREADS";
      return r;
    }
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
      if (int ranks = env_int(var); ranks > 1) {
        r.threads = std::max(1, r.cores / ranks);
        r.source = cat(r.cores, " cores / ", ranks, " ranks per node");
        return r;
      }
    r.threads = std::min(r.cores, kMaxThreads);
    r.source = "all cores";
    return r;
  }();
  return d;
}

thread_local int tl_threads = 0;  // 0: the process default
thread_local bool tl_in_task = false;
std::atomic<bool> g_force_parallel{false};
std::atomic<int> g_pool_threads{0};  // owners + workers of all pools

bool may_spin() { return g_pool_threads.load(std::memory_order_relaxed) <= defaults().cores; }

// Waits until a != old (spinning for at most kSpinUs first); returns the new value.
uint32_t wait_change(const std::atomic<uint32_t>& a, uint32_t old) {
  uint32_t v;
  if (may_spin()) {
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 1;; ++i) {
      if ((v = a.load(std::memory_order_acquire)) != old) return v;
      cpu_relax();
      if ((i & 255) == 0 && std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(kSpinUs)) break;
    }
  }
  while ((v = a.load(std::memory_order_acquire)) == old) a.wait(old, std::memory_order_acquire);
  return v;
}

class Pool {
 public:
  explicit Pool(int workers) {
    g_pool_threads.fetch_add(workers + 1, std::memory_order_relaxed);
    threads_.reserve(size_t(workers));
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { worker_main(w); });
  }
  ~Pool() {
    stop_.store(true, std::memory_order_release);
    ticket_.fetch_add(1u << 8, std::memory_order_release);
    ticket_.notify_all();
    for (std::thread& t : threads_) t.join();
    g_pool_threads.fetch_sub(int(threads_.size()) + 1, std::memory_order_relaxed);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int workers() const { return int(threads_.size()); }

  // Runs fn(ctx, i) for i in [0, n) on the caller and up to threads - 1 workers.
  void run(int64_t n, int threads, cpu::detail::TaskFn fn, void* ctx) {
    const int parts = int(std::min<int64_t>({int64_t(threads) - 1, int64_t(workers()), n - 1}));
    fn_ = fn, ctx_ = ctx, n_ = n;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(uint32_t(parts), std::memory_order_relaxed);
    gen_ = (gen_ + 1) & 0xffffff;
    ticket_.store((gen_ << 8) | uint32_t(parts), std::memory_order_release);
    ticket_.notify_all();
    tl_in_task = true;
    try {
      work();
    } catch (...) {
      store_error();
    }
    tl_in_task = false;
    for (uint32_t p; (p = pending_.load(std::memory_order_acquire)) != 0;) wait_change(pending_, p);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void work() {
    for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_;) fn_(ctx_, i);
  }
  void store_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
  void worker_main(int w) {
    tl_in_task = true;  // a worker only runs tasks: parallel calls made by a task run inline
    uint32_t seen = 0;
    for (;;) {
      seen = wait_change(ticket_, seen);
      if (stop_.load(std::memory_order_acquire)) return;
      if (w >= int(seen & 0xff)) continue;  // not a participant of this job
      try {
        work();
      } catch (...) {
        store_error();
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::atomic<uint32_t> ticket_{0};   // (job generation << 8) | participating workers
  std::atomic<uint32_t> pending_{0};  // participating workers not finished
  std::atomic<bool> stop_{false};
  uint32_t gen_ = 0;
  // The job: written by the owner before the ticket is published, read by participants.
  cpu::detail::TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

thread_local std::unique_ptr<Pool> tl_pool;

}  // namespace

namespace cpu {

char* thread_scratch_bytes(int slot, size_t bytes) {
  thread_local std::vector<char> bufs[7];
  VLM_ASSERT(slot >= 0 && slot < 7, "thread_scratch: slot ", slot);
  std::vector<char>& b = bufs[slot];
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

}  // namespace cpu

namespace cpu::detail {

bool in_parallel_task() { return tl_in_task; }

void run_tasks(int64_t n, int threads, TaskFn fn, void* ctx) {
  threads = std::min(threads, kMaxThreads);
  if (!tl_pool || tl_pool->workers() < threads - 1) {
    tl_pool.reset();
    tl_pool = std::make_unique<Pool>(threads - 1);
  }
  tl_pool->run(n, threads, fn, ctx);
}

}  // namespace cpu::detail

int cpu_cores() { return defaults().cores; }

int thread_budget() { return tl_threads > 0 ? tl_threads : defaults().threads; }

void set_thread_budget(int n) {
  if (n > 0) tl_threads = std::min(n, kMaxThreads);
}

CpuThreadPolicy cpu_thread_policy() {
  CpuThreadPolicy p;
  p.cores = defaults().cores;
  p.default_threads = defaults().threads;
  p.threads_source = defaults().source;
  p.blas_threads = cpu::blas_threads();
  p.spin_us = kSpinUs;
  return p;
}

std::string cpu_thread_summary() {
  const CpuThreadPolicy p = cpu_thread_policy();
  return cat(thread_budget(), " threads (", p.threads_source, ", ", p.cores, " cores), one pool",
             p.blas_threads == 1 ? "" : cat(" [WARNING: BLAS runs ", p.blas_threads, " threads per call]"),
             ", spin ", p.spin_us, " us then sleep");
}

void set_cpu_force_parallel(bool on) { g_force_parallel.store(on, std::memory_order_relaxed); }
bool cpu_force_parallel() { return g_force_parallel.load(std::memory_order_relaxed); }

void host_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  cpu::parallel_for(n, grain, f);
}

}  // namespace vlm
