// Helpers of the malformed-input suite (tests/robustness): every case runs the real `vlm`
// binary on an input it made in a fresh folder and checks the promise of docs/errors.md
// for bad input: exit code 2, exactly one line on stderr ("vlm <command>: error: ..."),
// naming the file or the key/option at fault, no hang (a time limit), and no file of the
// case folder created, changed or removed (FNV-1a checksums before and after), so an
// existing output survives the failure.
//   TEST_F(Robust, Something) {
//     write("x.cfg", "[parallel]\ntp = \"2\n");
//     refused({"topology", "--config", "x.cfg"}, {"x.cfg:2", "tp"});
//   }
// Paths in the arguments are relative to the case folder (the child runs there).
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

namespace vlm::robustness {

namespace fs = std::filesystem;

inline const char* vlm_binary() { return VLM_BINARY; }
inline std::string source_dir() { return VLM_SOURCE_DIR; }
inline std::string hf_tiny(const std::string& name) { return source_dir() + "/tests/data/hf_tiny/" + name; }

struct RunOptions {
  int timeout_s = 120;                   // a run past this is a hang: killed, the case fails
  uint64_t file_size_limit = 0;          // RLIMIT_FSIZE of the child (0 = none), SIGXFSZ ignored
  std::vector<std::string> env;          // extra NAME=value entries
};

struct RunResult {
  int code = -1;           // exit status; 128 + signal when killed by one
  bool timed_out = false;
  std::string out, err;
};

// Runs `vlm args...` in folder `cwd`, capturing stdout and stderr.
inline RunResult run_vlm(const std::vector<std::string>& args, const std::string& cwd, const RunOptions& o = {}) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    if (o.file_size_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
      struct rlimit r {rlim_t(o.file_size_limit), rlim_t(o.file_size_limit)};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    for (const auto& e : o.env) putenv(const_cast<char*>(e.c_str()));
    // In an ASan build: no leak check of commands that start MPI (all but `data` and
    // `plan`: Open MPI does not free its memory at exit; tests/lsan.supp). Memory errors
    // are still checked.
    static std::string asan;
    if (!args.empty() && args[0] != "data" && args[0] != "plan") {
      const char* old = getenv("ASAN_OPTIONS");
      asan = std::string("ASAN_OPTIONS=") + (old ? old : "") + ":detect_leaks=0";
      putenv(asan.data());
    }
    std::vector<char*> argv{const_cast<char*>(vlm_binary())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(vlm_binary(), argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  RunResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sink[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, int(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        if (sink[k]->size() < (size_t(16) << 20)) sink[k]->append(buf, size_t(n));
      } else {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every regular file under `dir` (relative path -> checksum; size is part of the hash).
inline std::map<std::string, uint64_t> snapshot(const std::string& dir) {
  std::map<std::string, uint64_t> m;
  for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied))
    if (e.is_regular_file()) m[fs::relative(e.path(), dir).string()] = fnv1a(read_file(e.path().string()));
  return m;
}

// A small PNG (w x h, colour from seed) made with OpenCV, as the converters read them.
inline std::string png_bytes(int w, int h, int seed) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(seed * 40 + x), uchar(y * 3), uchar(seed * 7));
  std::vector<uchar> buf;
  cv::imencode(".png", m, buf);
  return std::string(buf.begin(), buf.end());
}

// One case: a fresh folder, files written into it, and the refusal check.
class Robust : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            ("vlm_rob_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void write(const std::string& rel, const std::string& bytes) const { write_file(path(rel), bytes); }

  // A valid dataset `rel` (3 PNG images with a caption each: "picture number i") built by
  // `vlm data build` from src/caps.jsonl and src/im{0,1,2}.png, which stay in the folder.
  // Built once per test binary, then copied.
  void make_dataset(const std::string& rel) const {
    struct Cache {
      std::string dir;
      ~Cache() { fs::remove_all(dir); }
    };
    static const Cache cache{[] {
      const std::string d = (fs::temp_directory_path() / ("vlm_rob_" + std::to_string(getpid()) + "_dataset")).string();
      fs::remove_all(d);
      std::string jsonl;
      for (int i = 0; i < 3; ++i) {
        write_file(d + "/src/im" + std::to_string(i) + ".png", png_bytes(24 + i, 20, i));
        jsonl.append("{\"image\": \"im").append(std::to_string(i)).append(".png\", \"caption\": \"picture number ");
        jsonl.append(std::to_string(i)).append("\"}\n");
      }
      write_file(d + "/src/caps.jsonl", jsonl);
      const RunResult r =
          run_vlm({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "ds.h5"}, d);
      if (r.code != 0) throw std::runtime_error("vlm data build of the base dataset failed: " + r.err);
      return d;
    }()};
    fs::copy(cache.dir + "/src", path("src"), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    fs::copy_file(cache.dir + "/ds.h5", path(rel), fs::copy_options::overwrite_existing);
  }

  // A tokenizer `out` (vocabulary 280) trained by `vlm data tokenizer` on dataset `data`.
  void make_tokenizer(const std::string& data, const std::string& out = "tok.json") const {
    const RunResult r =
        run_vlm({"data", "tokenizer", "--data.train", data, "--data.vocab", "280", "--data.out", out}, dir_);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  // Runs vlm and checks the promise: exit code 2, one line on stderr starting with "vlm"
  // and holding every needle, every file of the case folder unchanged.
  RunResult refused(const std::vector<std::string>& args, const std::vector<std::string>& needles,
                    const RunOptions& o = {}) const {
    const auto before = snapshot(dir_);
    const RunResult r = run_vlm(args, dir_, o);
    std::string cmd;
    for (const auto& a : args) cmd.append(" ").append(a, 0, 80);
    EXPECT_FALSE(r.timed_out) << "hang: vlm" << cmd;
    EXPECT_EQ(r.code, 2) << "vlm" << cmd << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "vlm" << cmd << "\nstderr: " << r.err;
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n' && r.err.rfind("vlm", 0) == 0 &&
                r.err.find(": error: ") != std::string::npos)
        << "vlm" << cmd << "\nstderr: " << r.err;
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in: " << r.err;
    EXPECT_EQ(snapshot(dir_), before) << "files of the case folder changed: vlm" << cmd;
    return r;
  }

  std::string dir_;
};

}  // namespace vlm::robustness
