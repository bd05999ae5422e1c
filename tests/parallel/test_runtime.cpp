// The runtime start (parallel/runtime.h) under MPI: every phase sets what it promises
// (topology of the launched world, host backend, groups of the right sizes), options
// come from a Config as from a RuntimeOptions, and the agreement of a step gives every
// rank the same verdict with the right rank(s) reporting: all failed -> rank 0 only;
// some failed -> each failed rank; none -> nobody. Invalid layouts and launch options
// that differ between ranks are refused on every rank alike.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "base/config.h"
#include "core/tensor.h"
#include "parallel/runtime.h"
#include "tests/support/mpi.h"

namespace vlm {
namespace {

int rank() { return test::world_rank(); }
int world() { return test::world_size(); }

RuntimeOptions opts(int tp) {
  RuntimeOptions o;
  o.parallel.tp = tp;
  o.parallel.timeout_s = 60;
  return o;
}

// Runs the step on every rank; returns (threw AgreedError, its report flag, its message).
struct Verdict {
  bool agreed = false, report = false;
  std::string msg;
};
Verdict run_step(const std::function<void()>& step) {
  Verdict v;
  try {
    on_every_rank("test step", 60, step);
  } catch (const AgreedError& e) {
    v.agreed = true, v.report = e.report(), v.msg = e.what();
  }
  return v;
}

TEST(Runtime, EveryPhaseOnHost) {
  Runtime rt = start_runtime(opts(2));
  const Topology& t = rt.topology();
  EXPECT_EQ(t.world_size(), world());
  EXPECT_EQ(t.world_rank(), rank());
  EXPECT_EQ(t.tp(), 2);
  EXPECT_EQ(rt.root(), rank() == 0);
  EXPECT_EQ(rt.local_device(), -1);  // --device cpu binds no GPU
  EXPECT_EQ(rt.backend().device(), DeviceKind::CPU);
  EXPECT_EQ(rt.groups().world().size(), world());
  EXPECT_EQ(rt.groups().tp().size(), 2);
  EXPECT_EQ(rt.groups().tp().rank(), rank() % 2);
  EXPECT_EQ(rt.groups().dp().size(), world() / 2);
  // The groups work: the world sums 1 per rank.
  Tensor x = Tensor::from_vector(std::vector<int32_t>{1}, Shape{1});
  rt.groups().world().all_reduce(rt.backend().default_stream(), x);
  EXPECT_EQ(x.ptr<int32_t>()[0], world());
}

TEST(Runtime, OptionsFromConfig) {
  Config cfg("test");
  register_runtime_options(cfg);
  const char* argv[] = {"test", "--tp", "2", "--device", "cpu", "--parallel.timeout_s", "30",
                        "--parallel.ranks_per_node", "2"};
  ASSERT_TRUE(cfg.parse(9, argv));
  const RuntimeOptions o = read_runtime_options(cfg);
  EXPECT_EQ(o.parallel.tp, 2);
  EXPECT_EQ(o.parallel.ranks_per_node, 2);
  EXPECT_EQ(o.parallel.timeout_s, 30.0);
  EXPECT_EQ(o.device, "cpu");
  Runtime rt = start_runtime(cfg);
  EXPECT_EQ(rt.topology().ranks_per_node(), 2);
  EXPECT_EQ(rt.topology().num_nodes(), world() / 2);
  EXPECT_TRUE(rt.topology().emulated_nodes());

  Config no_device("test");  // a command without --device runs on the host
  register_runtime_options(no_device, /*with_device=*/false);
  const char* argv2[] = {"test"};
  ASSERT_TRUE(no_device.parse(1, argv2));
  EXPECT_EQ(read_runtime_options(no_device).device, "cpu");
}

TEST(Runtime, StepWithoutFailure) {
  int ran = 0;
  const Verdict v = run_step([&] { ran = 1; });
  EXPECT_FALSE(v.agreed);
  MPI_Allreduce(MPI_IN_PLACE, &ran, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(ran, world());
}

TEST(Runtime, EveryRankFailsRankZeroReports) {
  const Verdict v = run_step([] { throw UserError("bad option on every rank"); });
  EXPECT_TRUE(v.agreed);
  EXPECT_EQ(v.report, rank() == 0);
  EXPECT_EQ(v.msg, "bad option on every rank");
}

TEST(Runtime, OneRankFailsItReports) {
  const Verdict v = run_step([] {
    if (rank() == 1) throw UserError("file only rank 1 cannot read");
  });
  EXPECT_TRUE(v.agreed);  // on every rank: nobody goes on alone
  EXPECT_EQ(v.report, rank() == 1);
  if (rank() == 1) EXPECT_EQ(v.msg, "file only rank 1 cannot read");
  else EXPECT_NE(v.msg.find("failed on 1 of " + std::to_string(world()) + " ranks"), std::string::npos) << v.msg;
}

TEST(Runtime, AgreedErrorOfAnInnerStepPassesThrough) {
  const Verdict v = run_step([] {
    on_every_rank("inner", 60, [] {
      if (rank() == world() - 1) throw UserError("inner failure");
    });
  });
  EXPECT_TRUE(v.agreed);
  EXPECT_EQ(v.report, rank() == world() - 1);  // not re-decided by the outer step
}

TEST(Runtime, InvalidLayoutRefusedOnEveryRank) {
  try {
    Runtime rt = start_runtime(opts(world() + 1));
    ADD_FAILURE() << "tp larger than the world was accepted";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.report(), rank() == 0);
    EXPECT_NE(std::string(e.what()).find("parallel.tp=" + std::to_string(world() + 1)), std::string::npos)
        << e.what();
  }
}

TEST(Runtime, LaunchOptionsMustAgree) {
  try {
    Runtime rt = start_runtime(opts(rank() == 1 ? 2 : 1));
    ADD_FAILURE() << "ranks with different parallel.tp started";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.report(), rank() == 0);  // the same message on every rank: reported once
    EXPECT_STREQ(e.what(),
                 "launch options differ between ranks: parallel.tp is 1 on rank 0 but 2 on rank 1 (give every "
                 "rank the same parallel.* options and --device)");
  }
}

TEST(Runtime, BadDeviceRefused) {
  RuntimeOptions o = opts(1);
  o.device = "tpu";
  try {
    Runtime rt = start_runtime(o);
    ADD_FAILURE() << "--device tpu accepted";
  } catch (const AgreedError& e) {
    EXPECT_STREQ(e.what(), "--device: expected auto, cpu or cuda, got 'tpu'");
  }
  if (cuda_available()) return;
  o.device = "cuda";  // no GPU here: refused by the backend phase on every rank
  try {
    Runtime rt = start_runtime(o);
    ADD_FAILURE() << "--device cuda accepted without a GPU";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.report(), rank() == 0);
    EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
  }
}

TEST(Runtime, ReportPrintsOnlyOnReportingRanks) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(report_command_error("vlm t", AgreedError("reported", true)), 2);
  EXPECT_EQ(report_command_error("vlm t", AgreedError("not reported", false)), 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "vlm t: error: reported\n");
}

}  // namespace
}  // namespace vlm
