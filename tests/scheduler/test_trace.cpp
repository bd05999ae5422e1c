// Traces (scheduler/trace.h): the summary against hand-computed figures, and the trace
// file of a real run: valid JSON (base/json.h) in the trace-event format, one named
// track per stream, and overlapping slices for the tasks that can run at once.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "scheduler/graph.h"
#include "scheduler/trace.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm::sched {
namespace {

using namespace std::chrono_literals;

int idx(const char* name) { return stream_index(name); }

TEST(Summary, MatchesHandComputedFigures) {
  // vision [0,4], scorer.0 [2,6], comm [5,9], comm [9,10]: step 10 ms.
  std::vector<Slice> sl = {{"v", idx("vision"), 0, 0, 0, 4},
                           {"s", idx("scorer.0"), 0, 0, 2, 6},
                           {"c1", idx("comm"), -1, 100, 5, 9},
                           {"c2", idx("comm"), -1, 100, 9, 10}};
  StepSummary s = summarize(sl, 3);
  EXPECT_DOUBLE_EQ(s.step_ms, 10);
  EXPECT_DOUBLE_EQ(s.busy_ms[size_t(idx("vision"))], 4);
  EXPECT_DOUBLE_EQ(s.busy_ms[size_t(idx("scorer.0"))], 4);
  EXPECT_DOUBLE_EQ(s.busy_ms[size_t(idx("comm"))], 5);
  EXPECT_DOUBLE_EQ(s.busy_ms[size_t(idx("llm"))], 0);
  // >= 2 busy: [2,4] and [5,6] -> 3 ms of 10.
  EXPECT_DOUBLE_EQ(s.overlap_fraction, 0.3);
  // comm alone: [6,10] -> 4 ms.
  EXPECT_DOUBLE_EQ(s.exposed_comm_ms, 4);
  EXPECT_EQ(s.line(),
            "step 3: 10.00 ms | busy vision 4.00 scorer.0 4.00 scorer.1 0.00 scorer.2 0.00 llm 0.00 comm 5.00 ms | "
            "overlap 0.30 | exposed comm 4.00 ms");
}

TEST(TraceFile, RealRunIsValidTraceEventJsonWithOverlap) {
  StreamSet streams(cpu_backend());
  GraphBuilder b;
  b.add({"encode", "vision", {}, 0}, [](Stream&) { std::this_thread::sleep_for(5ms); });
  for (int k = 0; k < 3; ++k)
    b.add({"score" + std::to_string(k), "scorer." + std::to_string(k), {"encode"}, 0},
          [](Stream&) { std::this_thread::sleep_for(30ms); });
  b.add({"reduce", "comm", {"encode"}, 0, 4096}, [](Stream&) { std::this_thread::sleep_for(30ms); });
  b.add({"backbone", "llm", {"score0", "score1", "score2"}, 0}, [](Stream&) { std::this_thread::sleep_for(5ms); });
  Graph g = b.build(cpu_backend());
  Trace trace(0), other(1);
  std::vector<TaskTiming> t;
  std::vector<StepSummary> sums;
  for (int step = 0; step < 2; ++step) {
    g.run(streams, Mode::Overlap, &t);
    sums.push_back(trace.add_step(g, t));
  }
  g.run(streams, Mode::Serial, &t);
  other.add_step(g, t);
  EXPECT_GT(sums[0].overlap_fraction, 0.3) << sums[0].line();
  EXPECT_LT(sums[0].exposed_comm_ms, 20.0) << sums[0].line();

  const std::string path = test::scratch_dir("scheduler_trace") + "/trace.json";
  write_trace_file(path, {trace.events_json(), other.events_json()});
  json::Value doc = json::parse_file(path);
  const auto& events = doc.at("traceEvents").as_array();
  std::map<std::pair<int64_t, int64_t>, std::string> tracks;  // (pid, tid) -> name
  struct X {
    std::string name;
    int64_t pid, tid;
    double ts, dur;
  };
  std::vector<X> slices;
  int steps = 0;
  for (const auto& e : events) {
    const std::string& ph = e.at("ph").as_string();
    int64_t pid = e.at("pid").as_int(), tid = e.at("tid").as_int();
    if (ph == "M" && e.at("name").as_string() == "thread_name")
      tracks[{pid, tid}] = e.at("args").at("name").as_string();
    if (ph != "X") continue;
    ASSERT_TRUE(e.at("ts").is_number());
    ASSERT_GE(e.at("dur").as_double(), 0.0);
    if (tid == kNumStreams) {
      ++steps;
      continue;
    }
    slices.push_back({e.at("name").as_string(), pid, tid, e.at("ts").as_double(), e.at("dur").as_double()});
    if (e.at("name").as_string() == "reduce") {
      EXPECT_EQ(e.at("args").at("bytes").as_int(), 4096);
    }
    EXPECT_EQ(e.at("args").at("micro_batch").as_int(), 0);
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(slices.size(), 3 * g.size());
  for (int pid = 0; pid < 2; ++pid)
    for (int k = 0; k < kNumStreams; ++k) EXPECT_EQ((tracks[{pid, k}]), stream_names()[size_t(k)]);
  auto overlap = [](const X& a, const X& b) { return a.ts < b.ts + b.dur && b.ts < a.ts + a.dur; };
  auto find = [&](int64_t pid, const std::string& name, int nth) {
    for (const auto& s : slices)
      if (s.pid == pid && s.name == name && nth-- == 0) return s;
    ADD_FAILURE() << "no slice " << name;
    return X{};
  };
  // Rank 0 (overlap): the three scorers and the reduction overlap pairwise, in both steps;
  // the step-1 slices come after the step-0 slices. Rank 1 (serial): nothing overlaps.
  for (int step = 0; step < 2; ++step) {
    X s0 = find(0, "score0", step), s1 = find(0, "score1", step), s2 = find(0, "score2", step);
    X r = find(0, "reduce", step), enc = find(0, "encode", step), bb = find(0, "backbone", step);
    EXPECT_TRUE(overlap(s0, s1) && overlap(s1, s2) && overlap(s0, s2) && overlap(r, s1));
    EXPECT_GE(s0.ts, enc.ts + enc.dur);
    EXPECT_GE(bb.ts, s2.ts + s2.dur);
  }
  EXPECT_GE(find(0, "encode", 1).ts, find(0, "backbone", 0).ts);
  for (const auto& a : slices)
    for (const auto& c : slices)
      if (a.pid == 1 && c.pid == 1 && &a != &c) {
        EXPECT_FALSE(overlap(a, c)) << a.name << " / " << c.name;
      }
}

TEST(TraceFile, UnwritablePathIsAUserError) {
  auto e = test::error_of([] { write_trace_file("/nonexistent-dir/t.json", {}); });
  EXPECT_NE(e.find("--trace /nonexistent-dir/t.json: cannot write"), std::string::npos) << e;
}

}  // namespace
}  // namespace vlm::sched
