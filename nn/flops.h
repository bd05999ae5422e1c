// The FLOPs of one module for one micro-batch on one rank, as each module counts them
// for its shape (llm/flops.h, vision/flops.h, scorers/flops.h); model/work.h adds them
// up into a step's work (the planner's time model and the MFU of `vlm train`).
// FLOPs are 2 per multiply-add of the matmuls of the layers with weights and of
// attention (QK^T and PV); parameter-free products and elementwise ops are not counted.
#pragma once

namespace vlm {

struct Flops {
  // What this rank executes: the layers' matmuls and attention, with recomputation,
  // replicated work in full and padding (the time model's).
  double gemm = 0, attention = 0;
  // Model FLOPs: the TP group's step divided by tp, each product counted once (no
  // recomputation, replicated work once per group, no padding; the MFU's).
  double model = 0;

  Flops& operator+=(const Flops& o) {
    gemm += o.gemm, attention += o.attention, model += o.model;
    return *this;
  }
};

}  // namespace vlm
