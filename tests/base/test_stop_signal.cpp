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
  struct sigaction ign = {}, before = {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ASSERT_EQ(sigaction(SIGINT, &ign, &before), 0);
  {
    StopSignal stop;
    std::raise(SIGINT);
    EXPECT_EQ(stop.pending(), 0);
  }
  struct sigaction now = {};
  sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  sigaction(SIGINT, &before, nullptr);
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
  struct sigaction mine = {}, before = {};
  mine.sa_handler = own_handler;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &mine, &before), 0);
  {
    StopSignal stop;
    std::raise(SIGUSR1);
    EXPECT_EQ(g_own, 0);  // ours caught it
    stop.take();
  }
  std::raise(SIGUSR1);
  EXPECT_EQ(g_own, SIGUSR1);
  sigaction(SIGUSR1, &before, nullptr);
}

TEST(StopSignal, TheExitCodeIsTheShells) {
  EXPECT_EQ(Interrupted(SIGTERM).exit_code(), 143);
  EXPECT_EQ(Interrupted(SIGINT).exit_code(), 130);
  EXPECT_EQ(Interrupted(SIGUSR1).exit_code(), 138);
  EXPECT_STREQ(Interrupted(SIGUSR1).what(), "stopped by SIGUSR1");
  EXPECT_EQ(Interrupted(0).exit_code(), kExitTimeLimit);  // no signal: the work's own time limit
  EXPECT_STREQ(Interrupted(0).what(), "stopped at its time limit");
}

}  // namespace
}  // namespace vlm
