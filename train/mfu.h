// MFU (model FLOPs utilisation) of `vlm train`'s progress line and metrics (README
// "Training"), per rank:
//   mfu = this rank's model FLOPs of the step / the step's seconds / this rank's peak
// Model FLOPs: step_work's model_flops (train/plan_time.h: each product of the model
// once, no recomputation, replicated work counted once per TP group) at the step's real
// shape (step_shape below), not at the largest shape the arenas are planned for.
// Peak (mfu_peak): train.peak_tflops when > 0, on any backend; else, on a CUDA device of
// the GPU table (train/plan_time.h gpu_spec_of_device), its dense peak at the run's
// precision: bf16_tflops at train.precision=bf16, else fp32_tflops (the fp32 matmuls are
// exact f32, without TF32); else none, and no MFU is shown.
#pragma once
#include <string>
#include <vector>

#include "core/device.h"
#include "train/plan_time.h"
#include "train/vlm_model.h"

namespace vlm {

struct MfuPeak {
  double flops_s = 0;  // 0: unknown, no MFU
  // One line for the start of the run: where the peak comes from, or on a GPU not in the
  // table what to set; empty on the CPU without train.peak_tflops.
  std::string note;
};
// peak_tflops: train.peak_tflops; device_name: the backend's description.
MfuPeak mfu_peak(double peak_tflops, DeviceKind device, const std::string& device_name, Precision precision);

// This rank's step as it ran: images per micro-batch and text tokens (prompt + caption)
// per sample are the means over `mbs`; visual tokens per image are visual_tokens /
// visual_images (the trainer's: the step's micro-batches, VlmStep::visual_tokens).
StepShape step_shape(const std::vector<MicroBatch>& mbs, int64_t visual_tokens, int64_t visual_images);

// The MFU (a fraction) of a step of shape s that took step_s seconds on a rank of
// layout l and plan r, at peak_flops_s (> 0).
double step_mfu(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s, double step_s,
                double peak_flops_s);

}  // namespace vlm
