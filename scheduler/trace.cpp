// Step summaries and Chrome trace-event JSON (trace.h).
#include "scheduler/trace.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/error.h"
#include "base/json.h"
#include "io/atomic_file.h"

namespace vlm::sched {

std::vector<Slice> slices_of(const Graph& g, const std::vector<TaskTiming>& timings) {
  VLM_ASSERT(timings.size() == g.size(), "slices_of: one timing per task expected");
  std::vector<Slice> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& t = g.task(i);
    out[i] = Slice{t.name, g.stream_of(i), t.micro_batch, t.bytes, timings[i].begin_ms, timings[i].end_ms};
  }
  return out;
}

StepSummary summarize(const std::vector<Slice>& slices, int step) {
  StepSummary s;
  s.step = step;
  // Sweep over the begin/end points, counting the active slices of each stream.
  std::vector<std::pair<double, int>> points;  // (time, +-(stream+1))
  for (const auto& sl : slices) {
    if (sl.end_ms <= sl.begin_ms) continue;
    points.emplace_back(sl.begin_ms, sl.stream + 1);
    points.emplace_back(sl.end_ms, -(sl.stream + 1));
    s.step_ms = std::max(s.step_ms, sl.end_ms);
  }
  std::sort(points.begin(), points.end());
  std::array<int, kNumStreams> active{};
  double prev = 0;
  const int comm = stream_index("comm");
  for (const auto& [t, d] : points) {
    double dt = t - prev;
    int busy = 0;
    for (int k = 0; k < kNumStreams; ++k)
      if (active[size_t(k)] > 0) {
        ++busy;
        s.busy_ms[size_t(k)] += dt;
      }
    if (busy >= 2) s.overlap_fraction += dt;
    if (busy == 1 && active[size_t(comm)] > 0) s.exposed_comm_ms += dt;
    active[size_t(std::abs(d) - 1)] += d > 0 ? 1 : -1;
    prev = t;
  }
  s.overlap_fraction = s.step_ms > 0 ? s.overlap_fraction / s.step_ms : 0;
  return s;
}

std::string StepSummary::line() const {
  char buf[64];
  auto ms = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return std::string(buf);
  };
  std::string out = cat("step ", step, ": ", ms(step_ms), " ms | busy");
  for (int k = 0; k < kNumStreams; ++k) out += cat(" ", stream_names()[size_t(k)], " ", ms(busy_ms[size_t(k)]));
  return out + cat(" ms | overlap ", ms(overlap_fraction), " | exposed comm ", ms(exposed_comm_ms), " ms");
}

namespace {

json::Value event(const char* ph, const std::string& name, int pid, int tid) {
  auto e = json::Value::object();
  e.set("name", json::Value::string(name));
  e.set("ph", json::Value::string(ph));
  e.set("pid", json::Value::integer(pid));
  e.set("tid", json::Value::integer(tid));
  return e;
}

void append(std::string& events, const json::Value& e) {
  if (!events.empty()) events += ',';
  events += json::write(e);
}

constexpr int kStepTrack = kNumStreams;

}  // namespace

StepSummary Trace::add_step(const std::vector<Slice>& slices) {
  if (steps_ == 0) {  // metadata: the process and its tracks
    auto p = event("M", "process_name", rank_, 0);
    p.set("args", json::Value::object({{"name", json::Value::string(cat("rank ", rank_))}}));
    append(events_, p);
    for (int k = 0; k <= kNumStreams; ++k) {
      auto t = event("M", "thread_name", rank_, k);
      std::string name = k == kStepTrack ? "step" : stream_names()[size_t(k)];
      t.set("args", json::Value::object({{"name", json::Value::string(name)}}));
      append(events_, t);
      auto o = event("M", "thread_sort_index", rank_, k);
      o.set("args", json::Value::object({{"sort_index", json::Value::integer(k)}}));
      append(events_, o);
    }
  }
  StepSummary s = summarize(slices, steps_);
  auto step = event("X", cat("step ", steps_), rank_, kStepTrack);
  step.set("ts", json::Value::number(offset_ms_ * 1e3));
  step.set("dur", json::Value::number(s.step_ms * 1e3));
  step.set("args", json::Value::object({{"overlap_fraction", json::Value::number(s.overlap_fraction)},
                                        {"exposed_comm_ms", json::Value::number(s.exposed_comm_ms)}}));
  append(events_, step);
  for (const auto& sl : slices) {
    auto e = event("X", sl.name, rank_, sl.stream);
    e.set("cat", json::Value::string("task"));
    e.set("ts", json::Value::number((offset_ms_ + sl.begin_ms) * 1e3));
    e.set("dur", json::Value::number(std::max(0.0, sl.end_ms - sl.begin_ms) * 1e3));
    auto args = json::Value::object({{"step", json::Value::integer(steps_)}});
    if (sl.micro_batch >= 0) args.set("micro_batch", json::Value::integer(sl.micro_batch));
    if (sl.bytes > 0) args.set("bytes", json::Value::integer(int64_t(sl.bytes)));
    e.set("args", std::move(args));
    append(events_, e);
  }
  offset_ms_ += s.step_ms;
  ++steps_;
  return s;
}

std::string Trace::events_json() const { return events_; }

std::string trace_document(const std::vector<std::string>& rank_events) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  for (const auto& e : rank_events) {
    if (e.empty()) continue;
    if (!first) out += ",\n";
    out += e;
    first = false;
  }
  return out + "],\"displayTimeUnit\":\"ms\"}\n";
}

void write_trace_file(const std::string& path, const std::vector<std::string>& rank_events) {
  try {
    write_file_atomic(path, trace_document(rank_events));
  } catch (const UserError& e) {
    throw UserError(cat("--trace ", e.what()));  // the option that named the file
  }
}

}  // namespace vlm::sched
