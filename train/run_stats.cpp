// RunStats (train/run_stats.h).
#include "train/run_stats.h"

#include <algorithm>
#include <cstdio>

namespace vlm {

RunStats::RunStats(uint64_t tp_bytes, uint64_t dp_bytes) : tp_start_(tp_bytes), dp_start_(dp_bytes) {}

void RunStats::add(const Step& s) {
  if (steps_++ == 0) acc_.first_loss = s.loss;
  acc_.last_loss = s.loss;
  acc_.losses.push_back(s.loss);
  acc_.relevance_precision.push_back(s.relevance_precision), acc_.scorer_grad_norms.push_back(s.scorer_grad_norm);
  acc_.comm_tp = s.tp, acc_.comm_dp = s.dp;
  acc_.images_per_s += s.images, acc_.tokens_per_s += s.tokens;  // sums until report()
  visual_ += s.visual, images_ += s.images, data_wait_ += s.data_wait;
  for (int k = 0; k < sched::kNumStreams; ++k) busy_ms_[size_t(k)] += s.graph.busy_ms[size_t(k)];
  graph_ms_ += s.graph.step_ms, overlap_ms_ += s.graph.overlap_fraction * s.graph.step_ms;
  exposed_ms_ += s.graph.exposed_comm_ms;
}

TrainReport RunStats::report(double train_seconds, uint64_t tp_bytes, uint64_t dp_bytes) const {
  TrainReport r = acc_;
  const double ran = double(std::max<int64_t>(1, steps_));
  r.train_seconds = train_seconds;
  r.images_per_s /= train_seconds, r.tokens_per_s /= train_seconds;
  r.loader_stall = data_wait_ / train_seconds;
  r.step_seconds = train_seconds / ran, r.visual_tokens_per_image = visual_ / std::max(1.0, images_);
  r.tp_bytes_per_step = double(tp_bytes - tp_start_) / ran;
  r.dp_bytes_per_step = double(dp_bytes - dp_start_) / ran;
  return r;
}

std::string RunStats::time_line(double train_seconds) const {
  const double n = double(std::max<int64_t>(1, steps_));
  std::string split;
  for (int k = 0; k < sched::kNumStreams; ++k)
    split += " " + sched::stream_names()[size_t(k)] + " " + std::to_string(int(busy_ms_[size_t(k)] / n + 0.5));
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "time per step (mean): %.1f ms, of which the step graph %.1f ms (busy ms per stream:%s; overlap %.2f; "
                "exposed comm %.1f ms), waiting for data %.1f ms (loader stall %.1f%%)",
                1e3 * train_seconds / n, graph_ms_ / n, split.c_str(), graph_ms_ > 0 ? overlap_ms_ / graph_ms_ : 0.0,
                exposed_ms_ / n, 1e3 * data_wait_ / n, 100.0 * data_wait_ / train_seconds);
  return buf;
}

}  // namespace vlm
