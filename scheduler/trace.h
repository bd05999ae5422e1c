// Traces of the scheduler's steps: the per-step summary line and Chrome trace-event JSON
// (opens in https://ui.perfetto.dev and chrome://tracing; see scheduler/README.md).
// Invariants:
//  - One process per rank (pid = rank, named "rank R"), one track per stream (tid = the
//    stream's index in stream_names(), named after it) plus a track "step" (tid 6) with
//    one slice per step: the step boundaries. One complete slice ("ph":"X") per task:
//    name, args micro_batch and bytes (when set). Times are microseconds.
//  - Steps are laid end to end on the timeline of their rank, in the order added.
//  - A file holds the events of one or more ranks: each rank's Trace gives its events
//    (events_json); write_trace_file joins those of every rank (the caller gathers them
//    to one rank) and writes the file atomically (a temporary name in the same folder,
//    then rename), so a reader never sees half a trace.
//  - Summary of a step (summarize): busy time per stream (union of its slices), step
//    time (end of the last task), overlap fraction = time with >= 2 streams busy / step
//    time, exposed communication = time `comm` is busy with no other stream busy.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "scheduler/graph.h"
#include "scheduler/streams.h"

namespace vlm::sched {

struct Slice {
  std::string name;
  int stream = 0;  // index in stream_names()
  int micro_batch = -1;
  size_t bytes = 0;
  double begin_ms = 0, end_ms = 0;  // from the start of the step
};

// The slices of one run of `g` with its timings (Graph::run).
std::vector<Slice> slices_of(const Graph& g, const std::vector<TaskTiming>& timings);

struct StepSummary {
  int step = 0;
  double step_ms = 0;
  std::array<double, kNumStreams> busy_ms{};
  double overlap_fraction = 0;  // in [0, 1]
  double exposed_comm_ms = 0;
  // "step 3: 12.40 ms | busy vision 3.10 scorer.0 1.00 ... comm 2.00 ms | overlap 0.41 |
  //  exposed comm 0.50 ms"
  std::string line() const;
};

StepSummary summarize(const std::vector<Slice>& slices, int step = 0);

class Trace {
 public:
  explicit Trace(int rank = 0) : rank_(rank) {}
  int rank() const { return rank_; }
  // Appends one step and returns its summary.
  StepSummary add_step(const std::vector<Slice>& slices);
  StepSummary add_step(const Graph& g, const std::vector<TaskTiming>& timings) {
    return add_step(slices_of(g, timings));
  }
  int steps() const { return steps_; }
  // This rank's trace events, as the comma-separated members of a JSON array (no brackets).
  std::string events_json() const;

 private:
  int rank_;
  int steps_ = 0;
  double offset_ms_ = 0;
  std::string events_;  // slices and steps so far
};

// The whole trace-event document {"traceEvents":[...],"displayTimeUnit":"ms"} of the
// given ranks' events_json().
std::string trace_document(const std::vector<std::string>& rank_events);
// Writes trace_document to `path` atomically (io/atomic_file.h); UserError "--trace
// <path>: ..." naming the file and the error when it cannot.
void write_trace_file(const std::string& path, const std::vector<std::string>& rank_events);

}  // namespace vlm::sched
