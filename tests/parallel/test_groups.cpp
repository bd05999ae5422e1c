// Group membership under MPI, for every layout of the launched world size: for each
// emulated ranks_per_node (world, world/2) and each tp dividing it, ProcessGroups'
// TP and DP communicators hold exactly the ranks the layout formulas name (checked by
// all-gathering world ranks inside each group). Also node detection (one real node
// here), the refusal of invalid layouts on every rank, and the 16-rank printout.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/tensor.h"
#include "parallel/groups.h"
#include "parallel/topology.h"
#include "tests/support/mpi.h"

namespace vlm {
namespace {

using test::world_size;

// World ranks of the members of `comm`, in group-rank order.
std::vector<int> members(Communicator& comm, int world_rank) {
  Stream& s = cpu_backend().default_stream();
  Tensor in = Tensor::from_vector(std::vector<int32_t>{world_rank}, Shape{1});
  Tensor out = Tensor::from_vector(std::vector<int32_t>(size_t(comm.size()), -1), Shape{comm.size()});
  comm.all_gather(s, out, in);
  const int32_t* p = out.ptr<int32_t>();
  return {p, p + comm.size()};
}

TEST(Groups, MembershipForEveryLayout) {
  const int world = world_size();
  for (int rpn : {world, world / 2}) {
    if (rpn < 1 || world % rpn) continue;
    for (int tp = 1; tp <= rpn; ++tp) {
      if (rpn % tp) continue;
      SCOPED_TRACE(cat("world ", world, " ranks_per_node ", rpn, " tp ", tp));
      ParallelOptions o;
      o.tp = tp;
      o.ranks_per_node = rpn;
      o.timeout_s = 60;
      const Topology t = detect_topology(o);
      ASSERT_EQ(t.ranks_per_node(), rpn);
      ASSERT_EQ(t.num_nodes(), world / rpn);
      ProcessGroups g(t, DeviceKind::CPU, o.timeout_s);
      const RankPlace me = t.self();
      EXPECT_EQ(g.world().size(), world);
      EXPECT_EQ(g.world().rank(), me.rank);
      EXPECT_EQ(g.tp().size(), tp);
      EXPECT_EQ(g.tp().rank(), me.tp_rank);
      EXPECT_EQ(g.dp().size(), world / tp);
      EXPECT_EQ(g.dp().rank(), me.dp_rank);
      EXPECT_EQ(g.tp().name(), cat("tp[", me.tp_group, "]"));
      EXPECT_EQ(g.dp().name(), cat("dp[", me.dp_group, "]"));
      EXPECT_EQ(members(g.tp(), me.rank), t.tp_members(me.tp_group));
      EXPECT_EQ(members(g.dp(), me.rank), t.dp_members(me.dp_group));
      for (int r : t.tp_members(me.tp_group)) EXPECT_EQ(t.place(r).node, me.node);
    }
  }
}

TEST(Groups, DetectsOneNodeOnThisMachine) {
  ParallelOptions o;  // ranks_per_node = 0: MPI_COMM_TYPE_SHARED
  const Topology t = detect_topology(o);
  EXPECT_EQ(t.ranks_per_node(), world_size());
  EXPECT_EQ(t.num_nodes(), 1);
  EXPECT_FALSE(t.emulated_nodes());
}

TEST(Groups, EveryRankRefusesAnInvalidLayout) {
  const int world = world_size();
  ParallelOptions o;
  o.tp = 3;  // divides none of 2, 4, 8, 16
  std::string msg;
  try {
    detect_topology(o);
  } catch (const UserError& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, cat("parallel.tp=3 does not divide the world size ", world, " (world must equal tp x dp)"));
  if (world >= 4) {
    o.tp = world / 2;
    o.ranks_per_node = world / 4 > 0 ? world / 4 : 1;
    msg.clear();
    try {
      detect_topology(o);
    } catch (const UserError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("a TP group must stay inside one node"), std::string::npos) << msg;
  }
}

TEST(Groups, PrintsTheSixteenRankLayout) {
  if (world_size() != 16) GTEST_SKIP() << "needs 16 ranks";
  ParallelOptions o;
  o.tp = 8;
  o.ranks_per_node = 8;
  const Topology t = detect_topology(o);
  EXPECT_EQ(t.num_nodes(), 2);
  EXPECT_EQ(t.dp(), 2);
  if (t.world_rank() == 0) std::printf("%s", t.layout_table().c_str());
}

}  // namespace
}  // namespace vlm
