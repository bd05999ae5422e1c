// MFU of `vlm train` (train/mfu.h).
#include "train/mfu.h"

#include "base/error.h"

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

double step_mfu(const VlmConfig& cfg, int tp, const StepShape& s, double step_s, double peak_flops_s) {
  VLM_ASSERT(peak_flops_s > 0 && step_s > 0, "MFU needs a peak and a step time");
  return model_work(cfg, tp, s).model_flops / step_s / peak_flops_s;
}

}  // namespace vlm
