// run_and_signal (tests/support/signalled_run.h).
#include "tests/support/signalled_run.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/files.h"

namespace vlm::test {

namespace {

namespace fs = std::filesystem;

// The parent pid in /proc/<pid>/stat (the field after the command name, which is in
// parentheses and may hold spaces), or -1.
pid_t parent_of(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// The child of `parent` whose environment holds OMPI_COMM_WORLD_RANK=rank, or -1.
pid_t rank_child(pid_t parent, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || parent_of(name) != parent) continue;
    std::ifstream f(e.path() / "environ", std::ios::binary);
    for (std::string var; std::getline(f, var, '\0');)
      if (var == want) return pid_t(std::stol(name));
  }
  return -1;
}

}  // namespace

SignalledRun run_and_signal(const std::string& cmd, const std::string& dir, const std::function<bool()>& ready,
                            int sig, int rank, double timeout_s) {
  const std::string o = dir + "/stdout.txt", e = dir + "/stderr.txt", shell = "exec " + cmd;
  const pid_t pid = fork();
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    setpgid(0, 0);
    const int fo = open(o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(127);
    dup2(fo, 1), dup2(fe, 2);
    execl("/bin/sh", "sh", "-c", shell.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  SignalledRun r;
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  int ws = 0;
  for (;;) {
    if (waitpid(pid, &ws, WNOHANG) == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
      ADD_FAILURE() << "still running after " << timeout_s << " s (signal " << (r.sent ? "sent" : "not sent")
                    << "), killed: " << cmd;
      break;
    }
    if (!r.sent && ready()) {
      const pid_t target = rank < 0 ? pid : rank_child(pid, rank);
      if (target > 0) r.sent = kill(target, sig) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  r.signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
  r.out = read_file(o);
  r.err = read_file(e);
  return r;
}

}  // namespace vlm::test
