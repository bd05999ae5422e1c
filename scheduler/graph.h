// The task graph of a step: tasks (closures bound to one named stream) and their
// dependencies, checked once when the graph is built and then replayed by run().
// Invariants:
//  - build() refuses, with a UserError naming the task: a stream outside stream_names(),
//    a dependency on a task that does not exist, a duplicate task name, an empty name, and
//    a cycle (the message lists it: "a -> b -> a").
//  - The serial order (order()) is a topological order; among ready tasks the one added
//    first goes first. Overlap mode issues the tasks in this same order, each after
//    Stream::wait on the completion events of its dependencies, so a task starts only
//    after every task it depends on has finished, whatever the streams' speeds.
//  - Events are created once in build() (two per task, with timing) and reused by every
//    run: a step allocates no events. A graph runs on the backend it was built for.
//  - Errors: a task that throws stops the closures of every task not yet started (they
//    are skipped, their events still complete, so no stream waits forever); run() waits
//    for every stream, then throws "task '<name>' on stream '<stream>' failed: <what>",
//    a UserError when the task threw one, else std::runtime_error. The first failure in
//    issue order wins when several tasks throw.
#pragma once
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "scheduler/streams.h"

namespace vlm::sched {

struct TaskSpec {
  std::string name;                // unique in the graph
  std::string stream;              // one of stream_names()
  std::vector<std::string> after;  // names of the tasks it depends on
  int micro_batch = -1;            // for the trace; -1 = none
  size_t bytes = 0;                // bytes communicated, for the trace (comm tasks; the
                                   // encoder's tasks under ZeRO >= 2, train/step.h)
};

// The body of a task: enqueues or runs its work on the stream it is given (the task's
// named stream in overlap mode, the backend's default stream in serial mode).
using TaskFn = std::function<void(Stream&)>;

// When a task ran, in milliseconds from the start of the step (completion events on the
// task's stream; host times on CPU, GPU times on CUDA); host_ms: the host's time in
// launching it (Stream::launch: on CUDA the body, which only enqueues its work; on the
// CPU handing it to the stream's thread, or the body itself on the default stream). On
// CUDA a step whose bodies take as long as the GPU's work leaves the streams nothing to
// overlap (bench_step prints the sum).
struct TaskTiming {
  double begin_ms = 0, end_ms = 0;
  double host_ms = 0;
};

class Graph;

class GraphBuilder {
 public:
  GraphBuilder& add(TaskSpec spec, TaskFn fn);
  // Checks the graph (see the invariants above) and creates its events on `backend`.
  Graph build(Backend& backend);

 private:
  std::vector<TaskSpec> specs_;
  std::vector<TaskFn> fns_;
};

class Graph {
 public:
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  size_t size() const { return specs_.size(); }
  const TaskSpec& task(size_t i) const { return specs_[i]; }
  int stream_of(size_t i) const { return stream_[i]; }  // index in stream_names()
  const std::vector<int>& deps(size_t i) const { return deps_[i]; }
  const std::vector<int>& order() const { return order_; }  // the serial order

  // Runs every task once and returns when all have finished. timings: when given, set to
  // one entry per task (index = task index).
  void run(StreamSet& streams, Mode mode, std::vector<TaskTiming>* timings = nullptr);

 private:
  friend class GraphBuilder;
  Graph() = default;
  void body(int i, Stream& s);  // the task's closure, guarded by the failure state
  void collect(std::vector<TaskTiming>& timings);

  Backend* backend_ = nullptr;
  std::vector<TaskSpec> specs_;
  std::vector<TaskFn> fns_;
  std::vector<int> stream_;
  std::vector<std::vector<int>> deps_;
  std::vector<int> order_;
  std::vector<std::unique_ptr<Event>> begin_, done_;
  std::vector<double> host_ms_;  // per task, of the last run
  std::unique_ptr<Event> start_;

  // Failure state of the current run.
  std::unique_ptr<std::atomic<bool>> failed_;
  std::unique_ptr<std::mutex> error_mu_;
  int error_task_ = -1;
  std::exception_ptr error_;
};

}  // namespace vlm::sched
