// main() of the multi-rank GoogleTest binaries (run under mpirun by ctest, see
// CMakeLists.txt). Initialises MPI, lets only rank 0 print gtest's normal output,
// makes every other rank print just its failures (prefixed "[rank r]"), and returns
// non-zero on EVERY rank when ANY rank failed a test (so mpirun's status is the
// verdict). The test timeout of the communicators stays the default unless a test
// sets one, so a test that leaves a peer waiting aborts with a message, never hangs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "parallel/mpi/mpi_session.h"

namespace {

// Prints failed assertions of a non-root rank, one line each.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  vlm::MpiSession mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(mpi.rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (mpi.rank() == 0 && failed) std::fprintf(stderr, "some rank failed a test (see [rank r] lines)\n");
  return failed;
}
