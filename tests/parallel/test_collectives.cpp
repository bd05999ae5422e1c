// Every collective of the MPI communicator against hand-computed results on host
// tensors (f32, f64, i32), on the world group and on the TP and DP groups of a TP=2
// layout (at 2 ranks the DP group has size 1); the asynchronous handles; and the byte
// counters against the formula of communicator.h (the checks: collective_checks.h,
// which test_nccl_cuda.cpp runs on device tensors).
#include <gtest/gtest.h>
#include <mpi.h>

#include "parallel/runtime.h"
#include "tests/parallel/collective_checks.h"

namespace vlm {
namespace {

// The host groups of a TP=2 layout (nodes detected), started once per binary.
RuntimeOptions tp2() {
  RuntimeOptions o;  // device cpu
  o.parallel.tp = 2;
  o.parallel.timeout_s = 60;
  return o;
}
ProcessGroups& groups() {
  static Runtime rt = start_runtime(tp2());
  return rt.groups();
}

TEST(Collectives, World) { test::check_everything(groups().world(), cpu_backend()); }
TEST(Collectives, TensorParallelGroup) { test::check_everything(groups().tp(), cpu_backend()); }
TEST(Collectives, DataParallelGroup) { test::check_everything(groups().dp(), cpu_backend()); }

TEST(Collectives, AsyncHandlesCompleteInAnyWaitOrder) { test::check_async_handles(groups().world(), cpu_backend()); }

TEST(Collectives, ByteCountersFollowTheFormula) {
  for (Communicator* c : {&groups().world(), &groups().tp(), &groups().dp()})
    test::check_byte_counters(*c, cpu_backend(), groups().topology().world_rank() == 0);
}

}  // namespace
}  // namespace vlm
