// Sharded checkpoints of `vlm train` under ZeRO-3, through the binary and real mpirun
// (the fixture of tests/checkpoint/checkpoint_fixture.h): saved at (2, 2) with ZeRO-3
// and resumed at (2, 2) ZeRO-3 (bitwise), (4, 1) ZeRO-0, (1, 4) and (1, 2) ZeRO-2 (1e-5);
// a rank killed in a ZeRO-3 save; a missing and a corrupt shard refused in one line.
#include <cmath>

#include "checkpoint/checkpoint.h"
#include "tests/checkpoint/checkpoint_fixture.h"

namespace vlm::test {
namespace {

// ZeRO-3 (docs/training.md): every rank writes the shards of the masters and moments it
// owns (and of the pooled layers, which no rank holds whole) as pieces of the same full
// logical tensors. Saved at (tp, dp) = (2, 2) with ZeRO-3 and resumed from step 3: at
// (2, 2) with ZeRO-3 the losses are bitwise the uninterrupted run's; at (4, 1) without
// ZeRO, (1, 4) and (1, 2) with ZeRO-2 within 1e-5; the run's own evaluation after
// training (validation loss) fetches the backbone's layers from the DP group and gives the
// figures of the resumed runs. Rank 1 SIGKILLed inside its shard of the step-6 save
// leaves step 3 as `latest`, loadable, and resume=auto continues from it bitwise. A
// missing shard (every rank needs it: one line from rank 0) and a corrupt one are refused
// in one line naming the file and the tensor.
TEST_F(Checkpoint, ZeroThreeSavesFullTensorsAndResumesAtAnyLayout) {
  const std::string base = "--train.batch 4 --train.micro_batches 1 ", z3 = "--tp 2 --train.zero 3 " + base;
  const CommandResult r = test::run_command(mpirun(4) + train("z3", z3), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<double> ref = losses("z3");
  ASSERT_EQ(ref.size(), 6u);
  const std::string s3 = ckpt("z3", 3), from = " --train.resume " + s3;
  struct Case {
    std::string run, cmd;
    bool bitwise;
  };
  const std::vector<Case> cases = {
      {"z3r22", mpirun(4) + train("z3r22", z3 + from), true},
      {"z3r41", mpirun(4) + train("z3r41", "--tp 4 --train.batch 8" + from), false},
      {"z3r14", mpirun(4) + train("z3r14", "--tp 1 --train.zero 2 --train.batch 2" + from), false},
      {"z3r12", mpirun(2) + train("z3r12", "--tp 1 --train.zero 2 " + base + from), false},
  };
  for (const Case& c : cases) {
    const CommandResult x = test::run_command(c.cmd, dir_);
    ASSERT_EQ(x.status, 0) << c.cmd << "\n" << x.out << x.err;
    EXPECT_NE(x.out.find("(saved at tp=2 dp=2 zero=3)"), std::string::npos) << x.out;
    const std::vector<double> l = losses(c.run);
    ASSERT_EQ(l.size(), 3u) << c.run;
    for (size_t i = 0; i < 3; ++i) {
      if (c.bitwise) {
        EXPECT_EQ(l[i], ref[3 + i]) << c.run << " step " << 4 + i;
      }
      EXPECT_LE(std::fabs(l[i] - ref[3 + i]) / ref[3 + i], 1e-5) << c.run << " step " << 4 + i;
    }
    // The evaluation after training: the same validation loss at every layout.
    const std::vector<double> v = test::jsonl_values(dir_ + "/runs/" + c.run + "/metrics.jsonl", "val_loss");
    const std::vector<double> vr = test::jsonl_values(dir_ + "/runs/z3/metrics.jsonl", "val_loss");
    ASSERT_FALSE(v.empty() || vr.empty()) << c.run << ": no val_loss\n" << x.out;
    EXPECT_LE(std::fabs(v.back() - vr.back()) / vr.back(), 1e-4) << c.run << " validation loss";
  }

  // Rank 1 killed inside its shard of the step-6 save (its events: its pieces, then the
  // shard's commit).
  const CheckpointIndex idx = index(s3);
  int64_t p1 = 0;
  for (const IndexTensor& t : idx.tensors)
    for (const IndexPiece& p : t.pieces) p1 += idx.shards[size_t(p.shard)].rank == 1;
  ASSERT_GT(p1, 4);
  const std::string kill = mpirun(4) + train("z3kill", z3), kdir = ckpt_dir("z3kill");
  const CommandResult killed = run_command("VLM_FAULT_CKPT_KILL=" + std::to_string(p1 + 1 + p1 / 2) + "@1 " + kill, dir_);
  EXPECT_NE(killed.status, 0) << killed.out << killed.err;
  EXPECT_EQ(read_file(kdir + "/latest"), "step_3\n");
  EXPECT_FALSE(fs::exists(kdir + "/step_6/" + kIndexName));
  EXPECT_EQ(CheckpointReader(resolve_checkpoint(kdir)).state().step, 3);
  EXPECT_EQ(losses("z3kill"), ref) << "the killed run logged every step before its last save";
  const CommandResult resumed = run_command(kill + " --train.resume auto", dir_);
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + kdir + "/step_3: step 3 of 6"), std::string::npos) << resumed.out;
  EXPECT_EQ(losses("z3kill"), ref) << "each step's line once (the killed attempt's of steps 4-6 dropped), bitwise";

  // A missing shard, at (2, 2) with ZeRO-3; a corrupt one (a flipped byte of its first
  // piece), in one process.
  const std::string shard = idx.shards[2].file, bad = dir_ + "/z3bad";
  std::string first;
  for (const IndexTensor& t : idx.tensors)
    for (const IndexPiece& p : t.pieces)
      if (p.shard == 2 && p.at == 0 && p.bytes() > 24) first = t.name;
  ASSERT_FALSE(first.empty());
  fs::remove_all(bad);
  fs::copy(s3, bad);
  fs::remove(bad + "/" + shard);
  const CommandResult missing = run_command(mpirun(4) + train("z3bad", z3 + " --train.resume " + bad), dir_);
  expect_one_error_line(missing, "vlm train", bad + "/" + shard + ": cannot open");
  EXPECT_NE(missing.err.find("; it holds tensor /"), std::string::npos) << missing.err;
  fs::copy_file(s3 + "/" + shard, bad + "/" + shard);
  std::string bytes = read_file(bad + "/" + shard);
  bytes[20] = char(bytes[20] ^ 0x40);
  write_file(bad + "/" + shard, bytes);
  expect_one_error_line(run_command(train("z3bad", "--train.batch 8 --train.resume " + bad), dir_), "vlm train",
                        bad + "/" + shard + ": tensor /" + first + " is corrupt");
}

}  // namespace
}  // namespace vlm::test
