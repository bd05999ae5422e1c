// `vlm eval` and `vlm export` as a user runs them, on the checkpoint of a real tiny
// training run (configs/tiny.cfg, 300 steps on a Fashion-MNIST subset, captions of up to
// 48 tokens, so that greedy captions are partly right and the accuracies are not 0):
//  - eval on the test split at (tp, dp) = (1,1), (2,1), (1,2) with a smaller batch, and
//    (2,2) under mpirun: the same loss (1e-5 relative), perplexity, sample and token
//    counts, and exactly the same exact-match and class-accuracy counts (metrics.json);
//  - eval on the validation split with --images = train.eval_batches x train.batch gives
//    the validation loss the training run logged for its final step (metrics.jsonl, the
//    same weights as the final checkpoint, the same samples: LoaderOptions::limit) to 1e-5;
//  - --images N evaluates N samples at every layout;
//  - export at TP = 2 under mpirun writes byte for byte the files of the TP = 1 export;
//  - bad inputs of both commands exit 2 with one line naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "base/json.h"
#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;
using Result = test::CommandResult;

class EvalCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("eval_cli");
    const test::FashionSubset fm = test::fashion_subset(vlm(), dir_);
    data_ = fm.data, tok_ = fm.tokenizer;
    const std::string train = vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg" +
                              " --data.path " + data_ + " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ +
                              "/runs --train.run r --train.steps 300 --train.max_text 48 --train.eval_batches 2" +
                              " --train.log_every 100 --train.ckpt_dir " + dir_ + "/ckpt";
    const Result r = test::run_command(train, dir_);
    ASSERT_EQ(r.status, 0) << train << "\n" << r.out << r.err;
  }
  static std::string eval(const std::string& extra) {
    return vlm() + " eval --checkpoint " + dir_ + "/ckpt --data " + data_ + " " + extra;
  }
  // Runs `cmd` (which writes --out <dir>/<name>.json) and returns the JSON.
  static json::Value figures(const std::string& cmd, const std::string& name) {
    const Result r = test::run_command(cmd + " --out " + dir_ + "/" + name + ".json", dir_);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out << r.err;
    return json::parse(test::read_file(dir_ + "/" + name + ".json"), name);
  }
  static inline std::string dir_, data_, tok_;
};

TEST_F(EvalCli, EveryLayoutGivesTheSameFigures) {
  const json::Value ref = figures(eval("--split test"), "e11");
  EXPECT_EQ(ref.at("step").as_int(), 300);
  EXPECT_GT(ref.at("samples").as_int(), 40);
  EXPECT_GT(ref.at("class_correct").as_int(), 0) << "the model decodes no caption of the right class";
  EXPECT_LT(ref.at("loss").as_double(), 1.0);
  EXPECT_NEAR(ref.at("perplexity").as_double(), std::exp(ref.at("loss").as_double()), 1e-12);
  for (const auto& [name, cmd] : std::vector<std::pair<std::string, std::string>>{
           {"e21", mpirun(2) + eval("--split test --tp 2")},
           {"e12", mpirun(2) + eval("--split test --batch 3")},
           {"e22", mpirun(4) + eval("--split test --tp 2")}}) {
    const json::Value v = figures(cmd, name);
    EXPECT_LE(std::fabs(v.at("loss").as_double() / ref.at("loss").as_double() - 1), 1e-5) << name;
    for (const char* key : {"samples", "tokens", "exact_matches", "class_correct", "step"})
      EXPECT_EQ(v.at(key).as_int(), ref.at(key).as_int()) << name << " " << key;
  }
}

TEST_F(EvalCli, ValidationLossEqualsTheTrainingLog) {
  const std::vector<double> val = test::jsonl_values(dir_ + "/runs/r/metrics.jsonl", "val_loss");
  ASSERT_FALSE(val.empty());
  const double logged = val.back();  // after the last step, with the final checkpoint's weights
  // train.eval_batches (2) x train.batch (8) x dp (1) samples of the val split (17 images).
  const json::Value v = figures(eval("--split val --images 16"), "val");
  EXPECT_EQ(v.at("samples").as_int(), 16);
  EXPECT_LE(std::fabs(v.at("loss").as_double() / logged - 1), 1e-5) << v.at("loss").as_double() << " vs " << logged;
  // The same subset at another layout and batch.
  const json::Value w = figures(mpirun(2) + eval("--split val --images 16 --batch 5"), "val12");
  EXPECT_EQ(w.at("samples").as_int(), 16);
  EXPECT_LE(std::fabs(w.at("loss").as_double() / logged - 1), 1e-5);
  // The whole val split differs (one more sample).
  const json::Value all = figures(eval("--split val"), "val_all");
  EXPECT_EQ(all.at("samples").as_int(), 17);
}

TEST_F(EvalCli, ExportAtTp2WritesTheSameFiles) {
  const std::string a = dir_ + "/hf_tp1", b = dir_ + "/hf_tp2";
  Result r = test::run_command(vlm() + " export --checkpoint " + dir_ + "/ckpt --out " + a, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  r = test::run_command(mpirun(2) + vlm() + " export --tp 2 --checkpoint " + dir_ + "/ckpt --out " + b, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = std::filesystem::relative(e.path(), a).string();
    EXPECT_EQ(test::read_file(e.path().string()), test::read_file(b + "/" + rel)) << rel;
    ++files;
  }
  EXPECT_EQ(files, 9);  // llm: 5, vision: 3, vlm_extra.safetensors
}

void expect_refused(const Result& r, const std::string& cmd, const std::string& what) {
  test::expect_one_error_line(r, "vlm " + cmd, what);
}

TEST_F(EvalCli, BadInputsExitWithOneLine) {
  auto run = [&](const std::string& c) { return test::run_command(c, dir_); };
  const std::string ck = " --checkpoint " + dir_ + "/ckpt";
  expect_refused(run(vlm() + " eval --data " + data_), "eval", "--checkpoint");
  expect_refused(run(vlm() + " eval" + ck), "eval", "--data");
  expect_refused(run(vlm() + " eval --data " + data_ + " --checkpoint " + dir_ + "/missing"), "eval",
                 dir_ + "/missing");
  expect_refused(run(vlm() + " eval --data " + data_ + " --checkpoint " + data_), "eval", data_);
  expect_refused(run(vlm() + " eval" + ck + " --data " + dir_ + "/nope.h5"), "eval", dir_ + "/nope.h5");
  expect_refused(run(vlm() + " eval" + ck + " --data " + data_ + " --split dev"), "eval", "--split: 'dev' is not one of");
  expect_refused(run(vlm() + " eval" + ck + " --data " + data_ + " --out " + dir_), "eval", dir_);
  expect_refused(run(vlm() + " eval" + ck + " --data " + data_ + " --images 1000000"), "eval",
                 "--images 1000000: split 'test' of " + data_ + " has ");
  // A model for --batch images that does not fit (the first arena's allocation fails,
  // injected): named by the option.
  expect_refused(run("VLM_FAULT_ARENA_ALLOC=1 " + vlm() + " eval" + ck + " --data " + data_ + " --batch 3"), "eval",
                 "--batch 3: the model for 3 images per forward does not fit (arena '");
  expect_refused(run(mpirun(2) + eval("--tp 2 --data " + dir_ + "/nope.h5")), "eval", dir_ + "/nope.h5");
  expect_refused(run(vlm() + " export --out " + dir_ + "/x"), "export", "--checkpoint");
  expect_refused(run(vlm() + " export" + ck), "export", "--out");
  expect_refused(run(vlm() + " export" + ck + " --out " + data_), "export", "is not a folder");
  expect_refused(run(mpirun(2) + vlm() + " export" + ck + " --out " + dir_ + "/x"), "export", "one TP group");
  {  // something in the way of the export's files: refused before any file moves in
    namespace fs = std::filesystem;
    const std::string a = dir_ + "/blocked_a", b = dir_ + "/blocked_b";
    fs::create_directories(a), fs::create_directories(b + "/vlm_extra.safetensors");
    test::write_file(a + "/vision", "a file where the export puts a folder\n");
    expect_refused(run(vlm() + " export" + ck + " --out " + a), "export", a + "/vision: exists and is not a folder");
    expect_refused(run(vlm() + " export" + ck + " --out " + b), "export", b + "/vlm_extra.safetensors: is a folder");
    for (const std::string& d : {a, b}) {  // only the obstacle there, and no staging left
      EXPECT_EQ(std::distance(fs::recursive_directory_iterator(d), fs::recursive_directory_iterator()), 1) << d;
      EXPECT_FALSE(fs::exists(dir_ + "/." + fs::path(d).filename().string() + ".partial")) << d;
    }
  }
  {  // a gpt2 backbone has no Hugging Face export
    const Result r = run(vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " +
                         data_ + " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ +
                         "/runs --train.run g --train.steps 1 --model.family gpt2 --model.n_kv_heads 0 " +
                         "--train.ckpt_dir " + dir_ + "/ckpt_gpt2");
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    expect_refused(run(vlm() + " export --checkpoint " + dir_ + "/ckpt_gpt2 --out " + dir_ + "/x"), "export",
                   "model.family=gpt2");
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/x"));
  }
}

}  // namespace
}  // namespace vlm
