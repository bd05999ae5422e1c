// MFU of `vlm train` (train/mfu.h).
#include "train/mfu.h"

#include <algorithm>

#include "core/error.h"

namespace vlm {

MfuPeak mfu_peak(double peak_tflops, DeviceKind device, const std::string& device_name, Precision precision) {
  MfuPeak p;
  const bool bf16 = precision == Precision::BF16;
  if (peak_tflops > 0) {
    p.flops_s = peak_tflops * 1e12;
    p.note = cat("MFU against ", peak_tflops, " TFLOP/s (train.peak_tflops)");
    return p;
  }
  if (device != DeviceKind::CUDA) return p;
  const GpuSpec* g = gpu_spec_of_device(device_name);
  if (!g) {
    p.note = cat("MFU not shown: no peak FLOP/s known for ", device_name, " (the table has the H100 and H200 SXM and ",
                 "the A100); set train.peak_tflops to its dense ", bf16 ? "bf16" : "fp32", " TFLOP/s");
    return p;
  }
  const double tflops = bf16 ? g->bf16_tflops : g->fp32_tflops;
  p.flops_s = tflops * 1e12;
  p.note = cat("MFU against ", tflops, " TFLOP/s (", g->name, " dense ", bf16 ? "bf16" : "fp32",
               "; train.peak_tflops overrides)");
  return p;
}

StepShape step_shape(const std::vector<MicroBatch>& mbs, int64_t visual_tokens, int64_t visual_images) {
  VLM_ASSERT(!mbs.empty() && visual_images > 0, "a step of at least one micro-batch with images");
  StepShape s;
  int64_t images = 0, text = 0, prompt = 0;
  for (const MicroBatch& mb : mbs)
    for (int64_t b = 0; b < mb.images; ++b) {
      ++images;
      prompt += int64_t(mb.prompt[size_t(b)].size());
      text += int64_t(mb.prompt[size_t(b)].size() + mb.caption[size_t(b)].size());
    }
  s.micro_batches = int(mbs.size());
  s.images = std::max<int64_t>(1, (images + s.micro_batches / 2) / s.micro_batches);
  s.visual = double(visual_tokens) / double(visual_images);
  s.text = double(text) / double(std::max<int64_t>(1, images));
  s.prompt = double(prompt) / double(std::max<int64_t>(1, images));
  return s;
}

double step_mfu(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s, double step_s,
                double peak_flops_s) {
  VLM_ASSERT(peak_flops_s > 0 && step_s > 0, "MFU needs a peak and a step time");
  return step_work(cfg, l, r, s).model_flops / step_s / peak_flops_s;
}

}  // namespace vlm
