// Which kernels the CPU backend runs on this CPU (chosen from cpuid at start-up; policy
// and figures: docs/cpu-performance.md, "Kernels per CPU"): the BLAS and its kernel set,
// the x86-64 level of the backend's own kernels, and the units of the bf16 products.
// The CPU backend's description (the backend line every command prints) and
// `vlm selfcheck` show it.
#pragma once
#include <string>

namespace vlm {

struct CpuKernels {
  std::string cpu;           // "AMD EPYC 9654 96-Core Processor (family 25 model 17, AVX2 AVX-512 AVX512_BF16)"
  std::string blas;          // "OpenBLAS 0.3.21, Cooperlake kernels"
  std::string blas_chosen;   // "cpuid", "OPENBLAS_CORETYPE" or "the library"
  std::string own;           // "x86-64-v4": the level of the backend's own kernels (its clones)
  std::string bf16;          // "AVX512_BF16" or "f32 units (bf16 values)": the bf16 x bf16 products
  bool baseline = false;     // the BLAS or the own kernels run without AVX2
  std::string warning;       // one line when baseline, else empty
};
CpuKernels cpu_kernels();

// "BLAS: OpenBLAS 0.3.21, Cooperlake kernels; own kernels: x86-64-v4; bf16 products:
// AVX512_BF16", with the warning appended in brackets when there is one.
std::string cpu_kernel_summary();

}  // namespace vlm
