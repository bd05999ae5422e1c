// What the CPU this process runs on supports, from cpuid (and xgetbv: a feature counts
// only when the operating system also saves its registers), read once. The CPU backend
// picks its kernels by it: the BLAS kernel set (core/cpu/blas.cpp), the level of its own
// kernels (VLM_CPU_CLONES, core/cpu/cpu_util.h) and whether bf16 products use the CPU's
// bf16 dot-product instructions (core/cpu/gemm_bf16.cpp). Policy and figures:
// docs/cpu-performance.md, "Kernels per CPU".
#pragma once
#include <string>

namespace vlm::cpu {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string name;    // the brand string, e.g. "AMD EPYC 9654 96-Core Processor"
  int family = 0, model = 0;  // display family and model (family 6 model 207: Emerald Rapids)
  bool avx2 = false;          // AVX, AVX2 and FMA, ymm state saved by the OS
  bool avx512 = false;        // AVX-512 F, CD, BW, DQ and VL (x86-64-v4), zmm state saved
  bool avx512_bf16 = false;   // AVX512_BF16 (vdpbf16ps: bf16 pairs summed into f32)
  bool amx_bf16 = false;      // AMX-BF16 with the tile state enabled in XCR0
  // The x86-64 level the CPU reaches: "x86-64-v4", "x86-64-v3" or "baseline".
  const char* level() const { return avx512 ? "x86-64-v4" : avx2 ? "x86-64-v3" : "baseline"; }
  // "family 25 model 17, AVX2 AVX-512 AVX512_BF16" (the vendor's name is in `name`).
  std::string summary() const;
};

// The CPU at hand (cpuid on x86-64; elsewhere an empty record at "baseline").
const CpuFeatures& cpu_features();

}  // namespace vlm::cpu
