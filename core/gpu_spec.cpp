// The GPU table (core/gpu_spec.h).
#include "core/gpu_spec.h"

#include "base/error.h"

namespace vlm {

namespace {

// NVIDIA's datasheets (docs/planning.md, "Figures"): dense peaks, no sparsity.
const GpuSpec kGpus[] = {
    {"h100", 80, 67, 989.5, 3350, 450},   // H100 SXM5 80 GB: HBM3 3.35 TB/s, NVLink 4 900 GB/s both ways
    {"h200", 141, 67, 989.5, 4800, 450},  // H200 SXM 141 GB: HBM3e 4.8 TB/s, NVLink 4 900 GB/s both ways
    {"a100", 80, 19.5, 312, 2039, 300},   // A100 SXM4 80 GB: HBM2e 2.04 TB/s, NVLink 3 600 GB/s both ways
};

}  // namespace

const GpuSpec& gpu_spec(const std::string& name) {
  for (const GpuSpec& g : kGpus)
    if (name == g.name) return g;
  throw UserError("--plan.gpu: expected h100, h200 or a100, got '" + name + "'");
}

const GpuSpec* gpu_spec_of_device(const std::string& device_name) {
  auto has = [&](const char* x) { return device_name.find(x) != std::string::npos; };
  if (has("A100")) return &gpu_spec("a100");
  if (has("PCIe") || has("NVL")) return nullptr;
  if (has("H200")) return &gpu_spec("h200");
  if (has("H100")) return &gpu_spec("h100");
  return nullptr;
}

}  // namespace vlm
