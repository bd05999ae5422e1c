// Each tensor-parallel region operator, forward and backward, against the math it
// claims (regions.h), on the world group (p = world size), on the TP group of a TP=2
// layout, and on a group of one rank (identity: plain copies, no communication), on
// host tensors. The same ops with the bf16 wire (train.precision=bf16) on values exact
// in bf16: the same results in half the bytes (bf16 reductions through the MPI
// communicator's own bf16 operations). The checks: region_checks.h (test_nccl_cuda.cpp
// runs them on device tensors).
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "parallel/mpi/mpi_communicator.h"
#include "parallel/runtime.h"
#include "tests/parallel/region_checks.h"

namespace vlm {
namespace {

// The host groups of a TP=2 layout (nodes detected) and a group of one, made once.
RuntimeOptions tp2() {
  RuntimeOptions o;  // device cpu
  o.parallel.tp = 2;
  o.parallel.timeout_s = 60;
  return o;
}
struct Groups {
  Runtime rt;
  std::unique_ptr<MpiCommunicator> self;
};

Groups& groups() {
  static Groups gs{start_runtime(tp2()), std::make_unique<MpiCommunicator>(MPI_COMM_SELF, "self", 60.0)};
  return gs;
}

TEST(Regions, WorldGroup) { test::check_regions(groups().rt.groups().world(), cpu_backend()); }
TEST(Regions, TensorParallelGroupOfTwo) { test::check_regions(groups().rt.groups().tp(), cpu_backend()); }
TEST(Regions, GroupOfOneIsIdentity) { test::check_regions(*groups().self, cpu_backend()); }

TEST(Regions, Bf16WireWorldGroup) { test::check_bf16_wire(groups().rt.groups().world(), cpu_backend()); }
TEST(Regions, Bf16WireTensorParallelGroupOfTwo) { test::check_bf16_wire(groups().rt.groups().tp(), cpu_backend()); }
TEST(Regions, Bf16WireGroupOfOneIsIdentity) { test::check_bf16_wire(*groups().self, cpu_backend()); }

}  // namespace
}  // namespace vlm
