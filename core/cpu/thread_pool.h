// Parallel loops of the CPU ops (core/cpu/*.cpp), not a public header: the one thread
// pool of the CPU backend (policy and figures: docs/cpu-performance.md; threads per
// caller: core/cpu_threads.h).
//  - parallel_tasks(n, threads, f): f(i) for every task i in [0, n), on up to `threads`
//    threads of the calling thread's pool, the caller included. Tasks are claimed in
//    order from a shared counter, so a slow thread never holds the others up.
//  - parallel_for(n, grain, f): f(begin, end) over contiguous chunks of [0, n) on
//    threads_for(n, grain) threads: up to kChunksPerThread chunks per thread (each at
//    least grain / kChunksPerThread items), claimed in order, so that a thread the OS
//    holds back (a loaded machine) delays one small chunk, not a whole share.
//  - threads_for(n, grain): the thread count parallel_for would use.
// A call made from inside a task (nested) runs its tasks in order on that thread, so a
// kernel never waits on a pool it is part of.
// Invariant (determinism): a task or chunk writes only its own outputs and reduces in a
// fixed order inside itself, so results never depend on the thread count or on which
// thread ran what. No allocation per call: the pool and its threads are created on the
// first parallel call of a thread and kept.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cpu_threads.h"

namespace vlm::cpu {

namespace detail {
using TaskFn = void (*)(void* ctx, int64_t task);
void run_tasks(int64_t n, int threads, TaskFn fn, void* ctx);
bool in_parallel_task();
}  // namespace detail

// Threads worth using for n items when each thread should get at least `grain` items.
inline int threads_for(int64_t n, int64_t grain) {
  if (detail::in_parallel_task()) return 1;
  if (cpu_force_parallel()) return std::max(1, int(std::min<int64_t>(thread_budget(), n)));
  if (n < 2 * grain) return 1;
  return int(std::min<int64_t>(thread_budget(), n / grain));
}

template <typename F>
void parallel_tasks(int64_t n, int threads, F&& f) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1 || detail::in_parallel_task()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_tasks(
      n, threads, [](void* ctx, int64_t i) { (*static_cast<Fn*>(ctx))(i); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

inline constexpr int kChunksPerThread = 4;

template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int nt = threads_for(n, grain);
  if (nt <= 1) {
    f(int64_t(0), n);
    return;
  }
  const int64_t chunks = std::max<int64_t>(
      nt, std::min<int64_t>(int64_t(nt) * kChunksPerThread, n / std::max<int64_t>(1, grain / kChunksPerThread)));
  parallel_tasks(chunks, nt, [&](int64_t c) { f(n * c / chunks, n * (c + 1) / chunks); });
}

// Grains (items per thread) of the ops: below 2 grains a loop runs on one thread.
// A passive fork/join costs ~10-30 us, so a thread should get well over that in work:
// ~64 K floats of streaming (add, scale, copy: ~256 KB, ~30 us), ~8 K elements of
// transcendental math (exp, tanh: a few ns each), or rows of ~64 K elements in total.
inline constexpr int64_t kGrainStream = 1 << 16;  // elements of a memory-bound loop
inline constexpr int64_t kGrainMath = 1 << 13;    // elements with exp/tanh/div per element

// Rows per thread for a row loop of `cols` elements per row (at least one row).
inline int64_t row_grain(int64_t cols, int64_t elem_grain) {
  return std::max<int64_t>(1, elem_grain / std::max<int64_t>(1, cols));
}

}  // namespace vlm::cpu
