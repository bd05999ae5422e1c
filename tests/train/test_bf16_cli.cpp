// `vlm train --train.precision bf16` as a user runs it, on the Fashion-MNIST subset of
// tests/support (the dataset-fashion-mnist package) with configs/tiny.cfg:
//  - 50 steps in bf16 stay within 2% of the fp32 run's loss at every step (docs/training.md,
//    "Numerics" has the figures of the demo config);
//  - bf16 at TP=2 (bf16 activations on the wire) and at DP=2 with bf16 gradient buckets
//    (train.grad_reduce_dtype=bf16) stay within 2% of the bf16 TP=1 run;
//  - the run reports the bf16 weight copies in its memory line;
//  - a bf16 run resumed from its checkpoint gives bitwise the losses of the
//    uninterrupted run, and `vlm eval` of its final checkpoint the validation loss it
//    logged (the bf16 copies are re-rounded from the loaded masters);
//  - a bad precision or gradient dtype exits 2 naming the option.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/json.h"
#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;
using Result = test::CommandResult;

class Bf16Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("bf16_cli");
    const test::FashionSubset f = test::fashion_subset(vlm(), dir_);
    data_ = f.data, tok_ = f.tokenizer;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string train(const std::string& run, const std::string& extra) {
    return vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run " + run + " " + extra;
  }
  static std::vector<double> losses(const std::string& run) {
    return test::jsonl_values(dir_ + "/runs/" + run + "/metrics.jsonl", "loss");
  }
  // Runs `cmd` (run name `run`) and returns its step losses; `out` gets its stdout.
  static std::vector<double> run_losses(const std::string& run, const std::string& cmd, std::string* out = nullptr) {
    const Result r = test::run_command(cmd, dir_);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out << r.err;
    if (out) *out = r.out;
    return losses(run);
  }
  static void expect_within(const std::vector<double>& got, const std::vector<double>& ref, double tol,
                            const std::string& what) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(got[i] - ref[i]) / std::fabs(ref[i]);
      worst = std::max(worst, d);
      EXPECT_LE(d, tol) << what << " step " << i + 1 << ": " << got[i] << " vs " << ref[i];
    }
    std::printf("%s: worst relative loss difference %.4f over %zu steps\n", what.c_str(), worst, got.size());
  }
  static inline std::string dir_, data_, tok_;
};

TEST_F(Bf16Cli, FiftyStepsStayWithinTwoPercentOfFp32) {
  const std::string steps = " --train.steps 50 --train.save_every -1";
  const std::vector<double> f32 = run_losses("fp32", train("fp32", "--train.precision fp32" + steps));
  std::string out;
  const std::vector<double> b16 = run_losses("bf16", train("bf16", "--train.precision bf16" + steps), &out);
  ASSERT_EQ(f32.size(), 50u);
  expect_within(b16, f32, 0.02, "bf16 vs fp32");
  EXPECT_NE(b16, f32) << "bf16 gave the fp32 losses bitwise: the mixed precision did not run";
  EXPECT_LT(b16.back(), 0.8 * b16.front()) << "the bf16 run did not learn";
  EXPECT_NE(out.find("precision bf16"), std::string::npos) << out;
  EXPECT_EQ(out.find("bf16 weight copies 0 B"), std::string::npos) << "no bf16 copies reported:\n" << out;
}

TEST_F(Bf16Cli, TensorAndDataParallelBf16MatchOneRank) {
  const std::string opts = " --train.precision bf16 --train.save_every -1";
  const std::vector<double> ref = run_losses("r11", train("r11", "--train.batch 8" + opts));
  const std::vector<double> tp2 = run_losses("r21", mpirun(2) + train("r21", "--tp 2 --train.batch 8" + opts));
  const std::vector<double> dp2 = run_losses(
      "r12", mpirun(2) + train("r12", "--tp 1 --train.batch 4 --train.global_batch 8 --train.grad_reduce_dtype bf16" +
                                          opts));
  ASSERT_EQ(ref.size(), 20u);
  expect_within(tp2, ref, 0.02, "bf16 tp=2 vs tp=1");
  expect_within(dp2, ref, 0.02, "bf16 dp=2 (bf16 gradient buckets) vs dp=1");
}

TEST_F(Bf16Cli, ResumeAndEvalOfABf16Checkpoint) {
  const std::string opts = " --train.precision bf16 --train.steps 6 --train.save_every 3 --train.eval_batches 2";
  const std::vector<double> full = run_losses("full", train("full", opts));
  const std::string cdir = dir_ + "/runs/full/checkpoints";
  const std::vector<double> resumed =
      run_losses("resumed", train("resumed", opts + " --train.resume " + cdir + "/step_3"));
  ASSERT_EQ(full.size(), 6u);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed[i], full[3 + i]) << "step " << 4 + i;
  // The validation loss of the final weights: train.eval_batches (2) x train.batch (8).
  const std::vector<double> val = test::jsonl_values(dir_ + "/runs/full/metrics.jsonl", "val_loss");
  ASSERT_FALSE(val.empty());
  const std::string out = dir_ + "/eval.json";
  const Result r = test::run_command(vlm() + " eval --checkpoint " + cdir + " --data " + data_ +
                                         " --split val --images 16 --out " + out, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const double loss = json::parse(test::read_file(out), out).at("loss").as_double();
  EXPECT_LE(std::fabs(loss / val.back() - 1), 1e-5) << loss << " vs " << val.back();
}

TEST_F(Bf16Cli, BadPrecisionIsOneLine) {
  for (const std::string opt : {"--train.precision fp16", "--train.grad_reduce_dtype int8"}) {
    const Result r = test::run_command(train("bad", opt), dir_);
    test::expect_one_error_line(r, "vlm train", opt.substr(2, opt.find(' ') - 2));
  }
}

}  // namespace
}  // namespace vlm
