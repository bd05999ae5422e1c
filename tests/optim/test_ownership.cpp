// Ownership of the training state (optim/ownership.h), for arenas of 0..40 elements over
// 1..5 DP ranks at ZeRO 0 and 1, against the rule written out: s = floor(n / p), block r
// = [r s, (r + 1) s), tail [p s, n):
//  - the DP group writes every element exactly once (blocks, DP rank 0 the tail), and
//    only TP rank 0 writes the TP-replicated parameters;
//  - every rank holds every value; the moments of the whole arena at ZeRO 0 (or one DP
//    rank), of its block then the tail at ZeRO 1;
//  - held_position places an element in a buffer of held ranges back to back.
#include <gtest/gtest.h>

#include "optim/ownership.h"

namespace vlm {
namespace {

std::vector<int> marks(int64_t n, const std::vector<FlatRange>& ranges) {
  std::vector<int> m(size_t(n), 0);
  for (const FlatRange& r : ranges)
    for (int64_t e = r.begin; e < r.end; ++e) ++m[size_t(e)];
  return m;
}

TEST(Ownership, TheDpGroupWritesEachElementOnceAndHoldsWhatItUpdates) {
  for (int64_t n = 0; n <= 40; ++n)
    for (int p = 1; p <= 5; ++p)
      for (int zero : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " dp=" << p << " zero=" << zero);
        std::vector<int> written(size_t(n), 0);
        const int64_t s = n / p;
        for (int r = 0; r < p; ++r) {
          for (int tp_rank : {0, 1}) {
            const StateShare sh = state_share(n, {2, tp_rank, p, r, zero}, true);
            EXPECT_EQ(sh.writes_tp_replicated, tp_rank == 0);
            if (tp_rank == 1) continue;
            for (size_t e = 0; e < written.size(); ++e) written[e] += marks(n, sh.writes)[e];
            EXPECT_EQ(marks(n, sh.values), std::vector<int>(size_t(n), 1));
            std::vector<FlatRange> want{{0, n}};
            if (zero == 1 && p > 1) want = {{r * s, (r + 1) * s}, {p * s, n}};
            std::erase_if(want, [](const FlatRange& x) { return x.empty(); });
            EXPECT_EQ(sh.moments, want);
            EXPECT_TRUE(state_share(n, {2, tp_rank, p, r, zero}, false).moments.empty()) << "frozen: no moments";
            const DpShare d = dp_share(n, p, r);
            EXPECT_EQ(d.block, (FlatRange{r * s, (r + 1) * s}));
            EXPECT_EQ(d.tail, (FlatRange{p * s, n}));
          }
        }
        EXPECT_EQ(written, std::vector<int>(size_t(n), 1));
      }
  EXPECT_EQ(effective_zero(1, 1), 0);
  EXPECT_EQ(effective_zero(1, 2), 1);
}

TEST(Ownership, HeldPositionCountsTheRangesBackToBack) {
  const std::vector<FlatRange> held{{10, 14}, {20, 22}};
  EXPECT_EQ(held_position(held, 10), 0);
  EXPECT_EQ(held_position(held, 13), 3);
  EXPECT_EQ(held_position(held, 20), 4);
  EXPECT_EQ(held_position(held, 21), 5);
  EXPECT_EQ(held_position(held, 14), -1);
  EXPECT_EQ(held_position(held, 9), -1);
}

}  // namespace
}  // namespace vlm
