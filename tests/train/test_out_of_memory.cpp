// An allocation of a planned arena that fails (core/out_of_memory.h; docs/errors.md,
// "Out of memory"), injected with VLM_FAULT_ARENA_ALLOC into `vlm train` on a Fashion-MNIST
// subset with configs/tiny.cfg:
//  - under mpirun with dp = 2, on rank 1 only (mpirun's two-program form gives only that
//    rank the variable): exit status 2, one line naming rank 1, the arena (its name and
//    first tensor), the bytes asked, the bytes that rank held, and what `vlm plan`
//    predicts for this rank of this layout, whose exact total must be the one `vlm plan`
//    prints for the same options; rank 0, which went on into the run, ends too (no hang);
//  - on one rank, an injected failure of the first arena gives the same line for rank 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;

class OutOfMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("out_of_memory");
    const test::FashionSubset f = test::fashion_subset(vlm(), dir_, 64);
    data_ = f.data, tok_ = f.tokenizer;
  }
  // The options of the run: configs/tiny.cfg on the subset, 2 steps of 4 images per rank.
  static std::string options() {
    return " --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.steps 2 --train.batch 4" +
           " --train.save_every -1";
  }
  // The exact bytes `vlm plan` prints for TP rank 0 of tp = 1 on `gpus` GPUs.
  static std::string planned_total(int gpus) {
    const test::CommandResult p =
        test::run_command(vlm() + " plan" + options() + " --plan.gpus_per_node " + std::to_string(gpus), dir_);
    EXPECT_EQ(p.status, 0) << p.err;
    std::smatch m;  // "  0       |  ... |   1.2 MiB | 1234567"
    EXPECT_TRUE(std::regex_search(p.out, m, std::regex("\n  0 +\\|[^\n]*\\| ([0-9]+)\n"))) << p.out;
    return m.size() > 1 ? m[1].str() : "?";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static inline std::string dir_, data_, tok_;
};

TEST_F(OutOfMemory, OneRankOfTwoNamesItselfTheArenaAndThePlanAndBothEnd) {
  const std::string total = planned_total(2);
  const std::string cmd = "timeout -k 10 300 " + mpirun(1) + vlm() + " train" +
                          options() + " --train.run two : -n 1 env VLM_FAULT_ARENA_ALLOC=3 " + vlm() + " train" +
                          options() + " --train.run two";
  const test::CommandResult r = test::run_command(cmd, dir_);
  ASSERT_NE(r.status, 124) << "a rank hung";
  test::expect_one_error_line(r, "vlm train", "vlm train: error: rank 1 (tp rank 0, dp rank 1): arena '");
  for (const std::string& part :
       {std::string(" tensors, first '"), std::string("'): out of memory on cpu: needs "),
        std::string(", injected: VLM_FAULT_ARENA_ALLOC while building the model, with "),
        std::string(" allocated on this rank; `vlm plan` predicts "),
        std::string(" for this rank of tp=1 dp=2 zero=0 (parameters "), "total " + total + " B)"})
    EXPECT_NE(r.err.find(part), std::string::npos) << "'" << part << "' not in: " << r.err;
}

TEST_F(OutOfMemory, OneRank) {
  const std::string total = planned_total(1);
  const test::CommandResult r =
      test::run_command("VLM_FAULT_ARENA_ALLOC=1 timeout -k 10 300 " + vlm() + " train" + options() + " --train.run one", dir_);
  test::expect_one_error_line(r, "vlm train", "vlm train: error: rank 0 (tp rank 0, dp rank 0): arena '");
  EXPECT_NE(r.err.find(" allocated on this rank; `vlm plan` predicts "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for this rank of tp=1 dp=1 zero=0 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("total " + total + " B)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlm
