// The fixture of the `vlm train` command tests (test_train_cli.cpp,
// test_train_cli_refusals.cpp): a Fashion-MNIST subset and its tokenizer built once per
// suite by `vlm data build` (tests/support/cli.h), and `vlm train` command lines on it
// with configs/tiny.cfg.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/cli.h"

namespace vlm::test {

class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("train_cli");
    const FashionSubset f = fashion_subset(vlm(), dir_);
    data_ = f.data, tok_ = f.tokenizer;
  }
  // `vlm train` with configs/tiny.cfg on the subset; run name `run`.
  static std::string train(const std::string& run, const std::string& extra) {
    return vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run " + run + " " + extra;
  }
  // The "loss" of every step in runs/<run>/metrics.jsonl, as written (%.17g).
  static std::vector<double> losses(const std::string& run) {
    return jsonl_values(dir_ + "/runs/" + run + "/metrics.jsonl", "loss");
  }
  static inline std::string dir_, data_, tok_;
};

}  // namespace vlm::test
