// Bad checkpoints given to `vlm train --train.resume` (and to `vlm checkpoint`) exit 2 with
// one line naming the file and, where one is at fault, the tensor (checkpoint/checkpoint.h);
// the reference run's step 3 (sharded) and its consolidated single file are edited per case:
//  - sharded: a missing shard, a corrupt one (a flipped data byte: its checksum), a
//    truncated one, a truncated index, an index that is not JSON, an index naming a
//    tensor the model lacks, a run text that is not the index's, a folder whose save did
//    not finish (given, or named by `latest`); under mpirun (tp = 2) the rank that reads
//    the corrupt piece reports it and every rank ends; `vlm checkpoint verify` and
//    `consolidate` refuse the corrupt shard the same way (and write no file);
//  - single file: not HDF5, truncated, not a checkpoint, another version, a missing /
//    reshaped / extra / wrong-type tensor, flipped data bytes, a non-finite value, and
//    huge finite weights, which stop the resumed run at its first step (non-finite loss);
//  - either form: another model configuration, another global batch, another seed or
//    tokenizer, data without the saved data position; a dangling `latest`, one with
//    control characters, a missing path;
//  - a folder without `latest` resumes from its newest complete save, and a fresh run's
//    pruning leaves the saves of later steps alone.
#include <hdf5.h>

#include <cmath>

#include "io/crc32c.h"
#include "io/h5_io.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/checkpoint/index_edit.h"

namespace vlm::test {
namespace {

class BadCheckpoint : public Checkpoint {
 protected:
  // `vlm train` resuming from `path`: one process reading every tensor, or `launch` + `opts`.
  static void refused(const std::string& path, const std::string& what, const std::string& opts = "--train.batch 8",
                      const std::string& launch = "") {
    const CommandResult r = run_command(launch + train("bad", opts + " --train.resume " + path), dir_);
    expect_one_error_line(r, "vlm train", what);
  }
  // A fresh copy of the reference's step 3 folder.
  static std::string copy_step3() {
    const std::string to = dir_ + "/bad_step";
    fs::remove_all(to);
    fs::copy(ckpt("ref", 3), to);
    return to;
  }
};

TEST_F(BadCheckpoint, ShardedCheckpointsExitWithOneLine) {
  reference();
  const CheckpointIndex idx = index(ckpt("ref", 3));
  const std::string shard = idx.shards[1].file, ix = std::string("/") + kIndexName;
  std::string first;  // the tensor of shard 1's first piece, where a flipped byte 20 lands
  for (const IndexTensor& t : idx.tensors)
    for (const IndexPiece& p : t.pieces)
      if (p.shard == 1 && p.at == 0 && p.bytes() > 24) first = t.name;
  ASSERT_FALSE(first.empty());

  std::string b = copy_step3();
  fs::remove(b + "/" + shard);
  refused(b, b + "/" + shard + ": cannot open");

  b = copy_step3();
  const std::string bytes = read_file(b + "/" + shard);
  std::string flipped = bytes;
  flipped[20] = char(flipped[20] ^ 0x40);
  write_file(b + "/" + shard, flipped);
  const std::string corrupt = b + "/" + shard + ": tensor /" + first + " is corrupt";
  refused(b, corrupt);
  refused(b, corrupt, "--tp 2 --train.batch 8", mpirun(2));  // the rank that reads it reports; all end
  expect_one_error_line(run_command(vlm() + " checkpoint verify --checkpoint " + b, dir_), "vlm checkpoint verify",
                        corrupt);
  const std::string out = dir_ + "/consolidated.h5";
  expect_one_error_line(run_command(vlm() + " checkpoint consolidate --checkpoint " + b + " --out " + out, dir_),
                        "vlm checkpoint consolidate", corrupt);
  EXPECT_FALSE(fs::exists(out));

  b = copy_step3();
  write_file(b + "/" + shard, bytes.substr(0, bytes.size() - 100));
  refused(b, b + "/" + shard + ": holds " + std::to_string(bytes.size() - 100) + " bytes, the index says " +
                 std::to_string(bytes.size()));

  b = copy_step3();
  const std::string text = read_file(b + ix);
  write_file(b + ix, text.substr(0, text.size() / 2));
  refused(b, b + ix + ": JSON error");
  write_file(b + ix, "not an index");
  refused(b, b + ix + ": JSON error");
  std::string renamed = text;
  const std::string norm = "\"model/llm/model.norm.weight\"";
  ASSERT_NE(renamed.find(norm), std::string::npos);
  write_file(b + ix, resigned_index(renamed.replace(renamed.find(norm), norm.size(), "\"model/llm/extra.weight\"")));
  refused(b, b + ix + ": tensor /model/llm/extra.weight is not a parameter of this model");

  b = copy_step3();
  write_file(b + "/" + idx.options.file, read_file(b + "/" + idx.options.file) + "\n");
  refused(b, b + "/" + idx.options.file + ": holds");

  b = copy_step3();
  {  // options no model takes, with their checksums made good (an edit, or another vlm):
     // inference names the checkpoint
    const std::string of = b + "/" + idx.options.file;
    std::string o = read_file(of);
    const size_t at = o.find("n_heads = 4\n");
    ASSERT_NE(at, std::string::npos) << o;
    o[at + 10] = '3';
    write_file(of, o);
    std::string text = read_file(b + ix);
    const std::string entry = "\"bytes\":" + std::to_string(idx.options.bytes) +
                              ",\"crc32c\":" + std::to_string(idx.options.crc32c);
    ASSERT_NE(text.find(entry), std::string::npos) << text;
    text.replace(text.find(entry), entry.size(),
                 "\"bytes\":" + std::to_string(o.size()) + ",\"crc32c\":" + std::to_string(crc32c(o.data(), o.size())));
    write_file(b + ix, resigned_index(text));
    expect_one_error_line(run_command(vlm() + " eval --checkpoint " + b + " --data " + data_, dir_), "vlm eval",
                          b + ": the options it was saved with: model.");
  }

  b = copy_step3();
  fs::remove(b + ix);
  refused(b, b + ": not a complete checkpoint (no index.json: its save did not finish)");
  fs::create_directories(dir_ + "/unfinished");
  fs::rename(b, dir_ + "/unfinished/step_3");
  write_file(dir_ + "/unfinished/latest", "step_3\n");
  refused(dir_ + "/unfinished", dir_ + "/unfinished/latest: names step_3, which is not a complete checkpoint");

  refused(ckpt("ref", 3), ckpt("ref", 3) + ix + ": tensor /model/", "--train.batch 8 --model.d_model 48");
  refused(ckpt("ref", 3), ckpt("ref", 3) + ": saved with a global batch of 8", "--train.batch 4");
}

// A resume continues the saved run: another seed, another tokenizer, or data in which the
// saved data position does not exist are refused, naming the option.
TEST_F(BadCheckpoint, AResumeKeepsTheSeedTheTokenizerAndADataPositionThatExists) {
  reference();
  refused(ckpt("ref", 3), ckpt("ref", 3) + ": saved by a run of seed 1, this run has --seed 7",
          "--train.batch 8 --seed 7");
  const std::string other = dir_ + "/tok_other.json";
  const CommandResult t =
      run_command(vlm() + " data tokenizer --data.train " + data_ + " --data.vocab 280 --data.out " + other, dir_);
  ASSERT_EQ(t.status, 0) << t.err;
  refused(ckpt("ref", 3), ckpt("ref", 3) + ": saved with another tokenizer than this run's (--data.tokenizer " + other,
          "--train.batch 8 --data.tokenizer " + other);
  // 16 images: 2 steps of 8 per epoch, where the save stands at step 3 of its epoch.
  const std::string small = dir_ + "/small.h5";
  const CommandResult s = run_command(vlm() + " data build --data.from fashion-mnist --data.limit 16 --data.out " + small,
                                     dir_);
  ASSERT_EQ(s.status, 0) << s.err;
  refused(ckpt("ref", 3),
          ckpt("ref", 3) + ": its data position (epoch 0, step 3 of the epoch) is not in --data.path " + small +
              " (2 steps per epoch)",
          "--train.batch 8 --data.path " + small);
}

// A checkpoint folder without `latest` (a save killed between its index and `latest`)
// resumes from its newest complete save; a save that did not finish is named so even
// when only its temporary shards are there; a `latest` with control characters is
// refused; and a fresh run's pruning leaves saves of later steps (an earlier run's) alone.
TEST_F(BadCheckpoint, LatestMissingOrDamagedAndPruning) {
  reference();
  const std::string folder = dir_ + "/no_latest";
  fs::remove_all(folder);
  fs::copy(ckpt_dir("ref"), folder, fs::copy_options::recursive);
  fs::remove(folder + "/latest");
  fs::create_directories(folder + "/step_9");  // a save killed before its first shard's commit
  write_file(folder + "/step_9/.rank_0.0123ab.shard.tmp-1-0", "partial");
  const CommandResult v = run_command(vlm() + " checkpoint verify --checkpoint " + folder, dir_);
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find(folder + "/step_6: step 6"), std::string::npos) << v.out;
  const CommandResult u = run_command(vlm() + " checkpoint verify --checkpoint " + folder + "/step_9", dir_);
  expect_one_error_line(u, "vlm checkpoint verify",
                        folder + "/step_9: not a complete checkpoint (no index.json: its save did not finish)");
  write_file(folder + "/latest", std::string("step_6\0junk\n", 12));
  const CommandResult n = run_command(vlm() + " checkpoint verify --checkpoint " + folder, dir_);
  expect_one_error_line(n, "vlm checkpoint verify",
                        folder + "/latest: expected the name of a checkpoint in this folder, got 11 bytes with control "
                                 "characters");

  // Saves of steps 30 and 60 (renamed copies), then a fresh run keeping one save.
  const std::string pruned = dir_ + "/pruned";
  fs::remove_all(pruned);
  fs::create_directories(pruned);
  fs::copy(ckpt("ref", 3), pruned + "/step_30", fs::copy_options::recursive);
  fs::copy(ckpt("ref", 6), pruned + "/step_60", fs::copy_options::recursive);
  const CommandResult f =
      run_command(train("fresh", "--train.batch 8 --train.keep_last 1 --train.ckpt_dir " + pruned), dir_);
  ASSERT_EQ(f.status, 0) << f.err;
  for (const char* s : {"step_6", "step_30", "step_60"})
    EXPECT_TRUE(fs::exists(pruned + "/" + s + "/" + kIndexName)) << s;
  EXPECT_FALSE(fs::exists(pruned + "/step_3")) << "keep_last 1 keeps step_6 alone of the run's own saves";
  EXPECT_EQ(read_file(pruned + "/latest"), "step_6\n");
}

// A copy of the consolidated file edited by `edit` (HDF5 C API, read-write).
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

// The bytes of a u8 dataset of the file (its texts: config, options, tokenizer).
std::string text_of(hid_t f, const char* name) {
  std::vector<int64_t> dims;
  H5Id ds = h5_open_dataset(f, "bad.h5", name, H5Elem::U8, 1, &dims);
  std::string t(static_cast<size_t>(dims[0]), '\0');
  h5_read_rows(ds, H5Elem::U8, 0, dims[0], 1, t.data());
  return t;
}

TEST_F(BadCheckpoint, SingleFileCheckpointsExitWithOneLine) {
  reference();
  const std::string good = ref_h5(), bad = dir_ + "/bad.h5";
  const std::string tensor = std::string("/") + kQproj;
  write_file(bad, "not a checkpoint\n");
  refused(bad, bad + ": cannot open as an HDF5 file");
  const std::string bytes = read_file(good);
  write_file(bad, bytes.substr(0, bytes.size() / 2));
  refused(bad, bad);
  refused(data_, data_ + ": not a vlm checkpoint");
  refused(edited(good, bad, [](hid_t f) { h5_delete_attr(f, "version"), h5_write_attr_int(f, "version", 3); }),
          bad + ": checkpoint version 3 (this vlm reads versions 1 to 2)");
  // The state and the texts are covered by the root checksum: the next batch moved, a
  // byte of the options changed.
  refused(edited(good, bad,
                 [](hid_t f) {
                   H5Id st(H5Gopen2(f, "state", H5P_DEFAULT));
                   h5_delete_attr(st, "sampler_step"), h5_write_attr_int(st, "sampler_step", 1);
                 }),
          bad + ": the checkpoint's state or texts are corrupt (the root attribute crc32c does not match them)");
  refused(edited(good, bad,  // a data position past what the saved steps drew (read before the checksum)
                 [](hid_t f) {
                   H5Id st(H5Gopen2(f, "state", H5P_DEFAULT));
                   h5_delete_attr(st, "sampler_epoch"), h5_write_attr_int(st, "sampler_epoch", int64_t(1) << 62);
                 }),
          bad + ": /state: sampler_epoch 4611686018427387904 is past the 1 x 3 batches");
  refused(edited(good, bad,
                 [](hid_t f) {
                   std::string o = text_of(f, "options");
                   o[o.find('=') + 2] ^= 1;
                   H5Ldelete(f, "options", H5P_DEFAULT);
                   h5_write_1d(f, "options", H5Elem::U8, o.data(), int64_t(o.size()), true);
                 }),
          bad + ": the checkpoint's state or texts are corrupt");
  {  // a file of version 1 (written before the root checksum) is still read
    const std::string v1 = edited(good, dir_ + "/v1.h5", [](hid_t f) {
      h5_delete_attr(f, "version"), h5_write_attr_int(f, "version", 1), h5_delete_attr(f, "crc32c");
    });
    const CommandResult r = run_command(train("v1", "--train.batch 8 --train.resume " + v1), dir_);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
  }
  refused(edited(good, bad, [](hid_t f) { H5Ldelete(f, kQproj, H5P_DEFAULT); }),
          bad + ": tensor " + tensor + " is missing");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kQproj, {32, 16}, 0.f, true); }),
          bad + ": tensor " + tensor + " has shape [32,16], the model expects [32,32]");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, "model/llm/extra.weight", {4}, 0.f, true); }),
          bad + ": tensor /model/llm/extra.weight is not a parameter of this model");
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kQproj, {32, 32}, NAN, true); }),
          bad + ": tensor " + tensor + " holds a non-finite value");
  refused(edited(good, bad,
                 [](hid_t f) {
                   H5Ldelete(f, kQproj, H5P_DEFAULT);
                   const hsize_t dims[2] = {32, 32};
                   H5Id sp(H5Screate_simple(2, dims, nullptr));
                   H5Id ds(H5Dcreate2(f, kQproj, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
                 }),
          bad + ": dataset " + tensor + " has the wrong dtype (expected float32)");
  {  // one flipped byte inside the tensor's data: its checksum no longer matches
    haddr_t at = 0;
    {
      H5Id f(H5Fopen(good.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
      H5Id ds(H5Dopen2(f, kQproj, H5P_DEFAULT));
      at = H5Dget_offset(ds);
    }
    ASSERT_NE(at, HADDR_UNDEF);
    std::string b = bytes;
    b[size_t(at) + 100] = char(b[size_t(at) + 100] ^ 0x40);
    write_file(bad, b);
    refused(bad, bad + ": tensor " + tensor + " is corrupt");
  }
  // Finite but huge weights (a diverged run): the resumed step's loss overflows, and the
  // run stops before the optimizer step, naming it.
  refused(edited(good, bad, [](hid_t f) { write_f32(f, kQproj, {32, 32}, 3e38f, true); }),
          "step 4: the loss is not finite");
  refused(good, good + ": tensor /model/", "--train.batch 8 --model.d_model 48");
  refused(good, good + ": saved with a global batch of 8", "--train.batch 4");
  fs::create_directories(dir_ + "/dangling");
  write_file(dir_ + "/dangling/latest", "step_9\n");
  refused(dir_ + "/dangling", dir_ + "/dangling/latest: names step_9, which does not exist");
  refused(dir_ + "/nothing_here", dir_ + "/nothing_here: no such checkpoint file or folder");
}

}  // namespace
}  // namespace vlm::test
