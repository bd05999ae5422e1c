// RunLog (runlog/run_log.h):
//  - the progress line's time left: the mean of this process's steps times the steps
//    left, for a run from step 1, one resumed after a checkpoint and one that stops early
//    (train.stop_after);
//  - one history in the run folder: a resume drops the metrics.jsonl lines of the steps it
//    runs again (and a line cut by a crash) and starts TensorBoard's anew from there; a
//    fresh start moves an earlier run's lines aside.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runlog/run_log.h"
#include "runlog/tb_events.h"
#include "tests/support/files.h"

namespace vlm {

TEST(RunLog, TimeLeftCountsOnlyThisProcesssSteps) {
  StepLine fresh;
  fresh.step = 100, fresh.total = 1000, fresh.elapsed_s = 10.0;  // 0.1 s a step
  EXPECT_DOUBLE_EQ(eta_seconds(fresh), 900 * 0.1);
  StepLine resumed = fresh;  // from a checkpoint of step 4,800: 700 steps in 70 s
  resumed.first = 4801, resumed.step = 5500, resumed.total = 8000, resumed.elapsed_s = 70.0;
  EXPECT_DOUBLE_EQ(eta_seconds(resumed), 2500 * 0.1);
  StepLine last = resumed;  // nothing left at the last step
  last.step = 8000;
  EXPECT_DOUBLE_EQ(eta_seconds(last), 0.0);
  StepLine stopping = fresh;  // train.stop_after: the time to the step it stops after
  stopping.last = 400;
  EXPECT_DOUBLE_EQ(eta_seconds(stopping), 300 * 0.1);
  StepLine first = resumed;  // the first step of a resumed run is one step
  first.step = 4801, first.elapsed_s = 0.2;
  EXPECT_DOUBLE_EQ(eta_seconds(first), 3199 * 0.2);
}

namespace {

class RunFolder : public test::TempDirTest {
 protected:
  std::string run() const { return (dir_ / "run").string(); }
  std::string metrics() const { return run() + "/metrics.jsonl"; }
  // An earlier attempt's lines, as RunLog writes them: steps 1..5 with a validation at 2
  // and 4 and the final validation and evaluation at 5, a line of another writer, and a
  // last line cut by a crash.
  void earlier_attempt() {
    std::filesystem::create_directories(run());
    test::write_file(metrics(), kEarlier + std::string("{\"step\":6,\"loss\":0.5"));
  }
  // The SessionLog START events of the run folder's event files, by step.
  std::vector<int64_t> session_starts() const {
    std::vector<int64_t> steps;
    for (const auto& f : std::filesystem::directory_iterator(run()))
      if (f.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        for (const TbEvent& e : read_tb_events(f.path().string()))
          if (e.session_start) steps.push_back(e.step);
    return steps;
  }
  static constexpr const char* kEarlier =
      "{\"step\":1,\"loss\":2.5,\"lr\":0.001}\n"
      "{\"step\":2,\"loss\":2.25,\"lr\":0.001}\n"
      "{\"step\":2,\"val_loss\":2.375}\n"
      "a line of another writer\n"
      "{\"step\":3,\"loss\":2}\n"
      "{\"step\":4,\"loss\":1.75}\n"
      "{\"step\":4,\"val_loss\":1.875}\n"
      "{\"step\":5,\"loss\":1.5}\n"
      "{\"step\":5,\"val_loss\":1.625}\n"
      "{\"step\":5,\"eval_caption_accuracy\":0.5}\n";
};

TEST_F(RunFolder, ResumeDropsTheLinesOfTheStepsItRunsAgain) {
  earlier_attempt();
  {
    RunLog log(run(), true, "");
    log.start_after(3, false);  // resumed from a checkpoint of step 3
    log.scalars(4, {{"loss", 1.75}});
  }
  EXPECT_EQ(test::read_file(metrics()),
            "{\"step\":1,\"loss\":2.5,\"lr\":0.001}\n"
            "{\"step\":2,\"loss\":2.25,\"lr\":0.001}\n"
            "{\"step\":2,\"val_loss\":2.375}\n"
            "a line of another writer\n"
            "{\"step\":3,\"loss\":2}\n"
            "{\"step\":4,\"loss\":1.75}\n");
  EXPECT_EQ(session_starts(), std::vector<int64_t>{4});
  EXPECT_FALSE(std::filesystem::exists(run() + "/metrics.earlier.jsonl"));
}

TEST_F(RunFolder, ResumeAtTheLastStepDropsItsFinalValidationOnly) {
  earlier_attempt();
  {
    RunLog log(run(), true, "");
    log.start_after(5, true);  // no step left: the final validation and evaluation again
  }
  const std::string e = kEarlier;
  EXPECT_EQ(test::read_file(metrics()), e.substr(0, e.find("{\"step\":5,\"val_loss")));
  EXPECT_EQ(session_starts(), std::vector<int64_t>{6});
}

// The tags of the scalars at `step` in the run folder's event files.
std::vector<std::string> tb_tags_at(const std::string& dir, int64_t step) {
  std::vector<std::string> tags;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      for (const TbEvent& e : read_tb_events(f.path().string()))
        for (const auto& v : e.values)
          if (e.step == step) tags.push_back(v.tag);
  return tags;
}

// The final validation and evaluation again (a finished run started once more): their
// lines replace the dropped ones, and the event file, which got them with the dropped
// lines, gets no second point; an attempt stopped before them gets them in both.
TEST_F(RunFolder, FinalValidationAgainIsOnePointInTensorBoard) {
  for (bool earlier_had_it : {true, false}) {
    SCOPED_TRACE(earlier_had_it ? "the final validation ran before" : "stopped before the final validation");
    std::filesystem::remove_all(run());
    std::filesystem::create_directories(run());
    const std::string e = kEarlier;
    test::write_file(metrics(), earlier_had_it ? e : e.substr(0, e.find("{\"step\":5,\"val_loss")));
    {
      RunLog log(run(), true, "");
      log.start_after(5, true);
      log.scalars(5, {{"loss", 1.625}}, "val");
      log.image("relevance/0", 5, std::vector<uint8_t>(2 * 2 * 3, 7), 2, 2);
      log.scalars(5, {{"caption_accuracy", 0.5}}, "eval");
    }
    EXPECT_EQ(test::read_file(metrics()), e);
    const std::vector<std::string> tags = tb_tags_at(run(), 5);
    if (earlier_had_it)
      EXPECT_TRUE(tags.empty()) << tags.size() << " entries, the first " << tags.front();
    else
      EXPECT_EQ(tags, (std::vector<std::string>{"val/loss", "relevance/0", "eval/caption_accuracy"}));
  }
}

TEST_F(RunFolder, ResumeWithNothingToDropLeavesTheFileAlone) {
  std::filesystem::create_directories(run());
  test::write_file(metrics(), kEarlier);
  const auto links = [&] { return std::filesystem::hard_link_count(metrics()); };
  std::filesystem::create_hard_link(metrics(), run() + "/link");  // a rewrite would break the link
  {
    RunLog log(run(), true, "");
    log.start_after(5, false);  // a stop after step 5 (train.stop_after), resumed further
  }
  EXPECT_EQ(links(), 2u);
  EXPECT_EQ(test::read_file(metrics()), kEarlier);
}

TEST_F(RunFolder, FreshStartMovesAnEarlierRunsLinesAside) {
  earlier_attempt();
  const std::string before = test::read_file(metrics());
  {
    RunLog log(run(), true, "");
    log.start_after(0, false);
    log.scalars(1, {{"loss", 3.0}});
  }
  EXPECT_EQ(test::read_file(run() + "/metrics.earlier.jsonl"), before);
  EXPECT_EQ(test::read_file(metrics()), "{\"step\":1,\"loss\":3}\n");
  EXPECT_EQ(session_starts(), std::vector<int64_t>{1});
}

TEST_F(RunFolder, OtherRanksWriteNothing) {
  RunLog log(run(), false, "");
  log.start_after(3, false);
  log.scalars(4, {{"loss", 1.0}});
  EXPECT_FALSE(std::filesystem::exists(run()));
}

}  // namespace

}  // namespace vlm
