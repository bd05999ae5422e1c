// No device allocation inside a step (docs/gpu.md, "Memory inside a step"): the tiny VLM
// of step_rig.h, four optimizer steps (the step, the gradient norm, AdamW, the bf16
// working copies) on four different global batches (so the token counts change from
// step to step), in serial and in overlap mode, at fp32 and bf16. The backend's count of
// device allocations (device_allocations, core/backend.h) must not move after the first
// step: every buffer, workspace and scratch is planned when the model is built (or, for
// the per-stream scratch, taken once at its first use). On the CPU backend here; the
// same code path on CUDA (skipped without a GPU), where the count is of cudaMalloc calls.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tests/train/step_rig.h"

namespace vlm {
namespace {

constexpr int kSteps = 4;

// Allocations during steps 2..kSteps of a fresh model (and the steps run, so a skipped
// step cannot pass).
struct Counted {
  uint64_t after_first = 0;
  int steps = 0;
  double last_loss = 0;
};

Counted run(Backend& b, Precision p, sched::Mode mode) {
  VlmConfig c = tiny_config(kImages / kM);
  c.precision = p;
  const std::unique_ptr<Communicator> tp = test::self_comm("tp"), dp = test::self_comm("dp"),
                                      self = test::self_comm("self");
  VlmModel model(c, b, *tp, *self);
  model.init(5);
  model.refresh_working_weights();
  sched::StreamSet streams(b);
  const std::vector<bool> all(kNumModules, true);
  DpGrads dpg(model.modules(), all, *dp, 0, 25, b);
  StepOptions so;
  so.mode = mode;
  VlmStep step(model, streams, dpg, all, kM, so);
  OptimOptions oo;
  AdamW opt(model.modules(), all, dpg, b, oo);
  Stream& s = b.default_stream();
  Counted out;
  uint64_t first = 0;
  for (int k = 1; k <= kSteps; ++k) {
    const GlobalBatch g = make_batch(200 + uint64_t(k), c);
    const auto mbs = shard(g, c, 1, 0, kM);
    model.zero_grads();
    out.last_loss = step.run(mbs);
    const double norm = opt.grad_norm(s, *tp);
    opt.step(s, k, lr_at(oo, k, kSteps), norm > oo.clip ? float(oo.clip / norm) : 1.f);
    s.synchronize();
    streams.synchronize();
    if (k == 1) first = device_allocations(b.device());
    ++out.steps;
  }
  b.synchronize();
  out.after_first = device_allocations(b.device()) - first;
  return out;
}

void expect_no_allocation(Backend& b) {
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (sched::Mode mode : {sched::Mode::Serial, sched::Mode::Overlap}) {
      SCOPED_TRACE(std::string(p == Precision::BF16 ? "bf16 " : "fp32 ") + sched::mode_name(mode));
      const uint64_t before = device_allocations(b.device());
      const Counted r = run(b, p, mode);
      EXPECT_EQ(r.steps, kSteps);
      EXPECT_TRUE(std::isfinite(r.last_loss));
      EXPECT_GT(device_allocations(b.device()), before) << "the counter counts nothing: building a model allocates";
      EXPECT_EQ(r.after_first, 0u) << "device allocations in steps 2.." << kSteps;
    }
}

TEST(StepAllocations, NoneAfterTheFirstStepOnCpu) { expect_no_allocation(cpu_backend()); }

TEST(StepAllocations, NoneAfterTheFirstStepOnCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  expect_no_allocation(cuda_backend());
}

}  // namespace
}  // namespace vlm
