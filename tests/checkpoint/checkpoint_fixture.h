// The fixture of the checkpoint tests that run the binary (test_checkpoint.cpp,
// test_checkpoint_bad.cpp): a Fashion-MNIST subset, configs/tiny.cfg runs of 6 steps with
// a checkpoint every 3, and the reference run saved at (tp, dp) = (2, 2) with ZeRO-1
// (made once per suite), its step 3 also consolidated into one HDF5 file.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/shard_format.h"
#include "tests/support/cli.h"

namespace vlm::test {

namespace fs = std::filesystem;

// [32, 32], rows split over TP
inline constexpr const char* kQproj = "model/llm/model.layers.0.self_attn.q_proj.weight";

class Checkpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("checkpoint");
    const FashionSubset f = fashion_subset(vlm(), dir_);
    data_ = f.data, tok_ = f.tokenizer;
  }
  static std::string train(const std::string& run, const std::string& extra) {
    return vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run " + run +
           " --train.steps 6 --train.save_every 3 " + extra;
  }
  static std::vector<double> losses(const std::string& run) {
    return jsonl_values(dir_ + "/runs/" + run + "/metrics.jsonl", "loss");
  }
  static std::string ckpt_dir(const std::string& run) { return dir_ + "/runs/" + run + "/checkpoints"; }
  static std::string ckpt(const std::string& run, int step) { return ckpt_dir(run) + "/step_" + std::to_string(step); }
  static CheckpointIndex index(const std::string& folder) {
    return parse_index(read_file(folder + "/" + kIndexName), folder + "/" + kIndexName);
  }
  // The (2, 2) ZeRO-1 reference run and ref3.h5, its step 3 as one file.
  static void reference() {
    if (fs::exists(ref_h5())) return;
    const CommandResult r = run_command(mpirun(4) + train("ref", "--tp 2 --train.batch 4 --train.zero 1"), dir_);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const CommandResult c = run_command(vlm() + " checkpoint consolidate --checkpoint " + ckpt("ref", 3) + " --out " +
                                            ref_h5(), dir_);
    ASSERT_EQ(c.status, 0) << c.out << c.err;
  }
  static std::string ref_h5() { return dir_ + "/ref3.h5"; }
  static inline std::string dir_, data_, tok_;
};

}  // namespace vlm::test
