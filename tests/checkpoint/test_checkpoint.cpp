// Sharded checkpoints of `vlm train` (checkpoint/checkpoint.h) through the binary and real
// mpirun, on a Fashion-MNIST subset with configs/tiny.cfg, 6 steps, a checkpoint every 3:
//  - a run saved at (tp, dp) = (2, 2) with ZeRO-1 and resumed from step 3 at (2, 2) gives
//    bitwise the losses of steps 4-6 of the uninterrupted run; resumed at (4, 1), (1, 1),
//    (1, 2) and (1, 4) with ZeRO-1 or not they agree to 1e-5 relative; its consolidated
//    single file resumes bitwise too; one rank at (1, 1) reads every stored byte once, a
//    rank at (2, 2) fewer;
//  - the folder: one shard per rank, TP-split tensors stored by the TP rank that holds
//    the slice, replicated ones by TP rank 0 only, nothing but the files the index
//    names; the consolidated file holds the full logical tensors, equal to the pieces read
//    straight from the shard files; train.keep_last keeps the newest saves;
//  - a rank killed inside its shard of the second save (VLM_FAULT_CKPT_KILL=n@1) leaves
//    step 3 as `latest`, whole, and step 6 without an index; rank 0 killed after the
//    index but before `latest` leaves `latest` at step 3 too; resume=auto continues from
//    step 3 with bitwise the losses of the uninterrupted run, and metrics.jsonl then has
//    each step's line once (the killed attempt's lines of steps 4-6 dropped);
//  - ZeRO-3: tests/checkpoint/test_checkpoint_zero3.cpp;
//  - a run whose tower comes from vision.hf loads in `vlm eval` (options it left unset
//    stay unset when read back).
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <set>

#include "base/config.h"
#include "checkpoint/checkpoint.h"
#include "io/h5_io.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "train/trained_model.h"

namespace vlm::test {
namespace {

// The bytes of a shard's data area (its size less the header and the trailer).
int64_t data_area(const std::string& path) {
  const std::string b = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[b.size() - 16 + size_t(i)]);
  return int64_t(b.size()) - 16 - int64_t(n);
}

// The whole tensor assembled from its pieces' bytes in the shard files, element by
// element (the box's row-major order, cut to the range).
std::vector<float> assemble(const std::string& folder, const CheckpointIndex& idx, const std::string& name) {
  for (const IndexTensor& t : idx.tensors) {
    if (t.name != name) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> full(size_t(n), NAN);
    for (const IndexPiece& p : t.pieces) {
      const std::string bytes = read_file(folder + "/" + idx.shards[size_t(p.shard)].file);
      for (int64_t e = p.region.begin; e < p.region.end; ++e) {
        int64_t rest = e, at = 0, stride = 1;
        for (size_t d = t.shape.size(); d-- > 0;) {
          at += (p.region.offset[d] + rest % p.region.extent[d]) * stride;
          rest /= p.region.extent[d], stride *= t.shape[d];
        }
        std::memcpy(&full[size_t(at)], bytes.data() + p.at + 4 * (e - p.region.begin), 4);
      }
    }
    return full;
  }
  ADD_FAILURE() << name << " is not in the index";
  return {};
}

std::vector<std::string> files_of(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename());
  std::sort(v.begin(), v.end());
  return v;
}

// "rank 0 read N bytes of tensor data[ of the M stored]" of the resume line.
std::pair<int64_t, int64_t> read_bytes(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("rank 0 read (\\d+) bytes of tensor data(?: of the (\\d+) stored)?")))
    return {-1, -1};
  return {std::stoll(m[1]), m[2].matched ? std::stoll(m[2]) : -1};
}

TEST_F(Checkpoint, ResumeIsExactAtTheSameLayoutAndCloseAtAnother) {
  reference();
  const std::vector<double> ref = losses("ref");
  ASSERT_EQ(ref.size(), 6u);
  struct Case {
    std::string run, cmd, from;
    bool bitwise;
  };
  const std::string s3 = ckpt("ref", 3), from = " --train.resume " + s3, h5 = " --train.resume " + ref_h5();
  const std::vector<Case> cases = {
      {"r22", mpirun(4) + train("r22", "--tp 2 --train.batch 4 --train.zero 1" + from), s3, true},
      {"r41", mpirun(4) + train("r41", "--tp 4 --train.batch 8" + from), s3, false},
      {"r11", train("r11", "--train.batch 8" + from), s3, false},
      {"r12", mpirun(2) + train("r12", "--tp 1 --train.batch 4 --train.zero 1" + from), s3, false},
      {"r14", mpirun(4) + train("r14", "--tp 1 --train.batch 2 --train.zero 1" + from), s3, false},
      {"h22", mpirun(4) + train("h22", "--tp 2 --train.batch 4 --train.zero 1" + h5), ref_h5(), true},
  };
  int64_t stored = 0;
  for (const std::string& f : files_of(s3))
    if (f.rfind("rank_", 0) == 0) stored += data_area(s3 + "/" + f);
  for (const Case& c : cases) {
    const CommandResult r = run_command(c.cmd, dir_);
    ASSERT_EQ(r.status, 0) << c.cmd << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("resumed from " + c.from + ": step 3 of 6 (saved at tp=2 dp=2 zero=1)"), std::string::npos)
        << r.out;
    const std::vector<double> l = losses(c.run);
    ASSERT_EQ(l.size(), 3u) << c.run;
    for (size_t i = 0; i < 3; ++i) {
      if (c.bitwise) {
        EXPECT_EQ(l[i], ref[3 + i]) << c.run << " step " << 4 + i;
      }
      EXPECT_LE(std::fabs(l[i] - ref[3 + i]) / ref[3 + i], 1e-5) << c.run << " step " << 4 + i;
    }
    const auto [got, total] = read_bytes(r.out);
    if (c.run == "r11") {
      EXPECT_EQ(got, stored) << "one rank reads every stored byte, once\n" << r.out;
    }
    if (c.run == "r22") {
      EXPECT_LT(got, stored) << "a rank reads only the pieces it needs\n" << r.out;
    }
    if (c.from == s3) {
      EXPECT_EQ(total, stored) << r.out;
    }
  }
}

TEST_F(Checkpoint, ShardsHoldEveryElementOnceFromItsOwner) {
  reference();
  const std::string s3 = ckpt("ref", 3);
  const CheckpointIndex idx = index(s3);
  ASSERT_EQ(idx.shards.size(), 4u);
  std::vector<std::string> named{kIndexName, idx.config.file, idx.options.file, idx.tokenizer.file};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(idx.shards[k].rank, int(k));
    EXPECT_EQ(idx.shards[k].file, "rank_" + std::to_string(k) + "." + idx.save + ".shard");
    named.push_back(idx.shards[k].file);
  }
  std::sort(named.begin(), named.end());
  EXPECT_EQ(files_of(s3), named) << "the folder holds the files its index names, nothing else";
  EXPECT_EQ(idx.state.step, 3);
  EXPECT_EQ(idx.state.global_batch, 8);
  size_t model = 0, m = 0, v = 0;
  for (const IndexTensor& t : idx.tensors) {
    model += t.name.rfind("model/", 0) == 0;
    m += t.name.rfind("optim/m/", 0) == 0, v += t.name.rfind("optim/v/", 0) == 0;
    for (const IndexPiece& p : t.pieces) {
      const int tp_rank = idx.shards[size_t(p.shard)].rank % 2;  // world rank = tp_rank + 2 dp_rank
      const bool whole = p.region.extent == t.shape;
      if (whole) {
        EXPECT_EQ(tp_rank, 0) << t.name << ": a replicated tensor is written by TP rank 0 only";
      } else {  // a TP slice along the dimension it is split on: the first, or the last (cut at the padding)
        for (size_t d = 0; d < t.shape.size(); ++d) {
          if (p.region.extent[d] != t.shape[d]) {
            EXPECT_EQ(tp_rank == 0 ? p.region.offset[d] : p.region.offset[d] + p.region.extent[d],
                      tp_rank == 0 ? 0 : t.shape[d])
                << t.name << " from TP rank " << tp_rank;
          }
        }
      }
    }
  }
  EXPECT_GT(model, 20u);
  EXPECT_EQ(m, model);
  EXPECT_EQ(v, model);
  EXPECT_EQ(model + m + v, idx.tensors.size());

  const CheckpointReader ck(s3);
  EXPECT_TRUE(ck.sharded());
  EXPECT_EQ(ck.state().step, 3);
  EXPECT_TRUE(checkpoint_options(ck)->is_set("model.d_model"));
  EXPECT_FALSE(checkpoint_options(ck)->is_set("model.vocab_size"));
  EXPECT_EQ(Tokenizer::from_json(ck.tokenizer_json(), "t").vocab_size(), Tokenizer::load(tok_).vocab_size());

  // The consolidated file: every tensor of the index, full logical shapes, the values of
  // the pieces read straight from the shard files (the HDF5 C API as the reader).
  H5Id f(H5Fopen(ref_h5().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  for (const IndexTensor& t : idx.tensors) {
    H5Id ds(H5Dopen2(f, t.name.c_str(), H5P_DEFAULT));
    ASSERT_TRUE(ds.valid()) << t.name;
    H5Id sp(H5Dget_space(ds));
    std::vector<hsize_t> dims(t.shape.size());
    ASSERT_EQ(H5Sget_simple_extent_dims(sp, dims.data(), nullptr), int(t.shape.size())) << t.name;
    EXPECT_EQ(std::vector<int64_t>(dims.begin(), dims.end()), t.shape) << t.name;
    if (t.name != kQproj && t.name != std::string("optim/v/") + (kQproj + 6)) continue;
    const std::vector<float> want = assemble(s3, idx, t.name);
    std::vector<float> got(want.size());
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0) << t.name;
  }

  const CommandResult r = run_command(train("keep", "--train.steps 4 --train.save_every 1 --train.keep_last 2"), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(files_of(ckpt_dir("keep")), (std::vector<std::string>{"latest", "step_3", "step_4"}));
  EXPECT_EQ(read_file(ckpt_dir("keep") + "/latest"), "step_4\n");
}

// The pieces world rank `rank` writes per save.
int64_t pieces_of(const CheckpointIndex& idx, int rank) {
  int64_t n = 0;
  for (const IndexTensor& t : idx.tensors)
    for (const IndexPiece& p : t.pieces) n += idx.shards[size_t(p.shard)].rank == rank;
  return n;
}

TEST_F(Checkpoint, KilledSaveLeavesThePreviousOneAndAutoResumesFromIt) {
  const std::string opts = "--tp 1 --train.batch 4 --train.zero 1";
  const CommandResult whole = run_command(mpirun(2) + train("whole", opts), dir_);
  ASSERT_EQ(whole.status, 0) << whole.out << whole.err;
  const std::vector<double> ref = losses("whole");
  ASSERT_EQ(ref.size(), 6u);
  const CheckpointIndex idx = index(ckpt("whole", 3));
  const int64_t p0 = pieces_of(idx, 0), p1 = pieces_of(idx, 1);
  ASSERT_GT(p1, 4);
  struct Case {
    std::string run, fault, what;
    bool temporary;  // the killed rank leaves a temporary shard of step 6
  };
  const std::vector<Case> cases = {
      // Rank 1's events of a save: its pieces, then its shard's commit.
      {"kill1", std::to_string(p1 + 1 + p1 / 2) + "@1", "rank 1 inside its shard of step 6", true},
      // Rank 0's: its pieces, its shard's commit, the index's commit (before `latest`).
      {"kill0", std::to_string(2 * (p0 + 2)) + "@0", "rank 0 after the index of step 6", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string cmd = mpirun(2) + train(c.run, opts), cdir = ckpt_dir(c.run);
    const CommandResult killed = run_command("VLM_FAULT_CKPT_KILL=" + c.fault + " " + cmd, dir_);
    EXPECT_NE(killed.status, 0) << killed.out << killed.err;
    EXPECT_EQ(read_file(cdir + "/latest"), "step_3\n");
    EXPECT_EQ(fs::exists(cdir + "/step_6/" + kIndexName), !c.temporary);
    bool temp = false;
    for (const std::string& f : files_of(cdir + "/step_6"))
      temp = temp || (f.rfind(".rank_1.", 0) == 0 && f.find(".tmp-") != std::string::npos);
    EXPECT_EQ(temp, c.temporary) << "the kill did not happen where intended";
    EXPECT_EQ(CheckpointReader(resolve_checkpoint(cdir)).state().step, 3);
    const std::vector<double> before = losses(c.run);
    ASSERT_EQ(before.size(), 6u);  // the killed run logged every step before its last save
    EXPECT_EQ(before, ref);

    const CommandResult resumed = run_command(cmd + " --train.resume auto", dir_);
    ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from " + cdir + "/step_3: step 3 of 6"), std::string::npos) << resumed.out;
    // The killed attempt's lines of steps 4-6 dropped (runlog/run_log.h): each step once,
    // bitwise the uninterrupted run's.
    EXPECT_EQ(losses(c.run), ref);
    EXPECT_EQ(read_file(cdir + "/latest"), "step_6\n");
    const CheckpointIndex done = index(cdir + "/step_6");
    std::set<std::string> named{kIndexName, done.config.file, done.options.file, done.tokenizer.file};
    for (const ShardRef& s : done.shards) named.insert(s.file);
    for (const std::string& f : files_of(cdir + "/step_6")) EXPECT_TRUE(named.count(f)) << f << " left in step_6";
  }
}

// A run whose tower comes from vision.hf (the tiny SigLIP fixture) leaves every vision.*
// option unset; its checkpoint must load in `vlm eval` with the same tower, which holds
// only when the unset options are read back unset (the checkpoint's options text).
TEST_F(Checkpoint, RunFromVisionHfLoadsInEval) {
  std::string cfg = read_file(std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg");
  const size_t v0 = cfg.find("[vision]"), v1 = cfg.find("[lod]");
  ASSERT_TRUE(v0 != std::string::npos && v1 > v0);
  write_file(dir_ + "/no_vision.cfg", cfg.erase(v0, v1 - v0));
  const std::string run = vlm() + " train --config " + dir_ + "/no_vision.cfg --data.path " + data_ +
                          " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ + "/runs --train.run vhf " +
                          "--train.steps 2 --vision.hf " + std::string(VLM_SOURCE_DIR) + "/tests/data/hf_tiny/siglip";
  const CommandResult r = run_command(run, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const CommandResult e = run_command(vlm() + " eval --checkpoint " + ckpt_dir("vhf") + " --data " + data_ +
                                          " --split test --images 8",
                                      dir_);
  EXPECT_EQ(e.status, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("class accuracy"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace vlm::test
