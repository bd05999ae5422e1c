// StopSignal (base/stop_signal.h).
#include "base/stop_signal.h"

#include <atomic>
#include <exception>

#include "base/error.h"

namespace vlm {

namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};
// The first signal since the StopSignal was made, and whether one lives. Lock-free
// atomics: the only state a handler may touch.
std::atomic<int> g_pending{0};
std::atomic<bool> g_live{false};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_pending.compare_exchange_strong(none, sig)) return;
  // A second SIGINT (Ctrl-C again): the default action, at once (signal() and raise()
  // are async-signal-safe). A repeated SIGTERM or SIGUSR1 is a scheduler's duplicate
  // (srun and slurmstepd may both send one): the stop under way goes on.
  if (sig != SIGINT) return;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

StopSignal::StopSignal() {
  VLM_ASSERT(!g_live.exchange(true), "two StopSignals at once");
  g_pending.store(0);
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int k = 0; k < 3; ++k) {
    VLM_ASSERT(sigaction(kSignals[k], nullptr, &old_[k]) == 0, "sigaction ", kSignals[k]);
    if (old_[k].sa_handler == SIG_IGN) continue;  // ignored when we started (nohup, a background job): stays so
    VLM_ASSERT(sigaction(kSignals[k], &sa, nullptr) == 0, "sigaction ", kSignals[k]);
  }
}

StopSignal::~StopSignal() {
  for (int k = 0; k < 3; ++k) sigaction(kSignals[k], &old_[k], nullptr);
  const int sig = g_pending.exchange(0);
  g_live.store(false);
  // With the handlers restored: as if we had never caught it. Not while an exception
  // unwinds: its error is reported and ends the process (exit code 2) instead.
  if (sig != 0 && !taken_ && std::uncaught_exceptions() == 0) std::raise(sig);
}

int StopSignal::pending() const { return g_pending.load(); }

void StopSignal::take() { taken_ = true; }

Interrupted::Interrupted(int signal, bool saved)
    : std::runtime_error(signal ? std::string("stopped by ").append(signal_name(signal)) : "stopped at its time limit"),
      signal_(signal),
      saved_(saved) {}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace vlm
