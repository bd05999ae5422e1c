// Layout arithmetic of Topology::compute (no MPI): every valid layout of 2, 4, 8 and
// 16 ranks against the formulas, hand-checked places for 16 ranks as 2 emulated nodes x
// TP 8, the refusal of invalid layouts (message checked), and the printed table.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "parallel/topology.h"
#include "tests/support/errors.h"

namespace vlm {
namespace {

// The message that refuses the layout ("" when it is valid).
std::string error_of(int world, int rpn, int tp) {
  return test::error_of([&] { Topology::compute(world, 0, rpn, tp); });
}

TEST(TopologyLayout, EveryValidLayoutPartitionsTheWorld) {
  for (int world : {1, 2, 4, 8, 16}) {
    for (int rpn = 1; rpn <= world; ++rpn) {
      if (world % rpn) continue;
      for (int tp = 1; tp <= rpn; ++tp) {
        if (rpn % tp) continue;
        const Topology t = Topology::compute(world, 0, rpn, tp);
        ASSERT_EQ(t.dp() * t.tp(), world);
        std::set<int> tp_seen, dp_seen;
        for (int g = 0; g < t.dp(); ++g) {
          const std::vector<int> m = t.tp_members(g);
          ASSERT_EQ(int(m.size()), tp);
          for (int i = 0; i < tp; ++i) {
            const RankPlace p = t.place(m[size_t(i)]);
            EXPECT_EQ(p.tp_group, g);
            EXPECT_EQ(p.tp_rank, i);
            EXPECT_EQ(p.node, t.place(m[0]).node) << "TP group " << g << " spans nodes";
            tp_seen.insert(m[size_t(i)]);
          }
        }
        for (int g = 0; g < tp; ++g) {
          const std::vector<int> m = t.dp_members(g);
          ASSERT_EQ(int(m.size()), world / tp);
          for (int i = 0; i < int(m.size()); ++i) {
            EXPECT_EQ(t.place(m[size_t(i)]).dp_group, g);
            EXPECT_EQ(t.place(m[size_t(i)]).dp_rank, i);
            dp_seen.insert(m[size_t(i)]);
          }
        }
        EXPECT_EQ(int(tp_seen.size()), world);
        EXPECT_EQ(int(dp_seen.size()), world);
      }
    }
  }
}

TEST(TopologyLayout, SixteenRanksAsTwoNodesOfTp8) {
  const Topology t = Topology::compute(16, 13, 8, 8, true);
  EXPECT_EQ(t.num_nodes(), 2);
  EXPECT_EQ(t.dp(), 2);
  EXPECT_EQ(t.tp_members(0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(t.tp_members(1), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(t.dp_members(0), (std::vector<int>{0, 8}));
  EXPECT_EQ(t.dp_members(5), (std::vector<int>{5, 13}));
  const RankPlace p = t.self();  // rank 13: node 1, local 5, TP group 1 rank 5, DP group 5 rank 1
  EXPECT_EQ(p.rank, 13);
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.local_rank, 5);
  EXPECT_EQ(p.tp_group, 1);
  EXPECT_EQ(p.tp_rank, 5);
  EXPECT_EQ(p.dp_group, 5);
  EXPECT_EQ(p.dp_rank, 1);
  // 16 ranks, 4 nodes of 4, TP 2: rank 6 is node 1 local 2, TP group 3 rank 0, DP group 0 rank 3.
  const RankPlace q = Topology::compute(16, 6, 4, 2).self();
  EXPECT_EQ(q.node, 1);
  EXPECT_EQ(q.local_rank, 2);
  EXPECT_EQ(q.tp_group, 3);
  EXPECT_EQ(q.tp_rank, 0);
  EXPECT_EQ(q.dp_group, 0);
  EXPECT_EQ(q.dp_rank, 3);
}

TEST(TopologyLayout, RefusesInvalidLayouts) {
  EXPECT_EQ(error_of(6, 6, 4), "parallel.tp=4 does not divide the world size 6 (world must equal tp x dp)");
  EXPECT_EQ(error_of(16, 8, 16),
            "parallel.tp=16 does not divide the 8 ranks per node: a TP group must stay inside one node "
            "(TP group 0 = ranks 0..15 would span nodes 0 and 1)");
  EXPECT_EQ(error_of(12, 6, 4),
            "parallel.tp=4 does not divide the 6 ranks per node: a TP group must stay inside one node "
            "(TP group 1 = ranks 4..7 would span nodes 0 and 1)");
  EXPECT_EQ(error_of(8, 3, 1),
            "ranks per node 3 does not divide the world size 8 (set parallel.ranks_per_node to a divisor, "
            "or launch the same number of ranks on every node)");
  EXPECT_EQ(error_of(4, 4, 0), "parallel.tp must be >= 1, got 0");
}

TEST(TopologyLayout, PrintsOneRowPerRank) {
  Topology t = Topology::compute(4, 0, 2, 2, true);
  t.set_hostnames({"a", "a", "b", "b"});
  EXPECT_EQ(t.layout_table(),
            "topology: world 4 = tp 2 x dp 2; 2 node(s) x 2 ranks (emulated: parallel.ranks_per_node)\n"
            " rank  host  node  local  tp_group  tp_rank  dp_group  dp_rank\n"
            "    0  a        0      0         0        0         0        0\n"
            "    1  a        0      1         0        1         1        0\n"
            "    2  b        1      0         1        0         0        1\n"
            "    3  b        1      1         1        1         1        1\n");
}

}  // namespace
}  // namespace vlm
