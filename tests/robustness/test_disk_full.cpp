// A full disk, for real (docs/errors.md, "A full disk"): each case mounts a small tmpfs
// in its folder (as root: the tests run as root here and in CI; skipped with the reason
// otherwise), puts the previous output there, fills the rest with a file until only a
// chosen number of 4 KiB pages is free, and runs the real command, whose write then
// fails with ENOSPC. The promise checked for every writer: exit code 2 (every rank
// under mpirun), one line naming the file and the error ("No space left on device"),
// the previous file byte for byte, and no partial file under the final name nor a
// temporary beside it. Writers: `vlm data build` (HDF5 through DatasetWriter), `vlm data
// tokenize` (HDF5 rewritten in a copy), `vlm data tokenizer` (write_file_atomic), `vlm
// export` (safetensors and JSON files), and `vlm train`'s sharded checkpoint (one rank and
// two under mpirun), metrics.jsonl and TensorBoard event file (io/append_file.h,
// runlog/tfrecord.h) and --trace (write_file_atomic). Each case first runs the command
// with space to spare and sees it replace the file, so the check could fail.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "robustness.h"
#include "tests/support/cli.h"

namespace vlm::robustness {
namespace {

constexpr uint64_t kPage = 4096;

// A dataset, its tokenizer and a one-step checkpoint of configs/tiny.cfg trained on it,
// made once per test binary in its own folder.
struct Trained {
  std::string dir, data, tok, ckpt;
};

class DiskFull : public Robust {
 protected:
  void SetUp() override {
    Robust::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "not root: a tmpfs cannot be mounted, so no full disk can be made";
    disk_ = path("disk");
    fs::create_directories(disk_);
    if (mount("tmpfs", disk_.c_str(), "tmpfs", 0, "size=4m") != 0)
      GTEST_SKIP() << "mount -t tmpfs -o size=4m failed (" << std::strerror(errno) << "): no full disk can be made";
    mounted_ = true;
    runs_ = dir_ + "_runs";  // run folders outside the case folder (they are the run's, not the case's output)
    fs::remove_all(runs_);
    fs::create_directories(runs_);
  }
  void TearDown() override {
    if (mounted_) umount2(disk_.c_str(), MNT_DETACH);
    fs::remove_all(runs_);
    Robust::TearDown();
  }

  // Fills the tmpfs with the file disk/.filler until exactly `pages` pages are free.
  void fill(uint64_t pages) {
    const std::string f = disk_ + "/.filler";
    const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string chunk(1 << 16, 'x');
    while (::write(fd, chunk.data(), chunk.size()) > 0) {
    }
    const uint64_t used = (uint64_t(::lseek(fd, 0, SEEK_END)) + kPage - 1) / kPage;
    ASSERT_GE(used, pages);
    ASSERT_EQ(::ftruncate(fd, off_t((used - pages) * kPage)), 0);
    ::close(fd);
    struct statvfs v {};
    ASSERT_EQ(statvfs(disk_.c_str(), &v), 0);
    ASSERT_EQ(uint64_t(v.f_bavail) * v.f_frsize, pages * kPage) << "the tmpfs did not fill as planned";
  }
  static uint64_t pages_of(const std::string& file) { return (fs::file_size(file) + kPage - 1) / kPage; }

  // The files on the tmpfs (names relative to it), the filler left out.
  std::vector<std::string> on_disk() const {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(disk_))
      if (e.is_regular_file() && e.path().filename() != ".filler") names.push_back(fs::relative(e.path(), disk_).string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Runs args with space to spare: must succeed and change `out` (a file of the case
  // folder); `out` then gets its old bytes back.
  void replaces(const std::vector<std::string>& args, const std::string& out) {
    const std::string old = read_file(path(out));
    const RunResult r = run_vlm(args, dir_);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_NE(read_file(path(out)), old) << "the command did not write " << out;
    write(out, old);
  }

  static const Trained& trained() {
    struct Cache : Trained {
      ~Cache() { fs::remove_all(dir); }
    };
    static const Cache cache{[] {
      Cache c;
      c.dir = (fs::temp_directory_path() / ("vlm_rob_" + std::to_string(getpid()) + "_trained")).string();
      fs::remove_all(c.dir);
      const test::FashionSubset f = test::fashion_subset(vlm_binary(), (fs::create_directories(c.dir), c.dir), 64);
      c.data = f.data, c.tok = f.tokenizer;
      const RunResult r = run_vlm({"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", c.data,
                                   "--data.tokenizer", c.tok, "--train.steps", "1", "--train.out_dir", c.dir + "/runs"},
                                  c.dir);
      if (r.code != 0) throw std::runtime_error("vlm train of the base checkpoint failed: " + r.err);
      c.ckpt = c.dir + "/runs/run/checkpoints/step_1";
      return c;
    }()};
    return cache;
  }

  // `vlm train` of configs/tiny.cfg on the trained() dataset, `steps` steps, run folder
  // <runs_>/<run>, then the extra options.
  std::vector<std::string> train(const std::string& run, int steps, const std::vector<std::string>& extra) const {
    const Trained& t = trained();
    std::vector<std::string> a{"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", t.data,
                               "--data.tokenizer", t.tok, "--train.steps", std::to_string(steps),
                               "--train.out_dir", runs_, "--train.run", run};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  std::string disk_, runs_;
  bool mounted_ = false;
};

const char* kNoSpace = "No space left on device";

TEST_F(DiskFull, DataBuild) {
  make_dataset("disk/out.h5");
  std::string jsonl;
  for (int i = 0; i < 6; ++i) {
    write("in/p" + std::to_string(i) + ".png", png_bytes(160, 120, i));
    jsonl += "{\"image\": \"p" + std::to_string(i) + ".png\", \"caption\": \"new\"}\n";
  }
  write("in/caps.jsonl", jsonl);
  const std::vector<std::string> args{"data", "build", "--data.from", "jsonl", "--data.input", "in/caps.jsonl",
                                      "--data.out", "disk/out.h5"};
  replaces(args, "disk/out.h5");
  fill(4);  // less than the images need: a write in the middle fails
  refused(args, {"disk/out.h5: write failed", kNoSpace});
  EXPECT_EQ(on_disk(), std::vector<std::string>{"out.h5"});
}

TEST_F(DiskFull, DataTokenize) {
  make_dataset("disk/ds.h5");
  const RunResult t = run_vlm(
      {"data", "tokenizer", "--data.train", "disk/ds.h5", "--data.vocab", "300", "--data.out", "tok.json"}, dir_);
  ASSERT_EQ(t.code, 0) << t.err;
  const std::vector<std::string> args{"data", "tokenize", "disk/ds.h5", "--data.tokenizer", "tok.json"};
  replaces(args, "disk/ds.h5");
  // The copy the tokens are written into fits; the tokens do not.
  fill(pages_of(path("disk/ds.h5")));
  refused(args, {"disk/ds.h5: write failed", kNoSpace});
  EXPECT_EQ(on_disk(), std::vector<std::string>{"ds.h5"});
}

TEST_F(DiskFull, DataTokenizer) {
  make_dataset("ds.h5");
  write("disk/tok.json", "{\"an\": \"earlier tokenizer\"}");
  const std::vector<std::string> args{"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300",
                                      "--data.out", "disk/tok.json"};
  replaces(args, "disk/tok.json");
  fill(0);
  refused(args, {"disk/tok.json: write failed", kNoSpace});
  EXPECT_EQ(on_disk(), std::vector<std::string>{"tok.json"});
}

TEST_F(DiskFull, Export) {
  const std::vector<std::string> args{"export", "--checkpoint", trained().ckpt, "--out", "disk/hf", "--device", "cpu"};
  const RunResult first = run_vlm(args, dir_);
  ASSERT_EQ(first.code, 0) << first.err;
  const std::vector<std::string> files = on_disk();
  ASSERT_GE(files.size(), 5u);
  for (const std::string& f : files) write("disk/" + f, "an earlier export's " + f);  // so a rewrite would show
  replaces(args, "disk/hf/llm/model.safetensors");
  const uint64_t llm_pages = pages_of(path("disk/hf/llm/model.safetensors"));
  for (const std::string& f : files) write("disk/" + f, "an earlier export's " + f);
  // No page free, then room for the backbone's weights but not the rest: the earlier
  // export stays whole, not mixed with the new one (the export is staged).
  for (const uint64_t free : {uint64_t(0), llm_pages + 4}) {
    fs::remove(disk_ + "/.filler");
    fill(free);
    refused(args, {"disk/hf/", kNoSpace});
    EXPECT_EQ(on_disk(), files);
    for (const std::string& f : files) EXPECT_EQ(read_file(path("disk/" + f)), "an earlier export's " + f) << free;
  }
}

TEST_F(DiskFull, TrainCheckpoint) {
  const std::vector<std::string> first = train("a", 1, {"--train.ckpt_dir", "disk/ck"});
  const RunResult r = run_vlm(first, dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  // The sharded save (docs/checkpoints.md): `latest` and step_1/ with its index, shard
  // and texts.
  const std::vector<std::string> saved = on_disk();
  ASSERT_EQ(saved.size(), 6u);
  const std::string id = saved[1].substr(17, 16), at = "ck/step_1/";  // the save's id
  ASSERT_EQ(saved, (std::vector<std::string>{"ck/latest", at + "config." + id + ".ini", at + "index.json",
                                             at + "options." + id + ".ini", at + "rank_0." + id + ".shard",
                                             at + "tokenizer." + id + ".json"}));
  // No page free: no file can be created; two: the next save (hundreds of KiB) fails in
  // the middle. Nothing of the failed save stays.
  for (const uint64_t free : {0, 2}) {
    fs::remove(disk_ + "/.filler");
    fill(free);
    refused(train("b", 2, {"--train.ckpt_dir", "disk/ck"}), {"disk/ck/step_2", kNoSpace});
    EXPECT_EQ(on_disk(), saved);
  }
}

TEST_F(DiskFull, TrainCheckpointUnderMpirunEndsEveryRank) {
  const std::vector<std::string> first = train("a", 1, {"--train.ckpt_dir", "disk/ck"});
  ASSERT_EQ(run_vlm(first, dir_).code, 0);
  const std::vector<std::string> saved = on_disk();
  fill(2);
  const auto before = snapshot(dir_);
  // Two ranks (dp = 2), each writing its shard; whichever fails reports, and the other
  // ends too: mpirun returns, with status 2.
  std::string cmd = "cd '" + dir_ + "' && timeout -k 10 300 " + test::mpirun(2) + vlm_binary();
  for (const std::string& a : train("b", 2, {"--train.ckpt_dir", "disk/ck", "--train.batch", "4"})) cmd += " '" + a + "'";
  const test::CommandResult m = test::run_command(cmd, runs_);
  EXPECT_NE(m.status, 124) << "a rank hung: " << m.err;
  test::expect_one_error_line(m, "vlm train", "disk/ck/step_2/");
  EXPECT_NE(m.err.find(std::string("write failed (") + kNoSpace + ")"), std::string::npos) << m.err;
  EXPECT_EQ(snapshot(dir_), before);
  EXPECT_EQ(on_disk(), saved);
}

// metrics.jsonl of an earlier run: a page of whole lines.
std::string earlier_metrics() {
  std::string s;
  for (int step = 1; s.size() < kPage; ++step) s += "{\"step\":" + std::to_string(step) + ",\"loss\":1.5}\n";
  s.resize(kPage - 1);
  s.back() = '}';
  return s + "\n";
}

TEST_F(DiskFull, TrainMetricsAndTensorBoard) {
  // The run folder is on the tmpfs; its metrics.jsonl holds an earlier run's lines, which
  // a fresh start moves to metrics.earlier.jsonl (runlog/run_log.h). With space to spare
  // the run writes a new metrics.jsonl; the space config.ini needs is measured then.
  const std::vector<std::string> args = train("m", 1, {"--train.out_dir", "disk", "--train.save_every", "-1"});
  write("disk/m/metrics.jsonl", earlier_metrics());
  replaces(args, "disk/m/metrics.jsonl");
  const uint64_t config_pages = pages_of(path("disk/m/config.ini"));
  // Every file but an earlier run's metrics.jsonl gone.
  auto clean = [&] {
    for (const std::string& f : on_disk()) fs::remove(disk_ + "/" + f);
    write("disk/m/metrics.jsonl", earlier_metrics());
  };
  clean();
  // Room for config.ini and the event file's first page (its first records), none for a
  // page of the new metrics.jsonl: the first metrics line fails, and the new file, which
  // never held a line, is removed; the earlier run's lines are kept, moved aside.
  fill(config_pages + 1);
  RunResult r = run_vlm(args, dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("disk/m/metrics.jsonl: write failed (No space left on device)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("disk/m/metrics.jsonl")));
  EXPECT_EQ(read_file(path("disk/m/metrics.earlier.jsonl")), earlier_metrics());
  for (const std::string& f : on_disk())
    EXPECT_NE(fs::path(f).filename().string().front(), '.') << "a temporary file is left: " << f;
  // Room for config.ini only: the TensorBoard event file's first record fails, and the
  // file, which never held a record, is removed; metrics.jsonl is not touched.
  fs::remove(disk_ + "/.filler");
  clean();
  fill(config_pages);
  r = run_vlm(args, dir_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("disk/m/events.out.tfevents."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": write failed (No space left on device)"), std::string::npos) << r.err;
  EXPECT_EQ(on_disk(), (std::vector<std::string>{"m/config.ini", "m/metrics.jsonl"}));
  EXPECT_EQ(read_file(path("disk/m/metrics.jsonl")), earlier_metrics());
}

TEST_F(DiskFull, TrainTrace) {
  write("disk/trace.json", "{\"traceEvents\":[]}");
  const std::vector<std::string> args = train("t", 1, {"--train.save_every", "-1", "--trace", "disk/trace.json"});
  replaces(args, "disk/trace.json");
  fill(0);
  refused(args, {"--trace disk/trace.json: write failed", kNoSpace});
  EXPECT_EQ(on_disk(), std::vector<std::string>{"trace.json"});
}

}  // namespace
}  // namespace vlm::robustness
