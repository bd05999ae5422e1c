// Checkpoints of `vlm train` (checkpoint/checkpoint.h) through the binary and real mpirun, on
// a Fashion-MNIST subset with configs/tiny.cfg, 6 steps, a checkpoint every 3:
//  - a run saved at (tp, dp) = (2, 2) with ZeRO-1 and resumed from step 3 at (2, 2) gives
//    bitwise the losses of steps 4-6 of the uninterrupted run; resumed at (4, 1), (1, 1)
//    and (1, 2) with ZeRO-1 they agree to 1e-5 relative;
//  - a writer killed inside its second save (VLM_FAULT_CKPT_KILL) leaves step 3 as
//    `latest`, readable, with its temporary beside it; resume=auto continues from step 3
//    with bitwise the losses the killed run logged for steps 4-6;
//  - a run whose tower comes from vision.hf loads in `vlm eval` (options it left unset
//    stay unset when read back);
//  - train.keep_last keeps the newest files; the file's names and shapes are the full
//    logical ones whatever the layout (read back with the HDF5 C API);
//  - bad checkpoints (not HDF5, truncated, not a checkpoint, another version, a missing /
//    reshaped / extra / wrong-type tensor, flipped data bytes, a non-finite value, another
//    model configuration, a dangling `latest`, another global batch) exit 2 with one line
//    naming the file and, where one is at fault, the tensor; a checkpoint of huge finite
//    weights stops the resumed run at its first step with a non-finite loss.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/config.h"
#include "checkpoint/checkpoint.h"
#include "io/crc32c.h"
#include "io/h5_io.h"
#include "tests/support/cli.h"
#include "train/trained_model.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;
using Result = test::CommandResult;

std::string vlm() { return VLM_BINARY; }
std::string mpirun(int n) { return std::string(VLM_MPIEXEC) + " -n " + std::to_string(n) + " --oversubscribe "; }
const char* kTensor = "model/llm/model.layers.0.self_attn.q_proj.weight";  // [32, 32] split by rows over TP

// The datasets below `group` of an HDF5 file, recursively ("model/llm/...").
void list_tensors(hid_t f, const std::string& group, std::vector<std::string>& out) {
  H5Id g(H5Gopen2(f, group.c_str(), H5P_DEFAULT));
  for (const std::string& n : h5_list(g)) {
    const std::string path = group == "/" ? n : group + "/" + n;
    H5O_info_t info;
    H5Oget_info_by_name(f, path.c_str(), &info, H5P_DEFAULT);
    if (info.type == H5O_TYPE_GROUP) list_tensors(f, path, out);
    else if (path.find('/') != std::string::npos) out.push_back(path);
  }
}

class Checkpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("checkpoint");
    const test::FashionSubset f = test::fashion_subset(vlm(), dir_);
    data_ = f.data, tok_ = f.tokenizer;
  }
  static std::string train(const std::string& run, const std::string& extra) {
    return vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + data_ +
           " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run " + run +
           " --train.steps 6 --train.save_every 3 " + extra;
  }
  static std::vector<double> losses(const std::string& run) {
    return test::jsonl_values(dir_ + "/runs/" + run + "/metrics.jsonl", "loss");
  }
  static std::string ckpt(const std::string& run, int step) {
    return dir_ + "/runs/" + run + "/checkpoints/step_" + std::to_string(step) + ".h5";
  }
  // The (2, 2) ZeRO-1 reference run, made once.
  static void reference() {
    if (fs::exists(ckpt("ref", 3))) return;
    const Result r = test::run_command(mpirun(4) + train("ref", "--tp 2 --train.batch 4 --train.zero 1"), dir_);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
  }
  static inline std::string dir_, data_, tok_;
};

TEST_F(Checkpoint, ResumeIsExactAtTheSameLayoutAndCloseAtAnother) {
  reference();
  const std::vector<double> ref = losses("ref");
  ASSERT_EQ(ref.size(), 6u);
  struct Case {
    std::string run, cmd;
    bool bitwise;
  };
  const std::string from = " --train.resume " + ckpt("ref", 3);
  const std::vector<Case> cases = {
      {"r22", mpirun(4) + train("r22", "--tp 2 --train.batch 4 --train.zero 1" + from), true},
      {"r41", mpirun(4) + train("r41", "--tp 4 --train.batch 8" + from), false},
      {"r11", train("r11", "--train.batch 8" + from), false},
      {"r12", mpirun(2) + train("r12", "--tp 1 --train.batch 4 --train.zero 1" + from), false},
  };
  for (const Case& c : cases) {
    const Result r = test::run_command(c.cmd, dir_);
    ASSERT_EQ(r.status, 0) << c.cmd << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("resumed from " + ckpt("ref", 3) + ": step 3 of 6 (saved at tp=2 dp=2 zero=1)"),
              std::string::npos) << r.out;
    const std::vector<double> l = losses(c.run);
    ASSERT_EQ(l.size(), 3u) << c.run;
    for (size_t i = 0; i < 3; ++i) {
      if (c.bitwise) {
        EXPECT_EQ(l[i], ref[3 + i]) << c.run << " step " << 4 + i;
      }
      EXPECT_LE(std::fabs(l[i] - ref[3 + i]) / ref[3 + i], 1e-5) << c.run << " step " << 4 + i;
    }
  }
}

// ZeRO-3 (docs/training.md): the writer gathers the shards of the masters and moments
// (and the pooled layers, which no rank holds whole) into the same full logical tensors;
// resumed at (2, 2) with ZeRO-3 the losses are bitwise the uninterrupted run's, at (1, 2)
// with ZeRO-2 and at (4, 1) without ZeRO within 1e-5; the run's own evaluation after
// training (validation loss, caption accuracy) fetches the backbone's layers from the DP
// group and gives the figures the ZeRO-0 resume gives for the same final weights' run.
TEST_F(Checkpoint, ZeroThreeSavesFullTensorsAndResumesAtAnyLayout) {
  const std::string base = "--train.batch 4 --train.micro_batches 1 ";
  const Result r = test::run_command(mpirun(4) + train("z3", "--tp 2 --train.zero 3 " + base), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<double> ref = losses("z3");
  ASSERT_EQ(ref.size(), 6u);
  const std::string from = " --train.resume " + ckpt("z3", 3);
  struct Case {
    std::string run, cmd;
    bool bitwise;
  };
  const std::vector<Case> cases = {
      {"z3r22", mpirun(4) + train("z3r22", "--tp 2 --train.zero 3 " + base + from), true},
      {"z3r12", mpirun(2) + train("z3r12", "--tp 1 --train.zero 2 " + base + from), false},
      {"z3r41", mpirun(4) + train("z3r41", "--tp 4 --train.batch 8" + from), false},
  };
  for (const Case& c : cases) {
    const Result x = test::run_command(c.cmd, dir_);
    ASSERT_EQ(x.status, 0) << c.cmd << "\n" << x.out << x.err;
    EXPECT_NE(x.out.find("(saved at tp=2 dp=2 zero=3)"), std::string::npos) << x.out;
    const std::vector<double> l = losses(c.run);
    ASSERT_EQ(l.size(), 3u) << c.run;
    for (size_t i = 0; i < 3; ++i) {
      if (c.bitwise) EXPECT_EQ(l[i], ref[3 + i]) << c.run << " step " << 4 + i;
      EXPECT_LE(std::fabs(l[i] - ref[3 + i]) / ref[3 + i], 1e-5) << c.run << " step " << 4 + i;
    }
    // The evaluation after training: the same validation loss at every layout.
    const std::vector<double> v = test::jsonl_values(dir_ + "/runs/" + c.run + "/metrics.jsonl", "val_loss");
    const std::vector<double> vr = test::jsonl_values(dir_ + "/runs/z3/metrics.jsonl", "val_loss");
    ASSERT_FALSE(v.empty() || vr.empty()) << c.run << ": no val_loss\n" << x.out;
    EXPECT_LE(std::fabs(v.back() - vr.back()) / vr.back(), 1e-4) << c.run << " validation loss";
  }
}

TEST_F(Checkpoint, FileHoldsFullLogicalTensorsAndKeepLastPrunes) {
  reference();
  std::vector<std::string> tensors;
  {
    H5Id f(H5Fopen(ckpt("ref", 3).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    list_tensors(f, "/", tensors);
    H5Id ds(H5Dopen2(f, kTensor, H5P_DEFAULT));
    H5Id sp(H5Dget_space(ds));
    hsize_t dims[2];
    ASSERT_EQ(H5Sget_simple_extent_dims(sp, dims, nullptr), 2);
    EXPECT_EQ(dims[0], 32u);  // the whole d_model, though each of the 2 TP ranks holds 16 rows
    EXPECT_EQ(dims[1], 32u);
  }
  const CheckpointReader ck(ckpt("ref", 3));
  EXPECT_EQ(ck.state().step, 3);
  EXPECT_EQ(ck.state().global_batch, 8);
  EXPECT_EQ(checkpoint_options(ck)->get_int("model.d_model"), 32);
  // Read back, an option the run left unset stays unset: the vocabulary size is again the
  // tokenizer's (resolve_vlm_config), not model.vocab_size's default.
  EXPECT_TRUE(checkpoint_options(ck)->is_set("model.d_model"));
  EXPECT_FALSE(checkpoint_options(ck)->is_set("model.vocab_size"));
  EXPECT_EQ(Tokenizer::from_json(ck.tokenizer_json(), "t").vocab_size(), Tokenizer::load(tok_).vocab_size());
  // model + m + v of every trainable parameter, nothing else.
  size_t model = 0, m = 0, v = 0;
  for (const std::string& t : tensors) model += t.rfind("model/", 0) == 0, m += t.rfind("optim/m/", 0) == 0, v += t.rfind("optim/v/", 0) == 0;
  EXPECT_GT(model, 20u);
  EXPECT_EQ(m, model);
  EXPECT_EQ(v, model);
  EXPECT_EQ(model + m + v, tensors.size());

  const Result r = test::run_command(train("keep", "--train.steps 4 --train.save_every 1 --train.keep_last 2"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_ + "/runs/keep/checkpoints")) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"latest", "step_3.h5", "step_4.h5"}));
  EXPECT_EQ(test::read_file(dir_ + "/runs/keep/checkpoints/latest"), "step_4.h5\n");
}

TEST_F(Checkpoint, KilledSaveLeavesThePreviousOneAndAutoResumesFromIt) {
  reference();
  std::vector<std::string> tensors;
  {
    H5Id f(H5Fopen(ckpt("ref", 3).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    list_tensors(f, "/", tensors);
  }
  const size_t kill_at = tensors.size() + tensors.size() / 2;  // in the middle of the second save
  const std::string cmd = mpirun(2) + train("kill", "--tp 1 --train.batch 4");
  const Result killed = test::run_command("VLM_FAULT_CKPT_KILL=" + std::to_string(kill_at) + " " + cmd, dir_);
  EXPECT_NE(killed.status, 0) << killed.out << killed.err;
  const std::string cdir = dir_ + "/runs/kill/checkpoints";
  EXPECT_EQ(test::read_file(cdir + "/latest"), "step_3.h5\n");
  EXPECT_FALSE(fs::exists(cdir + "/step_6.h5"));
  bool temp = false;
  for (const auto& e : fs::directory_iterator(cdir)) temp = temp || e.path().filename().string().rfind(".step_6.h5.tmp-", 0) == 0;
  EXPECT_TRUE(temp) << "the writer was not killed inside the save of step 6";
  EXPECT_EQ(CheckpointReader(cdir + "/step_3.h5").state().step, 3);
  const std::vector<double> before = losses("kill");
  ASSERT_EQ(before.size(), 6u);  // the killed run logged every step before its last save

  const Result resumed = test::run_command(cmd + " --train.resume auto", dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + cdir + "/step_3.h5: step 3 of 6"), std::string::npos) << resumed.out;
  const std::vector<double> after = losses("kill");
  ASSERT_EQ(after.size(), 9u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(after[6 + i], before[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(test::read_file(cdir + "/latest"), "step_6.h5\n");
  for (const auto& e : fs::directory_iterator(cdir)) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos);
}

// A run whose tower comes from vision.hf (the tiny SigLIP fixture) leaves every vision.*
// option unset; its checkpoint must load in `vlm eval` with the same tower, which holds
// only when the unset options are read back unset (checkpoint /options).
TEST_F(Checkpoint, RunFromVisionHfLoadsInEval) {
  std::string cfg = test::read_file(std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg");
  const size_t v0 = cfg.find("[vision]"), v1 = cfg.find("[lod]");
  ASSERT_TRUE(v0 != std::string::npos && v1 > v0);
  test::write_file(dir_ + "/no_vision.cfg", cfg.erase(v0, v1 - v0));
  const std::string run = vlm() + " train --config " + dir_ + "/no_vision.cfg --data.path " + data_ +
                          " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run vhf " +
                          "--train.steps 2 --vision.hf " + std::string(VLM_SOURCE_DIR) + "/tests/data/hf_tiny/siglip";
  const Result r = test::run_command(run, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const Result e = test::run_command(vlm() + " eval --checkpoint " + dir_ + "/runs/vhf/checkpoints --data " + data_ +
                                         " --split test --images 8",
                                     dir_);
  EXPECT_EQ(e.status, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("class accuracy"), std::string::npos) << e.out;
}

// A copy of the reference's step 3 edited by `edit` (HDF5 C API, read-write).
std::string edited(const std::string& src, const std::string& dst, void (*edit)(hid_t)) {
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  H5Id f(H5Fopen(dst.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  edit(f);
  return dst;
}

void write_f32(hid_t f, const char* name, const std::vector<hsize_t>& dims, float value, bool crc) {
  H5Ldelete(f, name, H5P_DEFAULT);
  H5Id sp(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  H5Id ds(H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::vector<float> v(n, value);
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  if (crc) h5_write_attr_int(ds, "crc32c", int64_t(crc32c(v.data(), v.size() * 4)));
}

TEST_F(Checkpoint, BadCheckpointsExitWithOneLine) {
  reference();
  const std::string good = ckpt("ref", 3), bad = dir_ + "/bad.h5";
  const std::string tensor = std::string("/") + kTensor;
  auto refused = [&](const std::string& path, const std::string& extra, const std::string& what) {
    const std::string opts = extra.empty() ? "--train.batch 8" : extra;
    test::expect_one_error_line(test::run_command(train("bad", opts + " --train.resume " + path), dir_), "vlm train",
                                what);
  };
  test::write_file(bad, "not a checkpoint\n");
  refused(bad, "", bad + ": cannot open as an HDF5 file");
  const std::string bytes = test::read_file(good);
  test::write_file(bad, bytes.substr(0, bytes.size() / 2));
  refused(bad, "", bad);
  refused(data_, "", data_ + ": not a vlm checkpoint");
  refused(edited(good, bad, [](hid_t f) { h5_delete_attr(f, "version"), h5_write_attr_int(f, "version", 2); }), "", bad + ": checkpoint version 2");
  refused(edited(good, bad, [](hid_t f) { H5Ldelete(f, kTensor, H5P_DEFAULT); }), "",
          bad + ": tensor " + tensor + " is missing");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kTensor, {32, 16}, 0.f, true); }), "",
          bad + ": tensor " + tensor + " has shape [32,16], the model expects [32,32]");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, "model/llm/extra.weight", {4}, 0.f, true); }), "",
          bad + ": tensor /model/llm/extra.weight is not a parameter of this model");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kTensor, {32, 32}, NAN, true); }), "",
          bad + ": tensor " + tensor + " holds a non-finite value");
  refused(edited(good, bad, [](hid_t f) {
            H5Ldelete(f, kTensor, H5P_DEFAULT);
            const hsize_t dims[2] = {32, 32};
            H5Id sp(H5Screate_simple(2, dims, nullptr));
            H5Id ds(H5Dcreate2(f, kTensor, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
          }),
          "", bad + ": dataset " + tensor + " has the wrong dtype (expected float32)");
  {  // one flipped byte inside the tensor's data: its checksum no longer matches
    haddr_t at = 0;
    {
      H5Id f(H5Fopen(good.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
      H5Id ds(H5Dopen2(f, kTensor, H5P_DEFAULT));
      at = H5Dget_offset(ds);
    }
    ASSERT_NE(at, HADDR_UNDEF);
    std::string b = bytes;
    b[size_t(at) + 100] = char(b[size_t(at) + 100] ^ 0x40);
    test::write_file(bad, b);
    refused(bad, "", bad + ": tensor " + tensor + " is corrupt");
  }
  // Finite but huge weights (a diverged run): the resumed step's loss overflows, and the
  // run stops before the optimizer step, naming it.
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kTensor, {32, 32}, 3e38f, true); }), "",
          "step 4: the loss is not finite");
  refused(good, "--train.batch 8 --model.d_model 48", good + ": tensor /model/");
  refused(good, "--train.batch 4", good + ": saved with a global batch of 8");
  fs::create_directories(dir_ + "/dangling");
  test::write_file(dir_ + "/dangling/latest", "step_9.h5\n");
  refused(dir_ + "/dangling", "", dir_ + "/dangling/latest: names step_9.h5, which does not exist");
  refused(dir_ + "/nothing_here", "", dir_ + "/nothing_here: no such checkpoint file or folder");
}

}  // namespace
}  // namespace vlm
