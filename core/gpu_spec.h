// The GPUs whose figures the project knows: NVIDIA's datasheet figures (dense peaks, no
// sparsity; their sources: docs/planning.md), read by the planner's time model
// (plan/plan_time.h) and by the MFU's peak (train/mfu.h).
#pragma once
#include <string>

namespace vlm {

struct GpuSpec {
  const char* name;
  double memory_gib;       // HBM capacity
  double fp32_tflops;      // dense FP32 (CUDA cores)
  double bf16_tflops;      // dense BF16 tensor cores (no sparsity)
  double hbm_gbs;          // HBM bandwidth, GB/s
  double nvlink_gbs;       // NVLink per GPU per direction, GB/s
};
// "h100" (SXM5 80 GB), "h200" (SXM 141 GB), "a100" (SXM4 80 GB); UserError otherwise.
const GpuSpec& gpu_spec(const std::string& name);
// The entry of a CUDA device by its name (cudaDeviceProp::name, as the backend's
// description holds it: "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, ...)"): a name with H100 ->
// h100, H200 -> h200 (GH200 too), A100 -> a100 (every A100 has the same peaks); null for
// any other GPU, and for the H100/H200 PCIe and NVL parts, whose peaks are lower than the
// SXM figures of the table.
const GpuSpec* gpu_spec_of_device(const std::string& device_name);

}  // namespace vlm
