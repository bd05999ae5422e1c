// `vlm train` as a user runs it, on a real Fashion-MNIST subset built by `vlm data build`
// (the dataset-fashion-mnist package) with configs/tiny.cfg:
//  - 20 steps at (tp, dp) = (1,1), (2,1), (1,2), (2,2), (4,2) under mpirun, (1,1) with 2
//    micro-batches, and (1,2), (2,2) with ZeRO-1, all with the global batch of 8: the loss
//    of every step equals the (1,1) run's to 1e-5 relative (metrics.jsonl);
//  - serial and overlap scheduling give bitwise the same losses at (1,2) and (2,2);
//  - the TensorBoard event file reads back (our CRC-checked reader) with the losses of
//    metrics.jsonl, the validation loss and the relevance images;
//  - with train.peak_tflops the MFU (train/mfu.h) of every step is the model FLOPs at the
//    step's real shape over its time and the peak, in metrics.jsonl and on the progress
//    line; without it on the CPU there is none;
//  - data.curriculum: its steps train on the batches of the curriculum file alone, the
//    later ones on data.path's, and a resume inside, at the end of or after it is exact;
// The fixture: train_cli.h; the refusals: test_train_cli_refusals.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "model/work.h"
#include "runlog/tb_events.h"
#include "tests/support/cli.h"
#include "tests/train/train_cli.h"
#include "train/train_options.h"

namespace vlm {
namespace {

using Result = test::CommandResult;
using test::mpirun, test::TrainCli, test::vlm;

TEST_F(TrainCli, EveryLayoutGivesTheSameLosses) {
  struct Case {
    std::string run, cmd;
  };
  const std::vector<Case> cases = {
      {"l11", train("l11", "--train.batch 8")},
      {"l11m2", train("l11m2", "--train.batch 4 --train.micro_batches 2 --train.global_batch 8")},
      {"l21", mpirun(2) + train("l21", "--tp 2 --train.batch 8")},
      {"l12", mpirun(2) + train("l12", "--tp 1 --train.batch 4 --train.global_batch 8")},
      {"l22", mpirun(4) + train("l22", "--tp 2 --train.batch 4")},
      {"l42", mpirun(8) + train("l42", "--tp 4 --train.batch 4 --train.global_batch 8")},
      {"l12z", mpirun(2) + train("l12z", "--tp 1 --train.batch 4 --train.zero 1")},
      {"l22z", mpirun(4) + train("l22z", "--tp 2 --train.batch 4 --train.zero 1")},
  };
  std::vector<double> ref;
  for (const Case& c : cases) {
    const Result r = test::run_command(c.cmd, dir_);
    ASSERT_EQ(r.status, 0) << c.cmd << "\n" << r.out << r.err;
    const std::vector<double> l = losses(c.run);
    ASSERT_EQ(l.size(), 20u) << c.run;
    if (ref.empty()) ref = l;
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_LE(std::fabs(l[i] - ref[i]) / std::fabs(ref[i]), 1e-5) << c.run << " step " << i + 1 << ": " << l[i]
                                                                    << " vs " << ref[i];
  }
  EXPECT_LT(ref.back(), ref.front()) << "the tiny model did not learn in 20 steps";
}

TEST_F(TrainCli, SerialAndOverlapGiveBitwiseEqualLosses) {
  for (const auto& [n, tp] : {std::pair{2, 1}, std::pair{4, 2}}) {
    const std::string layout = "tp" + std::to_string(tp) + "n" + std::to_string(n);
    std::vector<double> l[2];
    for (int k = 0; k < 2; ++k) {
      const std::string run = layout + (k ? "_serial" : "_overlap");
      const Result r = test::run_command(mpirun(n) + train(run, "--tp " + std::to_string(tp) + " --train.batch 4 --train.steps 5 " +
                                                    (k ? "--scheduler.mode serial" : "--scheduler.mode overlap")),
                          dir_);
      ASSERT_EQ(r.status, 0) << r.out << r.err;
      l[k] = losses(run);
    }
    ASSERT_EQ(l[0].size(), 5u);
    EXPECT_EQ(l[0], l[1]) << layout;
  }
}

// The TensorBoard file of a run, read back with our reader (CRC-checked): the scalars
// equal metrics.jsonl's (as floats), the validation loss and the relevance images are there.
TEST_F(TrainCli, TensorBoardFilesReadBack) {
  const Result r = test::run_command(
      train("tb", "--train.steps 4 --train.eval_every 2 --eval.pictures 2 --train.peak_tflops 0.01"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/runs/tb"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) file = e.path().string();
  ASSERT_FALSE(file.empty());
  std::map<std::string, std::vector<std::pair<int64_t, float>>> scalars;
  std::map<std::string, int> images;
  for (const TbEvent& e : read_tb_events(file))
    for (const TbValue& v : e.values) {
      if (v.kind == TbValue::Kind::kScalar) scalars[v.tag].push_back({e.step, v.simple_value});
      if (v.kind == TbValue::Kind::kImage) {
        ++images[v.tag];
        EXPECT_EQ(v.image_height, 256);  // 16 px images drawn 16 times larger
        EXPECT_EQ(v.image_png.substr(1, 3), "PNG");
      }
    }
  const std::vector<double> jl = losses("tb");
  ASSERT_EQ(scalars["train/loss"].size(), jl.size());
  for (size_t i = 0; i < jl.size(); ++i) {
    EXPECT_EQ(scalars["train/loss"][i].first, int64_t(i + 1));
    EXPECT_EQ(scalars["train/loss"][i].second, float(jl[i]));
  }
  for (const char* tag : {"train/lr", "train/grad_norm", "train/images_per_s", "train/tokens_per_s",
                          "train/visual_tokens_per_image", "train/mfu", "train/balancer_participatory"})
    EXPECT_EQ(scalars[tag].size(), 4u) << tag;
  EXPECT_EQ(scalars["val/loss"].size(), 2u);  // at step 2 and at the end
  EXPECT_EQ(images["relevance/0"], 2);
  EXPECT_EQ(images["relevance/1"], 2);
}

// MFU on the CPU, where only train.peak_tflops gives a peak. The shape of each step is
// read back from its metrics.jsonl line (one rank, one micro-batch of train.batch images):
// visual tokens = visual_tokens_per_image x images, caption tokens = tokens_per_s x
// step_ms - visual tokens, text per sample = BOS + data.prompt's tokens (the subset's
// samples have no prompt of their own) + its captions' mean. "mfu" must equal step_work's
// model FLOPs at that shape / step_ms / peak to double rounding (1e-9), and would not at
// the largest shape; the printed "MFU x%" must agree with the printed "N ms/step" to
// their precision: |x - e| <= 0.05 + e * 0.5 / (N - 0.5), e computed from N.
TEST_F(TrainCli, MfuOfTheRealShape) {
  const double peak = 0.01;  // TFLOP/s: the tiny model's MFU on one CPU core is then tens of %
  const Result r =
      test::run_command(train("mfu", "--train.steps 6 --train.log_every 1 --train.peak_tflops 0.01"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  Config cfg;
  register_all_train_options(cfg);
  cfg.read_ini(std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg");  // the model's options (the rest: data, steps)
  const TrainOptions t = read_train_options(cfg);
  const Tokenizer tok = Tokenizer::load(tok_);
  const VlmConfig v = resolve_vlm_config(cfg, t, tok, 1);
  const double prompt = 1.0 + double(text_rule(read_data_options(cfg), t, tok).instruction.size());
  const std::string m = dir_ + "/runs/mfu/metrics.jsonl";
  const std::vector<double> ms = test::jsonl_values(m, "step_ms"), tps = test::jsonl_values(m, "tokens_per_s"),
                            vpi = test::jsonl_values(m, "visual_tokens_per_image"), mfu = test::jsonl_values(m, "mfu");
  ASSERT_EQ(mfu.size(), 6u);
  ASSERT_EQ(ms.size(), 6u);
  const double largest = model_work(v, 1, largest_step(v, 1)).model_flops;
  std::vector<double> flops;
  bool below_largest = false;
  for (size_t i = 0; i < mfu.size(); ++i) {
    StepShape s;
    s.images = t.batch, s.micro_batches = 1, s.prompt = prompt;
    s.visual = vpi[i];
    const double visual = vpi[i] * double(t.batch), captions = std::round(tps[i] * ms[i] / 1e3 - visual);
    s.text = prompt + captions / double(t.batch);
    ASSERT_LE(s.text, double(t.max_text)) << "step " << i + 1;
    flops.push_back(model_work(v, 1, s).model_flops);
    EXPECT_NEAR(mfu[i] / (flops[i] / (ms[i] / 1e3) / (peak * 1e12)), 1.0, 1e-9) << "step " << i + 1;
    below_largest = below_largest || flops[i] < largest * (1 - 1e-3);
  }
  EXPECT_TRUE(below_largest) << "every step at the largest shape: the test would not tell the shapes apart";
  const std::regex line(R"(^step (\d+)/6 \|.* \| (\d+) ms/step \|.* \| MFU ([0-9.]+)%$)");
  std::istringstream out(r.out);
  int printed = 0;
  for (std::string s; std::getline(out, s);) {
    std::smatch g;
    if (!std::regex_match(s, g, line)) continue;
    const size_t i = size_t(std::stoi(g[1])) - 1;
    const double n = std::stod(g[2]), x = std::stod(g[3]);
    ASSERT_LT(i, flops.size());
    ASSERT_GE(n, 1.0) << s;
    const double e = 100.0 * flops[i] / (n / 1e3) / (peak * 1e12);
    EXPECT_LE(std::fabs(x - e), 0.05 + e * 0.5 / (n - 0.5) + 1e-9) << s;
    ++printed;
  }
  EXPECT_EQ(printed, 6) << r.out;

  const Result off = test::run_command(train("nomfu", "--train.steps 2 --train.log_every 1"), dir_);
  ASSERT_EQ(off.status, 0) << off.out << off.err;
  EXPECT_EQ(off.out.find("MFU"), std::string::npos) << off.out;
  EXPECT_TRUE(test::jsonl_values(dir_ + "/runs/nomfu/metrics.jsonl", "mfu").empty());
}

// data.curriculum: its steps are the batches a run on the curriculum file alone trains on
// (bitwise the same losses), the later ones are not; a checkpoint inside the curriculum,
// at its last step or after it resumes bitwise to the uninterrupted run.
TEST_F(TrainCli, CurriculumReadsItsFileFirstAndResumesExactly) {
  const std::string easy_dir = dir_ + "/curriculum";
  std::filesystem::create_directories(easy_dir);
  const test::FashionSubset easy = test::fashion_subset(vlm(), easy_dir, 200);
  const std::string steps = "--train.steps 6 --eval.split '' ";
  const std::string cur = steps + "--data.curriculum " + easy.data + " --data.curriculum_steps 3";
  const Result r = test::run_command(train("cur", cur + " --train.save_every 1 --train.keep_last 0"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("curriculum: steps 1..3 read " + easy.data + ", then " + data_), std::string::npos) << r.out;
  const Result e = test::run_command(train("easy", steps + "--data.path " + easy.data), dir_);
  ASSERT_EQ(e.status, 0) << e.out << e.err;
  const std::vector<double> ref = losses("cur"), alone = losses("easy");
  ASSERT_EQ(ref.size(), 6u);
  ASSERT_EQ(alone.size(), 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ref[i], alone[i]) << "step " << i + 1;
  int differ = 0;
  for (size_t i = 3; i < 6; ++i) differ += ref[i] != alone[i];
  EXPECT_EQ(differ, 3) << "steps 4..6 read data.path";
  for (int k : {2, 3, 4}) {
    const std::string run = "cur_from" + std::to_string(k);
    const std::string from = dir_ + "/runs/cur/checkpoints/step_" + std::to_string(k);
    const Result c = test::run_command(train(run, cur + " --train.resume " + from), dir_);
    ASSERT_EQ(c.status, 0) << c.out << c.err;
    const std::vector<double> l = losses(run);
    ASSERT_EQ(l.size(), size_t(6 - k)) << run;
    for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(l[i], ref[size_t(k) + i]) << run << " step " << k + 1 + int(i);
  }
}

}  // namespace
}  // namespace vlm
