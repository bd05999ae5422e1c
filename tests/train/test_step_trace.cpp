// The trace of the VLM step (train/step.h, scheduler/trace.h) under mpirun with 2 ranks
// (DP = 2), M = 4 micro-batches on two front-end slots, `--scheduler.mode overlap
// --trace FILE`: the ranks' events gathered and written as `vlm train` does, the file
// parsed back with base/json.h and checked:
//  - trace-event format: one process per rank ("rank R"), one named track per stream
//    plus the `step` track with one slice per step; every task slice has a name, its
//    step and (tasks of a micro-batch) the micro-batch of its name; the `comm` slices
//    carry the bytes of their module's DP reduction; slices lie inside their step;
//  - the three scorer tracks overlap in time: in some micro-batch, scorer0..2 all run
//    at one instant (the three slices intersect). Work sizes of about ten milliseconds
//    per scorer, so that the threads sharing a core interleave within the tasks;
//  - pipelining: vision.fwd of micro-batch m+1 overlaps llm of micro-batch m;
//  - ZeRO-3: the next layer's all-gather runs under the current layer's compute (below).
// Timing on a shared machine: the overlaps must show in at least one of the steps of
// either rank (kSteps of them); neither can show if the graph orders the tasks one
// after the other (a scorer after another, or vision.fwd.m+1 after llm.m).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/json.h"
#include "scheduler/options.h"
#include "scheduler/trace.h"
#include "tests/support/errors.h"
#include "tests/train/step_rig.h"

namespace vlm {
namespace {

constexpr int kTraceM = 4, kTraceImages = 4, kSteps = 10;

// Work sizes where one task takes about a millisecond or more on one CPU thread, so
// overlapping tasks overlap by more than a worker's wake-up.
VlmConfig trace_config() {
  VlmConfig c = tiny_config(kTraceImages);
  c.vision.image_size = 32, c.vision.d_model = 64, c.vision.n_layers = 2, c.vision.n_heads = 4, c.vision.d_ff = 128;
  c.scorers.lod.min_tokens = 16, c.scorers.lod.max_tokens = 32, c.scorers.scorers.hidden = 2048;
  c.llm.d_model = 128, c.llm.d_ff = 512, c.llm.n_layers = 4;
  return c;
}

struct Slice {
  std::string name;
  int64_t pid, tid, step, micro_batch;
  double ts, end;
};

bool overlap(const Slice& a, const Slice& b) { return a.ts < b.end && b.ts < a.end; }
// Whether the three slices share an instant.
bool overlap(const Slice& a, const Slice& b, const Slice& c) {
  return std::max({a.ts, b.ts, c.ts}) < std::min({a.end, b.end, c.end});
}

// A trace file (scheduler/trace.h) parsed back: its processes and tracks, the task
// slices (checking their args: step, micro-batch of a per-micro-batch name, the bytes of a
// `comm` slice, whose name starts with "dp.", and of the encoder's tasks under ZeRO >= 2),
// and the step track's slices.
struct ParsedTrace {
  std::map<int64_t, std::string> processes;
  std::map<std::pair<int64_t, int64_t>, std::string> tracks;
  std::vector<Slice> slices, steps;
  std::map<std::string, int64_t> dp_bytes;  // comm slice -> bytes (of the last step)
  std::map<std::string, int64_t> encoder_bytes;  // the same of the encoder's tasks (ZeRO >= 2)
};

ParsedTrace parse_trace(const std::string& path) {
  ParsedTrace t;
  const json::Value doc = json::parse_file(path);
  for (const json::Value& e : doc.at("traceEvents").as_array()) {
    const std::string& ph = e.at("ph").as_string();
    const int64_t pid = e.at("pid").as_int(), tid = e.at("tid").as_int();
    if (ph == "M" && e.at("name").as_string() == "process_name") t.processes[pid] = e.at("args").at("name").as_string();
    if (ph == "M" && e.at("name").as_string() == "thread_name") t.tracks[{pid, tid}] = e.at("args").at("name").as_string();
    if (ph != "X") continue;
    const double ts = e.at("ts").as_double(), dur = e.at("dur").as_double();
    EXPECT_GE(dur, 0.0);
    Slice s{e.at("name").as_string(), pid, tid, -1, -1, ts, ts + dur};
    if (tid == sched::kNumStreams) {  // the step track
      t.steps.push_back(s);
      continue;
    }
    const json::Value& args = e.at("args");
    s.step = args.at("step").as_int();
    const size_t dot = s.name.rfind('.');
    const bool per_mb = dot != std::string::npos && std::isdigit(static_cast<unsigned char>(s.name[dot + 1]));
    EXPECT_EQ(args.find("micro_batch") != nullptr, per_mb) << s.name;
    if (per_mb) {
      s.micro_batch = args.at("micro_batch").as_int();
      EXPECT_EQ(std::to_string(s.micro_batch), s.name.substr(dot + 1)) << s.name;
    }
    if (t.tracks[{pid, tid}] == "comm") {
      EXPECT_EQ(s.name.rfind("dp.", 0), 0u) << s.name;
      t.dp_bytes[s.name] = args.at("bytes").as_int();
    } else if (args.find("bytes") != nullptr) {
      EXPECT_EQ(s.name.rfind("vision.", 0), 0u) << s.name << ": bytes outside comm and the encoder's tasks";
      t.encoder_bytes[s.name] = args.at("bytes").as_int();
    }
    t.slices.push_back(s);
  }
  return t;
}

TEST(VlmStepTrace, TwoRanksOverlapFileShowsScorersAndPipelining) {
  if (test::world_size() != 2) GTEST_SKIP() << "2 ranks";
  Backend& b = cpu_backend();
  const std::string path = test::shared_scratch_dir("step_trace") + "/trace.json";
  Config cfg;
  sched::register_scheduler_options(cfg);
  ASSERT_TRUE(test::parse_args(cfg, {"--scheduler.mode", "overlap", "--trace", path}));
  const sched::SchedulerOptions so = sched::read_scheduler_options(cfg);
  ASSERT_EQ(so.trace, path);

  Layout L(1);  // DP = 2
  const int dp = L.groups->dp().size(), r = L.groups->dp().rank();
  ASSERT_EQ(dp, 2);
  const VlmConfig c = trace_config();
  const GlobalBatch g = make_batch(5, c, kTraceImages * dp * kTraceM);
  VlmModel model(c, b, L.groups->tp(), *L.self);
  model.init(1);
  sched::StreamSet streams(b);
  const std::vector<bool> all(kNumModules, true);
  DpGrads dpg(model.modules(), all, L.groups->dp(), 0, 25, b);
  StepOptions o;
  o.mode = so.mode;
  VlmStep step(model, streams, dpg, all, kTraceM, o);
  ASSERT_EQ(step.front_slots(), 2);
  const auto mbs = shard(g, c, dp, r, kTraceM);
  sched::Trace trace(test::world_rank());
  std::vector<sched::TaskTiming> timings;
  for (int k = 0; k < kSteps; ++k) {
    model.zero_grads();
    step.run(mbs, &timings);
    trace.add_step(step.graph(), timings);
  }
  const std::vector<std::string> ev = all_gather_strings(L.groups->world(), b.default_stream(), trace.events_json());
  if (test::world_rank() != 0) return;
  sched::write_trace_file(so.trace, ev);

  const ParsedTrace t = parse_trace(path);
  auto processes = t.processes;
  auto tracks = t.tracks;
  const std::vector<Slice>&slices = t.slices, &steps = t.steps;
  const std::map<std::string, int64_t>& dp_bytes = t.dp_bytes;
  ASSERT_EQ(processes.size(), 2u);
  for (int64_t pid = 0; pid < 2; ++pid) {
    EXPECT_EQ(processes[pid], "rank " + std::to_string(pid));
    for (int k = 0; k < sched::kNumStreams; ++k) EXPECT_EQ((tracks[{pid, k}]), sched::stream_names()[size_t(k)]);
    EXPECT_EQ((tracks[{pid, sched::kNumStreams}]), "step");
  }
  ASSERT_EQ(steps.size(), size_t(2 * kSteps));
  EXPECT_EQ(slices.size(), 2 * kSteps * step.graph().size());
  // Every module's reduction with its bytes (DpGrads::bytes, the same on both ranks): one
  // dp.<module> task, or the backbone's dp.llm<c> chunks and dp.llm.embed (train/step.h).
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    const std::string task = std::string("dp.") + module_name(mods[i].id);
    int64_t sum = 0;
    for (const auto& [n, bytes] : dp_bytes)
      if (n.rfind(task, 0) == 0) sum += bytes;
    EXPECT_EQ(sum, int64_t(dpg.bytes(i))) << module_name(mods[i].id);
  }
  size_t named = 0;  // every comm task is one of a module's
  for (const auto& [n, bytes] : dp_bytes)
    for (const ModuleParams& m : mods) named += n.rfind(std::string("dp.") + module_name(m.id), 0) == 0;
  EXPECT_EQ(named, dp_bytes.size());
  // Steps end to end on each rank; every slice inside its step.
  auto step_of = [&](int64_t pid, int64_t k) -> const Slice& {
    for (const Slice& s : steps)
      if (s.pid == pid && s.name == "step " + std::to_string(k)) return s;
    ADD_FAILURE() << "rank " << pid << " has no step " << k;
    return steps[0];
  };
  const double slack = 1.0;  // microseconds of rounding
  for (const Slice& s : slices) {
    const Slice& st = step_of(s.pid, s.step);
    EXPECT_GE(s.ts, st.ts - slack) << s.name;
    EXPECT_LE(s.end, st.end + slack) << s.name;
  }
  for (int64_t pid = 0; pid < 2; ++pid)
    for (int k = 1; k < kSteps; ++k) EXPECT_GE(step_of(pid, k).ts, step_of(pid, k - 1).end - slack);

  auto find = [&](int64_t pid, int64_t k, const std::string& name) -> const Slice* {
    for (const Slice& s : slices)
      if (s.pid == pid && s.step == k && s.name == name) return &s;
    ADD_FAILURE() << "rank " << pid << " step " << k << ": no slice " << name;
    return nullptr;
  };
  int all_three = 0, pipelined = 0;
  for (int64_t pid = 0; pid < 2; ++pid)
    for (int k = 0; k < kSteps; ++k)
      for (int m = 0; m < kTraceM; ++m) {
        const std::string n = std::to_string(m);
        const Slice *s0 = find(pid, k, "scorer0." + n), *s1 = find(pid, k, "scorer1." + n),
                    *s2 = find(pid, k, "scorer2." + n);
        if (!s0 || !s1 || !s2) return;
        EXPECT_EQ((tracks[{pid, s1->tid}]), "scorer.1");
        all_three += overlap(*s0, *s1, *s2);
        if (m + 1 < kTraceM) {
          const Slice *v = find(pid, k, "vision.fwd." + std::to_string(m + 1)), *l = find(pid, k, "llm." + n);
          if (!v || !l) return;
          pipelined += overlap(*v, *l);
        }
      }
  EXPECT_GT(all_three, 0) << "scorer.0, scorer.1 and scorer.2 never ran at one instant";
  EXPECT_GT(pipelined, 0) << "vision.fwd.m+1 never overlapped llm.m";
  std::printf("the three scorers at one instant in %d of %d micro-batches; vision.fwd.m+1 during llm.m in %d of %d\n",
              all_three, 2 * kSteps * kTraceM, pipelined, 2 * kSteps * (kTraceM - 1));
}

// ZeRO-3 (train/step.h "gather"): the same 2-rank trace in overlap mode, every layer's
// weights all-gathered into a pool slot before its forward and again before its
// backward. The trace shows the all-gather of layer l+1 (dp.llm.gather.f<l+1>.m) during
// the forward of layer l (llm.f<l>.m), and that of layer l-1 (dp.llm.gather.b<l-1>.m)
// during the backward of layer l, in some step of either rank; the comm slices' bytes
// add up to the step's DP bytes (VlmStep::dp_bytes), which the counters confirm.
TEST(VlmStepTrace, ZeroThreeGathersTheNextLayerDuringTheCurrentOne) {
  if (test::world_size() != 2) GTEST_SKIP() << "2 ranks";
  Backend& b = cpu_backend();
  const std::string path = test::shared_scratch_dir("step_trace_zero3") + "/trace.json";
  Layout L(1);  // DP = 2
  const int dp = L.groups->dp().size(), r = L.groups->dp().rank();
  VlmConfig c = trace_config();
  c.sharding = DpSharding{3, dp, r};
  const int layers = c.llm.n_layers;
  const GlobalBatch g = make_batch(5, c, kTraceImages * dp * kTraceM);
  VlmModel model(c, b, L.groups->tp(), *L.self);
  model.init(1);
  sched::StreamSet streams(b);
  const std::vector<bool> all(kNumModules, true);
  DpGrads dpg(model.modules(), all, L.groups->dp(), 3, 25, b);
  dpg.attach(model);
  VlmStep step(model, streams, dpg, all, kTraceM, StepOptions{});
  const auto mbs = shard(g, c, dp, r, kTraceM);
  sched::Trace trace(test::world_rank());
  std::vector<sched::TaskTiming> timings;
  for (int k = 0; k < kSteps; ++k) {
    model.zero_grads();
    const uint64_t before = dpg.counters().total_bytes();
    step.run(mbs, &timings);
    EXPECT_EQ(dpg.counters().total_bytes() - before, step.dp_bytes());
    trace.add_step(step.graph(), timings);
  }
  const std::vector<std::string> ev = all_gather_strings(L.groups->world(), b.default_stream(), trace.events_json());
  if (test::world_rank() != 0) return;
  sched::write_trace_file(path, ev);
  const ParsedTrace t = parse_trace(path);
  int64_t bytes = 0;
  for (const auto& [n, x] : t.dp_bytes) bytes += x;
  for (const auto& [n, x] : t.encoder_bytes) bytes += x;
  EXPECT_FALSE(t.encoder_bytes.empty()) << "zero 3: the encoder's tasks gather its blocks";
  EXPECT_EQ(size_t(bytes), step.dp_bytes());
  std::map<std::tuple<int64_t, int64_t, std::string>, const Slice*> by;  // (rank, step, name)
  for (const Slice& s : t.slices) by[{s.pid, s.step, s.name}] = &s;
  auto find = [&](int64_t pid, int64_t k, const std::string& n) -> const Slice* {
    const auto it = by.find({pid, k, n});
    EXPECT_TRUE(it != by.end()) << "rank " << pid << " step " << k << ": no slice " << n;
    return it == by.end() ? nullptr : it->second;
  };
  int fwd = 0, bwd = 0, pairs = 0;
  for (int64_t pid = 0; pid < 2; ++pid)
    for (int k = 0; k < kSteps; ++k)
      for (int m = 0; m < kTraceM; ++m)
        for (int l = 0; l + 1 < layers; ++l, ++pairs) {
          const std::string mb = std::string(".") + std::to_string(m);
          const Slice *f = find(pid, k, cat("llm.f", l, mb)), *gf = find(pid, k, cat("dp.llm.gather.f", l + 1, mb));
          // layer l+1's backward is llm.bwd<c> with c = layers - 2 - l (from the top)
          const Slice *bw = find(pid, k, cat("llm.bwd", layers - 2 - l, mb)), *gb = find(pid, k, cat("dp.llm.gather.b", l, mb));
          if (!f || !gf || !bw || !gb) return;
          fwd += overlap(*f, *gf);
          bwd += overlap(*bw, *gb);
        }
  EXPECT_GT(fwd, 0) << "the next layer's gather never ran during a layer's forward";
  EXPECT_GT(bwd, 0) << "the layer below's gather never ran during a layer's backward";
  std::printf("zero 3: the next layer's gather under the current layer's forward in %d of %d, backward in %d of %d\n",
              fwd, pairs, bwd, pairs);
}

}  // namespace
}  // namespace vlm
