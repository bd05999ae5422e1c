// `vlm train` stopped by a signal, as a cluster stops it (train.on_signal; base/
// stop_signal.h; docs/preemption.md), through the binary and real mpirun,
// on configs/tiny.cfg runs long enough that only the signal ends them:
//  - SIGTERM to one process: it ends after the step under way (k), with status 143, a
//    complete save of step k named by `latest` and k steps in metrics.jsonl; the same
//    command with train.resume auto then gives bitwise the losses of a run that was never
//    stopped;
//  - SIGUSR1 to mpirun (which forwards it) at dp = 2 with ZeRO-1: both ranks save step k
//    and end with 138, and the resume at dp = 2 is bitwise too;
//  - SIGTERM to mpirun (Open MPI 4.1): it passes the signal on odls_base_sigkill_timeout
//    seconds later and kills the ranks as long after that; with 4 s both ranks save;
//  - SIGTERM to rank 1 only at tp = 2: rank 0 learns it through the agreement, both save
//    the same step and end (143), and the save resumes;
//  - train.time_limit at dp = 2: both ranks save the step where one passed it, end with
//    exit code 3, and the save resumes;
//  - train.save_every = -1: the run stops for the signal with nothing saved;
//    train.on_signal = exit: the signal ends the process as it ends any program;
//  - a signal during the final validation ends the process at once (the handler lives
//    during the steps only), and the requeued command, resumed at the run's last step,
//    runs no step but the validation;
//  - a save that fails at the stop is reported as the error it is (exit 2, one line),
//    not hidden behind the signal's exit code.
#include <chrono>
#include <csignal>

#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/support/signalled_run.h"

namespace vlm::test {
namespace {

constexpr int64_t kLongRun = 100000;  // steps: minutes at the tiny config's pace, so the signal ends the run

class Preemption : public Checkpoint {
 protected:
  // `vlm train` of kLongRun steps (the schedules of that run), without the fixture's saves.
  static std::string long_run(const std::string& run, const std::string& extra) {
    return vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run " + run +
           " --train.steps " + std::to_string(kLongRun) + " --train.log_every 1000 " + extra;
  }
  // True once runs/<run>/metrics.jsonl holds the losses of n steps (counted as text: the
  // file is being written).
  static std::function<bool()> steps_logged(const std::string& run, size_t n) {
    return [path = dir_ + "/runs/" + run + "/metrics.jsonl", n] {
      std::error_code ec;
      if (!fs::exists(path, ec)) return false;
      const std::string t = read_file(path);
      size_t steps = 0;
      for (size_t at = t.find("\"loss\":"); at != std::string::npos; at = t.find("\"loss\":", at + 1)) ++steps;
      return steps >= n;
    };
  }
  // The run stopped (`why`: "by SIGTERM", "at train.time_limit (...)") at step k = the
  // steps it logged: its message, `latest` and the save of step k (with `shards` shards).
  // Returns k.
  static int64_t expect_stopped_and_saved(const std::string& out, const std::string& run, const std::string& why,
                                          int shards) {
    const int64_t k = int64_t(losses(run).size());
    EXPECT_GE(k, 3);
    EXPECT_NE(out.find("vlm train: stopped " + why + " after step " + std::to_string(k) + " of " +
                         std::to_string(kLongRun) + "; saved there (train.resume goes on from it)\n" +
                         "vlm train: the same command with --train.resume auto goes on from that checkpoint\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(read_file(ckpt_dir(run) + "/latest"), "step_" + std::to_string(k) + "\n");
    const CheckpointIndex ix = index(ckpt(run, int(k)));
    EXPECT_EQ(ix.state.step, k);
    EXPECT_EQ(int(ix.shards.size()), shards);
    return k;
  }
};

TEST_F(Preemption, SigtermEndsAfterTheStepUnderWayAndTheResumeIsExact) {
  const SignalledRun r = run_and_signal(long_run("term", ""), dir_, steps_logged("term", 3), SIGTERM);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.status, 143) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  const int64_t k = expect_stopped_and_saved(r.out, "term", "by SIGTERM", 1);
  const std::string until = " --train.stop_after " + std::to_string(k + 3);
  const CommandResult resumed = run_command(long_run("term", "--train.resume auto" + until), dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  const CommandResult ref = run_command(long_run("never_stopped", until), dir_);
  ASSERT_EQ(ref.status, 0) << ref.out << ref.err;
  EXPECT_EQ(losses("term"), losses("never_stopped"));  // steps 1..k stopped, k+1..k+3 resumed: bitwise
}

TEST_F(Preemption, SigusrToMpirunStopsEveryRankAtTheSameStep) {
  const std::string dp2 = "--train.batch 4 --train.zero 1";
  const SignalledRun r = run_and_signal(mpirun(2) + long_run("usr1", dp2), dir_, steps_logged("usr1", 3), SIGUSR1);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.status, 138) << r.out << r.err;
  const int64_t k = expect_stopped_and_saved(r.out, "usr1", "by SIGUSR1", 2);
  const std::string until = dp2 + " --train.stop_after " + std::to_string(k + 2);
  const CommandResult resumed = run_command(mpirun(2) + long_run("usr1", "--train.resume auto " + until), dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  const CommandResult ref = run_command(mpirun(2) + long_run("usr1_ref", until), dir_);
  ASSERT_EQ(ref.status, 0) << ref.out << ref.err;
  EXPECT_EQ(losses("usr1"), losses("usr1_ref"));
}

TEST_F(Preemption, SigtermToMpirunReachesTheRanksAfterItsKillTimeout) {
  // docs/preemption.md, "Launchers": mpirun holds a SIGTERM for odls_base_sigkill_timeout
  // seconds, then passes it on and SIGKILLs the ranks that long later. 4 s hold the step
  // under way and the save; mpirun itself ends with 1 (an aborted job).
  const std::string dp2 = "--train.batch 4";
  const std::string launcher = mpirun(2) + "--mca odls_base_sigkill_timeout 4 ";
  const SignalledRun r = run_and_signal(launcher + long_run("mpiterm", dp2), dir_, steps_logged("mpiterm", 3), SIGTERM);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_NE(r.status, 0) << r.out << r.err;
  const int64_t k = expect_stopped_and_saved(r.out, "mpiterm", "by SIGTERM", 2);
  const CommandResult resumed = run_command(
      mpirun(2) + long_run("mpiterm", dp2 + " --train.resume auto --train.stop_after " + std::to_string(k + 1)), dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_EQ(int64_t(losses("mpiterm").size()), k + 1);
}

TEST_F(Preemption, ASignalToOneRankStopsThemAll) {
  const SignalledRun r =
      run_and_signal(mpirun(2) + long_run("one", "--tp 2"), dir_, steps_logged("one", 3), SIGTERM, /*rank=*/1);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.status, 143) << r.out << r.err;  // mpirun's: the first rank's status
  const int64_t k = expect_stopped_and_saved(r.out, "one", "by SIGTERM", 2);
  const CommandResult resumed = run_command(
      mpirun(2) + long_run("one", "--tp 2 --train.resume auto --train.stop_after " + std::to_string(k + 1)), dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  EXPECT_EQ(int64_t(losses("one").size()), k + 1);
}

TEST_F(Preemption, TheTimeLimitStopsEveryRankWithASave) {
  // dp = 2: 0.02 min of steps (1.2 s, some hundred steps), then exit code 3 and a save of
  // the step where a rank passed it, which resumes.
  const std::string dp2 = "--train.batch 4 --train.time_limit 0.02";
  const CommandResult r = run_command("timeout -k 10 120 " + mpirun(2) + long_run("limit", dp2), dir_);  // bounded
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  const int64_t k = expect_stopped_and_saved(r.out, "limit", "at train.time_limit (0.02 min)", 2);
  const CommandResult resumed = run_command(
      mpirun(2) + long_run("limit", "--train.batch 4 --train.resume auto --train.stop_after " + std::to_string(k + 1)),
      dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_EQ(int64_t(losses("limit").size()), k + 1);
}

TEST_F(Preemption, WithoutSavesTheRunStopsAndSavesNothing) {
  const SignalledRun r =
      run_and_signal(long_run("nosave", "--train.save_every -1"), dir_, steps_logged("nosave", 3), SIGINT);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.status, 130) << r.out << r.err;
  const int64_t k = int64_t(losses("nosave").size());
  EXPECT_NE(r.out.find("stopped by SIGINT after step " + std::to_string(k) + " of " + std::to_string(kLongRun) +
                       "; nothing saved (train.save_every = -1)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(ckpt_dir("nosave")));
}

TEST_F(Preemption, ASignalDuringTheFinalValidationEndsTheProcess) {
  // 5 steps, saved at the last, then a validation of 30000 batches (half a minute): the
  // signal goes 1 s after `latest` names step 5 (the save done), inside the validation.
  std::chrono::steady_clock::time_point saved{};
  const auto in_validation = [&, latest = ckpt_dir("final") + "/latest"]() {
    if (saved == std::chrono::steady_clock::time_point{}) {
      std::error_code ec;
      if (fs::exists(latest, ec) && read_file(latest) == "step_5\n") saved = std::chrono::steady_clock::now();
      return false;
    }
    return std::chrono::steady_clock::now() - saved > std::chrono::seconds(1);
  };
  const std::string five = "--train.steps 5 --train.eval_batches 30000";
  const SignalledRun r = run_and_signal(long_run("final", five), dir_, in_validation, SIGTERM);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.signal, SIGTERM) << r.status << r.out << r.err;
  EXPECT_EQ(r.out.find("vlm train: 5 steps in"), std::string::npos) << r.out;
  // Requeued: resumed at the run's last step, it runs the validation alone.
  const CommandResult again = run_command(long_run("final", five + " --train.eval_batches 2 --train.resume auto"), dir_);
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("vlm train: no step left (resumed at step 5, the last of this run) | val loss "),
            std::string::npos)
      << again.out;
  EXPECT_EQ(losses("final").size(), 5u);
}

TEST_F(Preemption, ASaveThatFailsAtTheStopIsTheErrorNotTheSignal) {
  // Once the run is under way its checkpoint folder becomes a file (as a full disk or a
  // quota would fail the save): the save at the stop fails with one line and status 2.
  const std::string folder = dir_ + "/runs/failing/checkpoints";
  const auto block_the_folder = [&, done = steps_logged("failing", 3)]() {
    if (!done()) return false;
    fs::remove_all(folder);
    write_file(folder, "not a folder\n");
    return true;
  };
  const SignalledRun r = run_and_signal(long_run("failing", ""), dir_, block_the_folder, SIGTERM);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  expect_one_error_line(CommandResult{r.status, r.out, r.err}, "vlm train", folder);
  EXPECT_EQ(r.out.find("stopped by"), std::string::npos) << r.out;
}

TEST_F(Preemption, OnSignalExitLetsTheSignalEndTheProcess) {
  const SignalledRun r =
      run_and_signal(long_run("exit", "--train.on_signal exit"), dir_, steps_logged("exit", 3), SIGTERM);
  ASSERT_TRUE(r.sent) << r.out << r.err;
  EXPECT_EQ(r.signal, SIGTERM) << r.status << r.out << r.err;
  EXPECT_EQ(r.out.find("stopped by"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(ckpt_dir("exit") + "/latest"));
}

}  // namespace
}  // namespace vlm::test
