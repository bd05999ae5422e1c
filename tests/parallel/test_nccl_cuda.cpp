// The NCCL communicator (parallel/nccl/) on device tensors, under mpirun with 2 or 4
// ranks: the checks of test_collectives.cpp (collective_checks.h: every collective and
// point-to-point operation, f32/f64/i32, asynchronous handles, byte counters) on the
// world, TP and DP groups of a TP = 2 layout; the TP region operators of
// test_regions.cpp (region_checks.h, f32 and bf16 wire) on the world and TP groups and on
// an NCCL group of one rank; and the VLM training step on CUDA at every layout the world
// allows, at every ZeRO level 0-3, against the one-rank CUDA run (step_rig.h: loss and
// gradient norm of two steps within 1e-4, the updated weights at tp = 1 within 1e-3 of
// their scale; not bitwise: atomics in the embedding gradient and NCCL's reduction order).
// Ranks and GPUs: each rank takes GPU (node-local rank % GPUs) (bind_local_device). When
// ranks share a GPU, NCCL refuses two members of one communicator on one device unless
// they look like separate hosts: each rank then gets its own NCCL_HOSTID, and NCCL's
// socket transport runs over loopback (NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1, unless
// set). That proves the ordering and the semantics of our calls, not NCCL's speed.
// Without a GPU every test skips with the reason.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "parallel/runtime.h"
#include "tests/parallel/collective_checks.h"
#include "tests/parallel/region_checks.h"
#include "tests/train/step_rig.h"

namespace vlm {
namespace {

// Binds this rank's GPU (as start_runtime will) and, when another rank of the node has
// the same one, makes this rank a host of its own for NCCL (see above). Collective over
// MPI_COMM_WORLD; before the first NCCL call.
void prepare_nccl_on_shared_gpus() {
  const int device = bind_local_device();
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, test::world_rank(), MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  std::vector<int> devices(size_t(n), -1);
  MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  int sharing = 0;
  for (int d : devices) sharing += d == device;
  if (sharing > 1) {
    setenv("NCCL_HOSTID", ("vlm-test-rank-" + std::to_string(test::world_rank())).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
  }
  if (test::world_rank() == 0)
    std::printf("test_nccl_cuda: %d rank(s), GPU %d of rank 0 shared by %d rank(s) of its node%s\n",
                test::world_size(), device, sharing, sharing > 1 ? " (NCCL_HOSTID per rank, sockets over lo)" : "");
}

// The device groups of a TP = 2 layout and an NCCL group of one rank, made once.
struct Groups {
  Runtime rt;
  std::unique_ptr<Communicator> self;
};

RuntimeOptions tp2_cuda() {
  RuntimeOptions o;
  o.device = "cuda";
  o.parallel.tp = 2;
  o.parallel.timeout_s = 120;
  return o;
}

Groups& groups() {
  // Never destroyed: the communicators would outlive MPI and the CUDA runtime at exit.
  static Groups* gs = [] {
    prepare_nccl_on_shared_gpus();
    return new Groups{start_runtime(tp2_cuda()), test::self_comm("self", DeviceKind::CUDA)};
  }();
  return *gs;
}

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason()

TEST(NcclCuda, CollectivesWorld) {
  SKIP_WITHOUT_GPU();
  test::check_everything(groups().rt.groups().world(), cuda_backend());
}
TEST(NcclCuda, CollectivesTensorParallelGroup) {
  SKIP_WITHOUT_GPU();
  test::check_everything(groups().rt.groups().tp(), cuda_backend());
}
TEST(NcclCuda, CollectivesDataParallelGroup) {
  SKIP_WITHOUT_GPU();
  test::check_everything(groups().rt.groups().dp(), cuda_backend());
}
TEST(NcclCuda, AsyncHandlesCompleteInAnyWaitOrder) {
  SKIP_WITHOUT_GPU();
  test::check_async_handles(groups().rt.groups().world(), cuda_backend());
}
TEST(NcclCuda, ByteCountersFollowTheFormula) {
  SKIP_WITHOUT_GPU();
  ProcessGroups& g = groups().rt.groups();
  for (Communicator* c : {&g.world(), &g.tp(), &g.dp()})
    test::check_byte_counters(*c, cuda_backend(), test::world_rank() == 0);
}

TEST(NcclCuda, RegionsWorldGroup) {
  SKIP_WITHOUT_GPU();
  test::check_regions(groups().rt.groups().world(), cuda_backend());
  test::check_bf16_wire(groups().rt.groups().world(), cuda_backend());
}
TEST(NcclCuda, RegionsTensorParallelGroupOfTwo) {
  SKIP_WITHOUT_GPU();
  test::check_regions(groups().rt.groups().tp(), cuda_backend());
  test::check_bf16_wire(groups().rt.groups().tp(), cuda_backend());
}
TEST(NcclCuda, RegionsGroupOfOneIsIdentity) {
  SKIP_WITHOUT_GPU();
  test::check_regions(*groups().self, cuda_backend());
  test::check_bf16_wire(*groups().self, cuda_backend());
}

TEST(NcclCuda, EveryLayoutStepMatchesOneRank) {
  SKIP_WITHOUT_GPU();
  groups();  // the NCCL set-up above, before the layouts' communicators
  expect_every_layout_matches_one_rank(cuda_backend(), 1e-4, 1e-3);
}

}  // namespace
}  // namespace vlm
