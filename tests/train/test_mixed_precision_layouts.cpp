// Mixed precision (train.precision=bf16) across ranks, on the tiny VLM of the step tests
// (step_rig.h), under mpirun with 1, 2 or 4 ranks (the cast points themselves:
// test_mixed_precision.cpp):
//  - serial == overlap bitwise in bf16 at every layout, with bf16 DP gradient buckets;
//  - every layout (ZeRO-0 and 1, f32 and bf16 gradient buckets, sequence parallelism at
//    tp > 1) matches the bf16 (1,1) run's loss and gradient norm to 1e-2 relative
//    (measured at most 3.3e-3: the bf16 wire and the rounded TP partial sums; fp32
//    layouts match to 1e-5, test_step.cpp); the DP byte formula at the wire's element
//    size equals the communicator's counters.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "optim/dp_grads.h"
#include "optim/optimizer.h"
#include "scheduler/streams.h"
#include "tests/support/mpi.h"
#include "tests/train/step_rig.h"
#include "train/step.h"

namespace vlm {
namespace {

TEST(MixedPrecision, SerialAndOverlapAreBitwiseEqualInBf16) {
  expect_serial_equals_overlap(bf16_config, DType::BF16);  // bf16 buckets
}

// Loss and gradient norm of two steps at every layout (bf16 wire on TP and DP) against
// the bf16 (1,1) run on this rank alone; and the DP byte formula at bf16.
TEST(MixedPrecision, EveryLayoutMatchesOneRankInBf16) {
  Backend& b = cpu_backend();
  const GlobalBatch g = make_batch(11, tiny_config(kImages));
  OptimOptions oo;
  oo.lr = 1e-2;
  auto run = [&](Communicator& tp, Communicator& dp, Communicator& self, int dps, int r, int zero, DType wire,
                 bool sp) {
    VlmConfig c = sharded(bf16_config(kImages / (dps * kM)), zero, dp);
    c.llm.sequence_parallel = sp;
    VlmModel model(c, b, tp, self);
    model.init(5);
    model.refresh_working_weights();
    sched::StreamSet streams(b);
    const std::vector<bool> all(kNumModules, true);
    DpGrads dpg(model.modules(), all, dp, zero, 25, b, wire);
    VlmStep step(model, streams, dpg, all, kM, StepOptions{});
    AdamW opt(model.modules(), all, dpg, b, oo);
    double loss = 0, norm = 0;
    for (int k = 1; k <= 2; ++k) {
      model.zero_grads();
      dp.reset_counters();
      loss = all_reduce_values(dp, b.default_stream(), {step.run(shard(g, c, dps, r, kM))})[0];
      // The DP traffic of the step: every module's gradient arena once (zero = 0: all-
      // reduced; zero = 1: reduce-scattered, the tail all-reduced), at
      // the wire's element size, by the formula and by the counters (+ the loss's f64).
      size_t formula = 0, arenas = 0;
      for (size_t i = 0; i < model.modules().size(); ++i) {
        formula += dpg.bytes(i);
        arenas += size_t(model.modules()[i].table->layout().numel()) * 4;
      }
      if (dp.size() > 1) {
        EXPECT_EQ(formula, arenas / 4 * dtype_size(wire)) << "the byte formula of step " << k;
        EXPECT_EQ(dp.counters().total_bytes(), formula + 8) << "the DP counters of step " << k;
      }
      norm = opt.grad_norm(b.default_stream(), tp);
      opt.step(b.default_stream(), k, oo.lr, 1.f);  // and the bf16 copies
    }
    return std::make_pair(loss, norm);
  };
  auto self1 = test::self_comm("a"), self2 = test::self_comm("b"), self3 = test::self_comm("c");
  const auto ref = run(*self1, *self2, *self3, 1, 0, 0, DType::F32, false);
  for (int tp : layouts_tp()) {
    Layout L(tp);
    const int dp = test::world_size() / tp;
    for (int v = 0; v < (tp > 1 ? 5 : 4); ++v) {  // ZeRO 0/1 x f32/bf16 gradient wire; SP (bf16, ZeRO-0)
      const int zero = v < 4 ? v % 2 : 0;
      const DType wire = v < 2 ? DType::F32 : DType::BF16;
      const bool sp = v == 4;
      const auto got = run(L.groups->tp(), L.groups->dp(), *L.self, dp, L.groups->dp().rank(), zero, wire, sp);
      const double dl = rel(got.first, ref.first), dn = rel(got.second, ref.second);
      SCOPED_TRACE("tp=" + std::to_string(tp) + " dp=" + std::to_string(dp) + " zero=" + std::to_string(zero) +
                   " grad wire " + std::string(dtype_name(wire)) + (sp ? " sp" : ""));
      if (test::world_rank() == 0)
        std::printf("bf16 tp=%d dp=%d zero=%d grad wire %s%s: loss %.3g, grad norm %.3g relative to (1,1)\n", tp, dp,
                    zero, std::string(dtype_name(wire)).c_str(), sp ? " sp" : "", dl, dn);
      EXPECT_LE(dl, 1e-2) << got.first << " vs " << ref.first;
      EXPECT_LE(dn, 1e-2) << got.second << " vs " << ref.second;
    }
  }
}

}  // namespace
}  // namespace vlm
