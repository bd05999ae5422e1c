// The task graph (scheduler/graph.h): refused graphs name the task; 1000 random graphs
// on the six streams respect every dependency under random delays; a throwing task gives
// an error naming it and no hang; serial and overlap modes give bitwise equal numbers;
// the host's time per task is its launch's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "scheduler/graph.h"
#include "scheduler/options.h"
#include "tests/support/errors.h"
#include "tests/support/rng.h"

namespace vlm::sched {
namespace {

// "t<i>", the name of task i of a random graph (built with += : GCC 12 warns falsely,
// -Wrestrict, on "t" + std::to_string(i) here).
std::string task_name(int i) {
  std::string n = "t";
  n += std::to_string(i);
  return n;
}

using namespace std::chrono_literals;
using test::error_of;

TaskFn nop() {
  return [](Stream&) {};
}

std::string build_error(GraphBuilder& b) {
  return error_of([&] { b.build(cpu_backend()); });
}

TEST(GraphBuild, RefusesUnknownStream) {
  GraphBuilder b;
  b.add({"enc", "vision", {}}, nop()).add({"mystery", "gpu2", {"enc"}}, nop());
  auto e = build_error(b);
  EXPECT_NE(e.find("task 'mystery'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown stream 'gpu2'"), std::string::npos) << e;
}

TEST(GraphBuild, RefusesCycle) {
  GraphBuilder b;
  b.add({"a", "vision", {"c"}}, nop()).add({"b", "llm", {"a"}}, nop()).add({"c", "comm", {"b"}}, nop());
  b.add({"free", "scorer.0", {}}, nop());
  auto e = build_error(b);
  EXPECT_NE(e.find("dependency cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("task 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("a -> c -> b -> a"), std::string::npos) << e;
}

TEST(GraphBuild, RefusesSelfLoopUnknownDependencyAndDuplicates) {
  GraphBuilder self;
  self.add({"x", "llm", {"x"}}, nop());
  EXPECT_NE(build_error(self).find("task 'x' is on a dependency cycle: x -> x"), std::string::npos);
  GraphBuilder unknown;
  unknown.add({"x", "llm", {"ghost"}}, nop());
  EXPECT_NE(build_error(unknown).find("task 'x' depends on unknown task 'ghost'"), std::string::npos);
  GraphBuilder twice;
  twice.add({"x", "llm", {}}, nop()).add({"x", "comm", {}}, nop());
  EXPECT_NE(build_error(twice).find("task 'x' is defined twice"), std::string::npos);
}

TEST(GraphBuild, SerialOrderIsTopologicalAddedOrderFirst) {
  GraphBuilder b;
  b.add({"late", "llm", {"early"}}, nop()).add({"early", "vision", {}}, nop()).add({"other", "comm", {}}, nop());
  Graph g = b.build(cpu_backend());
  EXPECT_EQ(g.order(), (std::vector<int>{1, 0, 2}));
}

// Random DAGs: task t may depend on any task created before it; tasks are added in a
// shuffled order so dependencies also point forward in the builder. Each task checks on
// entry that its dependencies have finished, sleeps a random time and marks itself done.
TEST(GraphRun, ThousandRandomGraphsRespectDependencies) {
  StreamSet streams(cpu_backend());
  test::Rng rng(12);
  const int graphs = 1000;
  for (int gi = 0; gi < graphs; ++gi) {
    const int n = rng.randint(2, 16);
    std::vector<std::vector<int>> deps(static_cast<size_t>(n));
    std::vector<int> stream(static_cast<size_t>(n)), delay_us(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      stream[size_t(t)] = rng.randint(0, kNumStreams - 1);
      delay_us[size_t(t)] = rng.randint(0, 3) == 0 ? 0 : rng.randint(1, 300);
      int nd = t == 0 ? 0 : rng.randint(0, std::min(t, 3));
      for (int k = 0; k < nd; ++k) deps[size_t(t)].push_back(rng.randint(0, t - 1));
    }
    std::vector<int> add_order(static_cast<size_t>(n));
    std::iota(add_order.begin(), add_order.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(add_order[size_t(i)], add_order[size_t(rng.randint(0, i))]);

    auto done = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n));
    auto runs = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n));
    std::atomic<int> violations{0}, wrong_stream{0};
    GraphBuilder b;
    for (int t : add_order) {
      TaskSpec spec{task_name(t), stream_names()[size_t(stream[size_t(t)])], {}};
      for (int d : deps[size_t(t)]) spec.after.push_back(task_name(d));
      b.add(std::move(spec), [&, t](Stream& s) {
        for (int d : deps[size_t(t)])
          if (done[size_t(d)].load() == 0) ++violations;
        if (&s != &streams.stream(stream[size_t(t)])) ++wrong_stream;
        if (delay_us[size_t(t)]) std::this_thread::sleep_for(std::chrono::microseconds(delay_us[size_t(t)]));
        ++runs[size_t(t)];
        done[size_t(t)].store(1);
      });
    }
    Graph g = b.build(cpu_backend());
    const int replays = gi % 100 == 0 ? 2 : 1;  // a built graph is replayed
    for (int r = 0; r < replays; ++r) {
      for (int t = 0; t < n; ++t) done[size_t(t)] = 0;
      g.run(streams, Mode::Overlap);
    }
    ASSERT_EQ(violations.load(), 0) << "graph " << gi;
    ASSERT_EQ(wrong_stream.load(), 0) << "graph " << gi;
    for (int t = 0; t < n; ++t) ASSERT_EQ(runs[size_t(t)].load(), replays) << "graph " << gi << " task " << t;
  }
}

// A task that throws: the error names it; a task on another stream that waits for it
// does not run and does not hang; the streams stay usable for the next run.
TEST(GraphRun, ThrowingTaskNamesItselfAndNothingHangs) {
  StreamSet streams(cpu_backend());
  std::atomic<bool> dependent_ran{false}, independent_ran{false};
  GraphBuilder b;
  b.add({"encode", "vision", {}}, [](Stream&) {
     std::this_thread::sleep_for(2ms);
     throw std::runtime_error("out of patches");
   })
      .add({"score", "scorer.1", {"encode"}}, [&](Stream&) { dependent_ran = true; })
      .add({"backbone", "llm", {"score"}}, [&](Stream&) { dependent_ran = true; })
      .add({"reduce", "comm", {}}, [&](Stream&) { independent_ran = true; });
  Graph g = b.build(cpu_backend());
  for (Mode mode : {Mode::Overlap, Mode::Serial}) {
    auto fut = std::async(std::launch::async, [&] {
      try {
        g.run(streams, mode);
      } catch (const std::runtime_error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    });
    ASSERT_EQ(fut.wait_for(60s), std::future_status::ready) << "the run hangs (" << mode_name(mode) << ")";
    EXPECT_EQ(fut.get(), "task 'encode' on stream 'vision' failed: out of patches");
    EXPECT_FALSE(dependent_ran.load());
  }
  // A UserError keeps its type (exit code 2 for the user).
  GraphBuilder ub;
  ub.add({"read", "vision", {}}, [](Stream&) { throw UserError("data.path: no such file"); });
  Graph ug = ub.build(cpu_backend());
  EXPECT_EQ(error_of([&] { ug.run(streams, Mode::Overlap); }),
            "task 'read' on stream 'vision' failed: data.path: no such file");
  // The streams still work.
  std::atomic<int> count{0};
  GraphBuilder ok;
  for (const auto& s : stream_names()) ok.add({"ok." + s, s, {}}, [&](Stream&) { ++count; });
  Graph og = ok.build(cpu_backend());
  og.run(streams, Mode::Overlap);
  EXPECT_EQ(count.load(), kNumStreams);
}

// A small numeric step: vision projects the input, three scorers read it at once, the
// backbone combines them, comm scales the result; every task writes its own buffers.
struct NumericStep {
  Backend& be = cpu_backend();
  Tensor x, w0, ws[3], w4, h, s[3], y, z, out;
  explicit NumericStep(uint64_t seed) {
    test::Rng rng(seed);
    auto init = [&](Shape shape) {
      Tensor t = Tensor::empty(be, shape);
      float* p = t.ptr<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(rng.uniform());
      return t;
    };
    x = init({64, 48});
    w0 = init({48, 96});
    for (auto& w : ws) w = init({96, 32});
    w4 = init({32, 40});
    h = Tensor::zeros(be, {64, 96});
    for (auto& t : s) t = Tensor::zeros(be, {64, 32});
    y = Tensor::zeros(be, {64, 32});
    z = Tensor::zeros(be, {64, 40});
    out = Tensor::zeros(be, {64, 40});
  }
  Graph graph() {
    GraphBuilder b;
    // The sleeps make a missing dependency visible: readers would see zeros.
    b.add({"encode", "vision", {}, 0}, [this](Stream& st) {
      std::this_thread::sleep_for(2ms);
      GemmOpts o;
      o.gelu = true;
      matmul(st, h, x, w0, o);
    });
    for (int k = 0; k < 3; ++k)
      b.add({"score" + std::to_string(k), "scorer." + std::to_string(k), {"encode"}, 0},
            [this, k](Stream& st) { matmul(st, s[k], h, ws[k], {}); });
    b.add({"combine", "llm", {"score0", "score1", "score2"}, 0}, [this](Stream& st) {
      std::this_thread::sleep_for(2ms);
      add(st, y, s[0], s[1]);
      accumulate(st, y, s[2], 0.5f);
      matmul(st, z, y, w4, {});
    });
    b.add({"reduce", "comm", {"combine"}, 0, z.nbytes()}, [this](Stream& st) {
      copy(st, out, z);
      scale(st, out, 0.25f);
    });
    return b.build(be);
  }
  std::vector<float> result() const { return std::vector<float>(out.ptr<float>(), out.ptr<float>() + out.numel()); }
};

TEST(GraphRun, SerialAndOverlapAreBitwiseEqual) {
  StreamSet streams(cpu_backend());
  NumericStep serial(5), overlap(5);
  Graph gs = serial.graph(), go = overlap.graph();
  gs.run(streams, Mode::Serial);
  auto a = serial.result();
  for (int rep = 0; rep < 5; ++rep) {  // the first run on fresh buffers, then replays
    go.run(streams, Mode::Overlap);
    auto b = overlap.result();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "run " << rep;
  }
  double norm = 0;
  for (float v : a) norm += double(v) * v;
  EXPECT_GT(norm, 1.0);  // the graph computed something
}

// TaskTiming::host_ms is the host's time in launching each task: in serial mode the
// default stream runs the body there, so a body that sleeps shows at least its sleep; in
// overlap mode the CPU streams' threads run it, and the host only hands it over.
TEST(GraphRun, HostTimeIsTheLaunchesOwn) {
  StreamSet streams(cpu_backend());
  GraphBuilder b;
  b.add({"slow", "vision", {}}, [](Stream&) { std::this_thread::sleep_for(30ms); });
  b.add({"quick", "llm", {}}, nop());
  Graph g = b.build(cpu_backend());
  std::vector<TaskTiming> t;
  g.run(streams, Mode::Serial, &t);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GE(t[0].host_ms, 30.0);
  EXPECT_GE(t[0].end_ms - t[0].begin_ms, 30.0);
  g.run(streams, Mode::Overlap, &t);
  EXPECT_GE(t[0].end_ms - t[0].begin_ms, 30.0);  // the stream ran it
  EXPECT_LT(t[0].host_ms, t[0].end_ms - t[0].begin_ms);  // the host did not
}

TEST(Mode, ParseRefusesUnknownValues) {
  EXPECT_EQ(parse_mode("serial"), Mode::Serial);
  EXPECT_EQ(parse_mode("overlap"), Mode::Overlap);
  EXPECT_EQ(error_of([] { parse_mode("fast"); }), "scheduler.mode='fast': expected overlap or serial");
}

TEST(Mode, OptionsFromTheCommandLine) {
  Config cfg;
  register_scheduler_options(cfg);
  ASSERT_TRUE(test::parse_args(cfg, {"--scheduler.mode", "serial", "--trace", "out/t.json"}));
  SchedulerOptions o = read_scheduler_options(cfg);
  EXPECT_EQ(o.mode, Mode::Serial);
  EXPECT_EQ(o.trace, "out/t.json");
  Config bad;
  register_scheduler_options(bad);
  auto e = error_of([&] { test::parse_args(bad, {"--scheduler.mode", "fast"}); });
  EXPECT_NE(e.find("scheduler.mode"), std::string::npos) << e;
}

}  // namespace
}  // namespace vlm::sched
