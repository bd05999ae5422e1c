// StopSignal (base/stop_signal.h), signals raised in this process; what would end the
// process runs in a death test's child.
#include "base/stop_signal.h"

#include <gtest/gtest.h>

#include <csignal>
#include <stdexcept>

namespace vlm {
namespace {

volatile std::sig_atomic_t g_own = 0;
extern "C" void own_handler(int sig) { g_own = sig; }

// The disposition `handler` for `sig` (a function or SIG_IGN) while it lives, the one
// before it restored after, also when an assertion ends the test early.
class Disposition {
 public:
  Disposition(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction sa = {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    ok_ = sigaction(sig, &sa, &before_) == 0;
  }
  ~Disposition() { sigaction(sig_, &before_, nullptr); }
  bool ok() const { return ok_; }

 private:
  int sig_;
  struct sigaction before_ = {};
  bool ok_ = false;
};

void (*handler_of(int sig))(int) {
  struct sigaction now = {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignal, TheFirstSignalIsPendingUntilTaken) {
  StopSignal stop;
  EXPECT_EQ(stop.pending(), 0);
  std::raise(SIGTERM);
  EXPECT_EQ(stop.pending(), SIGTERM);
  stop.take();
}

TEST(StopSignal, EachOfTheThreeSignalsIsCaught) {
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    StopSignal stop;
    std::raise(sig);
    EXPECT_EQ(stop.pending(), sig) << signal_name(sig);
    stop.take();
  }
}

TEST(StopSignal, ASecondSigintEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignal stop;
        std::raise(SIGUSR1);
        std::raise(SIGINT);  // the default action of SIGINT: the process ends here
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "");
}

TEST(StopSignal, ARepeatedSigtermOrSigusr1ChangesNothing) {  // a scheduler's duplicate
  StopSignal stop;
  std::raise(SIGTERM);
  std::raise(SIGTERM);
  std::raise(SIGUSR1);
  EXPECT_EQ(stop.pending(), SIGTERM);
  stop.take();
}

TEST(StopSignal, ASignalIgnoredAtTheStartStaysIgnored) {
  const Disposition ignored(SIGINT, SIG_IGN);
  ASSERT_TRUE(ignored.ok());
  {
    StopSignal stop;
    std::raise(SIGINT);
    EXPECT_EQ(stop.pending(), 0);
  }
  EXPECT_EQ(handler_of(SIGINT), SIG_IGN);
}

TEST(StopSignal, ASignalNotTakenIsRaisedAgainWhenItEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        { StopSignal stop; std::raise(SIGTERM); }
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

TEST(StopSignal, AnErrorWhileASignalIsPendingIsReportedNotHidden) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        try {
          StopSignal stop;
          std::raise(SIGTERM);
          throw std::runtime_error("the save failed");  // unwinds through the StopSignal
        } catch (const std::runtime_error&) {
          std::_Exit(2);  // the error's exit code, as the command reports it
        }
      },
      ::testing::ExitedWithCode(2), "");
}

TEST(StopSignal, TheHandlersItReplacedComeBack) {
  const Disposition mine(SIGUSR1, own_handler);
  ASSERT_TRUE(mine.ok());
  {
    StopSignal stop;
    std::raise(SIGUSR1);
    EXPECT_EQ(g_own, 0);  // ours caught it
    stop.take();
  }
  std::raise(SIGUSR1);
  EXPECT_EQ(g_own, SIGUSR1);
}

TEST(StopSignal, TheExitCodeIsTheShells) {
  EXPECT_EQ(Interrupted(SIGTERM, true).exit_code(), 143);
  EXPECT_EQ(Interrupted(SIGINT, true).exit_code(), 130);
  EXPECT_EQ(Interrupted(SIGUSR1, true).exit_code(), 138);
  EXPECT_STREQ(Interrupted(SIGUSR1, true).what(), "stopped by SIGUSR1");
  EXPECT_EQ(Interrupted(0, true).exit_code(), kExitTimeLimit);  // no signal: the work's own time limit
  EXPECT_STREQ(Interrupted(0, true).what(), "stopped at its time limit");
  EXPECT_FALSE(Interrupted(SIGTERM, false).saved());
}

}  // namespace
}  // namespace vlm
