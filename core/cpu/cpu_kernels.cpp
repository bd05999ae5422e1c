// The CPU backend's kernels on this CPU (contract: core/cpu_kernels.h).
#include "core/cpu_kernels.h"

#include "base/error.h"
#include "core/cpu/blas.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/cpu_util.h"

namespace vlm {

CpuKernels cpu_kernels() {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const cpu::BlasInfo& b = cpu::blas_info();
  CpuKernels k;
  k.cpu = cat(f.name.empty() ? f.vendor : f.name, " (", f.summary(), ")");
  k.blas = cat(b.library, ", ", b.kernels, " kernels");
  k.blas_chosen = b.chosen_by;
  k.own = cpu::clone_level();
  k.bf16 = cpu::gemm_bf16_units() ? "AVX512_BF16" : "f32 units (bf16 values)";
  k.baseline = b.baseline || k.own == "baseline";
  if (k.baseline)
    k.warning = cat("WARNING: baseline x86-64 kernels (", b.baseline ? "the BLAS runs " + b.kernels : "",
                    b.baseline && k.own == "baseline" ? ", " : "", k.own == "baseline" ? "own kernels at baseline" : "",
                    f.avx2 ? "" : ": this CPU has no AVX2", "): matmuls run several times slower",
                    b.chosen_by == "OPENBLAS_CORETYPE" ? " (OPENBLAS_CORETYPE is set)" : "");
  return k;
}

std::string cpu_kernel_summary() {
  const CpuKernels k = cpu_kernels();
  return cat("BLAS: ", k.blas, "; own kernels: ", k.own, "; bf16 products: ", k.bf16,
             k.warning.empty() ? "" : " [" + k.warning + "]");
}

}  // namespace vlm
