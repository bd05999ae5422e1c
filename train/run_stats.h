// RunStats: what `vlm train` accumulates over the steps this process runs (the trainer's
// loop, train/trainer.cpp): one Step record per optimizer step in, the TrainReport's
// figures and the time-per-step line out. Nothing here communicates: a Step holds the
// DP-reduced sums the trainer computed.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "scheduler/streams.h"
#include "scheduler/trace.h"
#include "train/trainer.h"

namespace vlm {

class RunStats {
 public:
  // One optimizer step, as the trainer measured it.
  struct Step {
    int64_t step = 0;
    double loss = 0;                   // over the global batch
    double tokens = 0, visual = 0, images = 0;  // summed over DP: text + visual tokens, visual tokens, images
    double seconds = 0;                // the step's wall time, batches included
    double data_wait = 0;              // of which waiting for the loader
    CommCounters tp, dp;               // bytes this rank's groups moved in the step
    sched::StepSummary graph;          // the step graph's timing (scheduler/trace.h)
    double relevance_precision = -1, scorer_grad_norm = 0;  // train/lod_metrics.h (-1: no boxes)
  };

  // tp_bytes, dp_bytes: the groups' byte counters when the run starts.
  RunStats(uint64_t tp_bytes, uint64_t dp_bytes);
  void add(const Step& s);

  // The report of the steps added so far: losses, throughput, loader stall, the last
  // step's bytes and the bytes per step (tp_bytes, dp_bytes: the counters now), after
  // train_seconds of training.
  TrainReport report(double train_seconds, uint64_t tp_bytes, uint64_t dp_bytes) const;
  // "time per step (mean): ... ms, of which the step graph ... (busy ms per stream: ...)".
  std::string time_line(double train_seconds) const;

 private:
  int64_t steps_ = 0;
  uint64_t tp_start_, dp_start_;
  TrainReport acc_;  // losses, first/last loss, last step's bytes, token and image sums
  double visual_ = 0, images_ = 0, data_wait_ = 0;
  std::array<double, sched::kNumStreams> busy_ms_{};
  double graph_ms_ = 0, overlap_ms_ = 0, exposed_ms_ = 0;
};

}  // namespace vlm
