// The CPU backend's kernels per CPU (core/cpu_kernels.h, core/cpu/blas.h,
// core/cpu/cpu_features.h):
//  - on a CPU with AVX2 the BLAS and the own kernels are not the baseline ones, the
//    kernel set is the one chosen from cpuid and the one OpenBLAS says it runs, and the
//    backend line names them without a warning (skipped, with a line, without AVX2);
//  - the kernel set per CPU: the features of an Intel Emerald Rapids, a Skylake-SP, a
//    Haswell, AMD Zen 3 and Zen 4 and a CPU without AVX2;
//  - re-initialising OpenBLAS with another kernel set (what the backend does where the
//    library does not know the CPU) switches the set, and products stay right;
//  - a kernel set forced by OPENBLAS_CORETYPE is kept, and a baseline one gives the
//    one-line warning on the backend line.
#include <gtest/gtest.h>
#include <strings.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu/blas.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu_kernels.h"

extern "C" char* openblas_get_corename(void);
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace vlm {
namespace {

bool same_name(const std::string& a, const char* b) { return b && !strcasecmp(a.c_str(), b); }

TEST(CpuKernels, NotBaselineOnACpuWithAvx2) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  std::printf("cpu: %s %s\n", f.name.c_str(), f.summary().c_str());
  std::printf("backend: %s\n", cpu_backend().description().c_str());
  if (!f.avx2) GTEST_SKIP() << "this CPU (" << f.name << ", " << f.summary() << ") has no AVX2: baseline is its best";
  const CpuKernels k = cpu_kernels();
  const cpu::BlasInfo& b = cpu::blas_info();
  EXPECT_FALSE(k.baseline) << k.blas << ", own " << k.own;
  EXPECT_TRUE(k.warning.empty()) << k.warning;
  EXPECT_NE(k.own, "baseline");
  EXPECT_EQ(k.own, f.avx512 ? "x86-64-v4" : "x86-64-v3");
  EXPECT_FALSE(b.baseline) << b.kernels;
  EXPECT_EQ(b.kernels, openblas_get_corename()) << "the reported kernels are not the ones OpenBLAS runs";
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_EQ(b.chosen_by, "cpuid");
    EXPECT_TRUE(same_name(b.kernels, cpu::openblas_core_for(f)))
        << "runs " << b.kernels << ", chosen " << cpu::openblas_core_for(f);
  }
  EXPECT_EQ(k.bf16, f.avx512_bf16 ? "AVX512_BF16" : "f32 units (bf16 values)");
  const std::string d = cpu_backend().description();
  EXPECT_NE(d.find("BLAS: " + k.blas), std::string::npos) << d;
  EXPECT_NE(d.find("own kernels: " + k.own), std::string::npos) << d;
  EXPECT_EQ(d.find("WARNING"), std::string::npos) << d;
}

cpu::CpuFeatures features(const char* vendor, int family, int model, bool avx2, bool avx512, bool bf16, bool amx) {
  cpu::CpuFeatures f;
  f.vendor = vendor, f.family = family, f.model = model;
  f.avx2 = avx2, f.avx512 = avx512, f.avx512_bf16 = bf16, f.amx_bf16 = amx;
  return f;
}

TEST(CpuKernels, KernelSetPerCpu) {
  const struct {
    cpu::CpuFeatures f;
    const char* want;
  } cases[] = {
      {features("GenuineIntel", 6, 207, true, true, true, true), "Cooperlake"},   // Emerald Rapids
      {features("GenuineIntel", 6, 85, true, true, false, false), "SkylakeX"},    // Skylake-SP
      {features("GenuineIntel", 6, 63, true, false, false, false), "Haswell"},    // Haswell
      {features("AuthenticAMD", 25, 1, true, false, false, false), "Zen"},        // Zen 3
      {features("AuthenticAMD", 25, 17, true, true, true, false), "Cooperlake"},  // Zen 4
      {features("HygonGenuine", 24, 1, true, false, false, false), "Zen"},
  };
  for (const auto& c : cases)
    EXPECT_STREQ(cpu::openblas_core_for(c.f), c.want) << c.f.vendor << " family " << c.f.family << " model " << c.f.model;
  EXPECT_EQ(cpu::openblas_core_for(features("GenuineIntel", 6, 23, false, false, false, false)), nullptr)
      << "below AVX2 the library's own choice stands";
  EXPECT_STREQ(features("GenuineIntel", 6, 23, false, false, false, false).level(), "baseline");
  EXPECT_STREQ(features("AuthenticAMD", 25, 1, true, false, false, false).level(), "x86-64-v3");
}

// A product against a double reference (the kernels round differently; all must be right).
double gemm_error() {
  const int64_t M = 70, N = 90, K = 300;
  std::vector<float> a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(std::sin(0.37 * double(i)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(std::cos(0.11 * double(i)));
  cpu::gemm_ld(false, false, M, N, K, 1.0, a.data(), K, b.data(), N, 0.0, c.data(), N);
  double err = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double r = 0;
      for (int64_t k = 0; k < K; ++k) r += double(a[size_t(i * K + k)]) * double(b[size_t(k * N + j)]);
      err = std::max(err, std::fabs(r - double(c[size_t(i * N + j)])));
    }
  return err;
}

// In a fresh process (the death test re-runs the binary): switch to another kernel set
// and back, the way blas.cpp does before main, with products in between.
TEST(CpuKernelsDeathTest, ReinitialisingSwitchesTheKernelSet) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) GTEST_SKIP() << "not a DYNAMIC_ARCH OpenBLAS";
  if (!cpu::cpu_features().avx2) GTEST_SKIP() << "this CPU has no AVX2: no second kernel set to switch to";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const std::string first = openblas_get_corename();
        const double e1 = gemm_error();
        setenv("OPENBLAS_CORETYPE", "Prescott", 1);
        gotoblas_dynamic_quit();
        gotoblas_dynamic_init();
        const std::string second = openblas_get_corename();
        const double e2 = gemm_error();
        setenv("OPENBLAS_CORETYPE", first.c_str(), 1);
        gotoblas_dynamic_quit();
        gotoblas_dynamic_init();
        const std::string third = openblas_get_corename();
        const double e3 = gemm_error();
        std::fprintf(stderr, "kernels %s -> %s -> %s, errors %.2e %.2e %.2e\n", first.c_str(), second.c_str(),
                     third.c_str(), e1, e2, e3);
        const bool ok = second == "Prescott" && third == first && e1 < 1e-3 && e2 < 1e-3 && e3 < 1e-3;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "kernels .* -> Prescott -> ");
}

// OPENBLAS_CORETYPE set by the user wins over cpuid, and baseline kernels are named with
// a warning on the backend line (in a fresh process, where the library reads it at load).
TEST(CpuKernelsDeathTest, UserKernelSetIsKeptAndBaselineWarns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  EXPECT_EXIT(
      {
        const std::string d = cpu_backend().description();
        std::fprintf(stderr, "%s\n", d.c_str());
        const cpu::BlasInfo& b = cpu::blas_info();
        const bool ok = b.kernels == "Prescott" && b.chosen_by == "OPENBLAS_CORETYPE" && b.baseline &&
                        d.find("BLAS: OpenBLAS") != std::string::npos &&
                        d.find("[WARNING: baseline x86-64 kernels (the BLAS runs Prescott") != std::string::npos &&
                        d.find("(OPENBLAS_CORETYPE is set)]") != std::string::npos;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "Prescott kernels");
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace
}  // namespace vlm
