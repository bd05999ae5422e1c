// The named streams of a training step and the scheduler's mode.
// Invariants:
//  - The names are fixed: vision, scorer.0, scorer.1, scorer.2, llm, comm (stream_names()).
//    A task names its stream; a name outside this list is refused when a graph is built.
//  - StreamSet owns one asynchronous stream per name on one backend (Backend::
//    create_async_stream): on CPU a worker thread each, on CUDA a cudaStream each, `comm`
//    at the greatest priority.
//  - Thread policy (CPU): the streams run at once, so the cores are divided among them.
//    Each worker gets set_thread_budget(max(1, T / S)) threads, where T is the budget of
//    the thread that creates the set (OMP_NUM_THREADS or the core count) and S the
//    number of streams (6); the worker's ops, BLAS included, run on its own pool of that
//    size (core/cpu_threads.h). `threads` in the constructor overrides the share.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"

namespace vlm::sched {

// scheduler.mode: overlap = every stream runs its tasks concurrently, ordered only by
// the graph's dependencies; serial = the same tasks, one at a time, in one fixed order
// (a topological order with ties broken by the order the tasks were added), on the
// calling thread through the backend's default stream.
enum class Mode { Overlap, Serial };
Mode parse_mode(std::string_view s);  // UserError naming the option scheduler.mode otherwise
const char* mode_name(Mode m);

inline constexpr int kNumStreams = 6;
const std::array<std::string, kNumStreams>& stream_names();
// Index of a stream name in stream_names(), -1 when unknown.
int stream_index(std::string_view name);

// The per-stream thread budget of the policy above for a creator budget of `total`.
int threads_per_stream(int total, int streams = kNumStreams);

class StreamSet {
 public:
  // threads: the thread budget of each CPU worker; 0 = the policy above.
  explicit StreamSet(Backend& backend, int threads = 0);
  ~StreamSet();
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  Backend& backend() const { return backend_; }
  Stream& stream(int index) const { return *streams_[size_t(index)]; }
  Stream& stream(std::string_view name) const;  // UserError on an unknown name
  int threads() const { return threads_; }      // per CPU worker
  // Waits for every stream; rethrows the first exception a stream kept.
  void synchronize();

 private:
  Backend& backend_;
  int threads_ = 1;
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace vlm::sched
