// Measurements of a training run for the planner's checks (train/train_measure.h).
#include "train/train_measure.h"

#include <cstdio>
#include <vector>

#include "parallel/runtime.h"

namespace vlm {

CommCounters counters_since(const CommCounters& now, const CommCounters& then) {
  CommCounters d;
  for (size_t k = 0; k < d.bytes.size(); ++k) d.bytes[k] = now.bytes[k] - then.bytes[k], d.calls[k] = now.calls[k] - then.calls[k];
  return d;
}

// Rank 0 prints every rank's measured peak and its own bytes of the last step per group
// (what `vlm plan` predicts: docs/planning.md).
void report_memory_and_bytes(Runtime& rt, Stream& s, const TrainReport& rep) {
  Communicator& world = rt.groups().world();
  std::vector<double> peaks(size_t(world.size()), 0.0);
  peaks[size_t(world.rank())] = double(rep.peak_arena_bytes);
  peaks = all_reduce_values(world, s, peaks);
  if (!rt.root()) return;
  std::printf("memory per rank (device arenas, measured peak in training, planned %zu B on rank 0):", rep.planned_arena_bytes);
  for (size_t r = 0; r < peaks.size(); ++r) std::printf(" rank %zu %.0f B,", r, peaks[r]);
  std::printf("\ncommunication of the last step (rank 0): tp %llu B (%s) | dp %llu B (%s)\n",
              (unsigned long long)rep.comm_tp.total_bytes(), rep.comm_tp.str().c_str(),
              (unsigned long long)rep.comm_dp.total_bytes(), rep.comm_dp.str().c_str());
}

}  // namespace vlm
