// MFU (model FLOPs utilisation) of `vlm train`'s progress line and metrics (docs/training.md,
// "What a run prints and writes"), per rank:
//   mfu = this rank's model FLOPs of the step / the step's seconds / this rank's peak
// Model FLOPs: model_work's model_flops (model/work.h: each product of the model once,
// no recomputation, replicated work counted once per TP group) at the step's real shape
// (step_shape), not at the largest shape the arenas are planned for.
// Peak (mfu_peak): train.peak_tflops when > 0, on any backend; else, on a CUDA device of
// the GPU table (core/gpu_spec.h gpu_spec_of_device), its dense peak at the run's
// precision: bf16_tflops at train.precision=bf16, else fp32_tflops (the fp32 matmuls are
// exact f32, without TF32); else none, and no MFU is shown.
#pragma once
#include <string>

#include "core/device.h"
#include "core/gpu_spec.h"
#include "model/work.h"

namespace vlm {

struct MfuPeak {
  double flops_s = 0;  // 0: unknown, no MFU
  // One line for the start of the run: where the peak comes from, or on a GPU not in the
  // table what to set; empty on the CPU without train.peak_tflops.
  std::string note;
};
// peak_tflops: train.peak_tflops; device_name: the backend's description.
MfuPeak mfu_peak(double peak_tflops, DeviceKind device, const std::string& device_name, Precision precision);

// The MFU (a fraction) of a step of shape s that took step_s seconds on a rank of a TP
// group of size tp, at peak_flops_s (> 0).
double step_mfu(const VlmConfig& cfg, int tp, const StepShape& s, double step_s, double peak_flops_s);

}  // namespace vlm
