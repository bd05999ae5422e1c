// `vlm train` refusing bad runs, as a user meets them (the fixture: train_cli.h): each
// exits 2 with one line naming the problem: a missing file, a curriculum without its
// steps (or the other way round) or one that leaves no step to data.path, a negative
// train.peak_tflops, a dataset without captions, a tokenizer larger than the model's
// vocabulary, an inconsistent train.global_batch, a TP size that does not divide the
// heads, a sample longer than model.max_pos; under mpirun, a file only rank 1 is given
// (a garbage dataset) is reported by rank 1 alone, and both ranks end with status 2. An
// instruction that train.max_text cuts is not refused but noted.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/storage/dataset_writer.h"
#include "tests/support/cli.h"
#include "tests/train/train_cli.h"

namespace vlm::test {
namespace {

using Result = CommandResult;

void expect_refused(const Result& r, const std::string& what) { expect_one_error_line(r, "vlm train", what); }

TEST_F(TrainCli, BadRunsExitWithOneLine) {
  expect_refused(run_command(train("bad", "--data.path " + dir_ + "/missing.h5"), dir_), dir_ + "/missing.h5");
  expect_refused(run_command(train("bad", "--train.peak_tflops=-1"), dir_),
                 "--train.peak_tflops: -1 is out of range");
  {  // a valid dataset with images but no caption
    const std::string p = dir_ + "/nocaptions.h5";
    DatasetWriter w = DatasetWriter::raw(p, 28, 28, 1);
    std::vector<uint8_t> px(28 * 28, 7);
    w.add_raw(px.data());
    w.add_raw(px.data());
    w.set_split("/splits/train", {0, 1});
    w.finish();
    expect_refused(run_command(train("bad", "--data.path " + p), dir_), "no captions");
  }
  expect_refused(run_command(train("bad", "--model.vocab_size 100"), dir_), "exceeds the model's (model.vocab_size=100)");
  expect_refused(run_command(train("bad", "--train.global_batch 7"), dir_), "--train.global_batch=7 must equal");
  expect_refused(run_command(mpirun(8) + train("bad", "--tp 8"), dir_), "n_heads");
  expect_refused(run_command(train("bad", "--train.freeze vision,eyes"), dir_), "--train.freeze: unknown module 'eyes'");
  expect_refused(run_command(train("bad", "--data.curriculum_steps 3"), dir_),
                 "--data.curriculum_steps: 3 with --data.curriculum '' (expected both set");
  expect_refused(run_command(train("bad", "--data.curriculum " + dir_ + "/missing.h5 --data.curriculum_steps 3"),
                                   dir_),
                 dir_ + "/missing.h5");
  expect_refused(run_command(train("bad", "--train.steps 4 --data.curriculum " + data_ + " --data.curriculum_steps 4"),
                                   dir_),
                 "--data.curriculum_steps: 4 leaves none of the run's 4 steps to " + data_);
  expect_refused(run_command(train("bad", "--train.steps 4 --train.stop_after 9"), dir_),
                 "--train.stop_after: step 9 is past the run's last step 4");
  // The longest sample (visual tokens + text) must fit model.max_pos, for llama as for gpt2.
  expect_refused(run_command(train("bad", "--model.max_pos 8"), dir_),
                 "lod.max_tokens + train.max_text = 34 exceeds model.max_pos=8");
}

// An instruction that train.max_text cuts trains (a planned shape: plan/ assumes prompts of
// max_text - 1 tokens), and the run says what is kept of it.
TEST_F(TrainCli, AnInstructionCutByTheTextBudgetIsNoted) {
  const Result r = run_command(train("cut", "--train.max_text 5 --train.steps 1"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" tokens leave little room in train.max_text=5: a sample without a prompt of its own keeps 3 "
                       "of them and at most 1 caption tokens (prompts of at most 2 tokens leave room for a word and "
                       "EOS)\n"),
            std::string::npos)
      << r.out;
  const Result fits = run_command(train("fits", "--train.steps 1"), dir_);
  ASSERT_EQ(fits.status, 0) << fits.out << fits.err;
  EXPECT_EQ(fits.out.find("leave little room"), std::string::npos) << fits.out;
}

TEST_F(TrainCli, ARankLocalBadFileEndsEveryRank) {
  const std::string garbage = dir_ + "/garbage.h5";
  write_file(garbage, "not an HDF5 file\n");
  // MPMD: one argument list per rank; rank 0's is valid.
  const std::string cmd = mpirun(1) + "--tag-output " + train("rank_bad", "") +
                          " : -n 1 " + train("rank_bad", "--data.path " + garbage);
  const Result r = run_command(cmd, dir_);
  EXPECT_EQ(r.status, 2) << r.err;
  size_t errors = 0;
  for (size_t at = r.err.find("error:"); at != std::string::npos; at = r.err.find("error:", at + 1)) ++errors;
  EXPECT_EQ(errors, 1u) << r.err;
  // Refused at the start: the ranks' options differ (parallel/runtime.h), and rank 1 names its file.
  EXPECT_NE(r.err.find(",1]<stderr>:vlm train: error: options differ between ranks: 'data.path = " + garbage),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace vlm::test
