// cpuid and xgetbv, read once (contract: cpu_features.h). The bits (Intel SDM vol. 2A,
// CPUID): leaf 1 ECX: FMA 12, OSXSAVE 27, AVX 28; leaf 7.0 EBX: AVX2 5, AVX512F 16,
// AVX512DQ 17, AVX512CD 28, AVX512BW 30, AVX512VL 31; leaf 7.0 EDX: AMX-BF16 22,
// AMX-TILE 24; leaf 7.1 EAX: AVX512_BF16 5. XCR0: SSE and AVX state 1-2, opmask and
// zmm state 5-7, tile config and data 17-18.
#include "core/cpu/cpu_features.h"

#include <cstdint>
#include <cstring>

#include "base/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define VLM_HAVE_CPUID 1
#endif

namespace vlm::cpu {
namespace {

#ifdef VLM_HAVE_CPUID
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

inline bool bit(unsigned v, int i) { return (v >> i) & 1u; }

CpuFeatures detect() {
  CpuFeatures f;
  const Regs r0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &r0.b, 4), std::memcpy(vendor + 4, &r0.d, 4), std::memcpy(vendor + 8, &r0.c, 4);
  f.vendor = vendor;
  const Regs r1 = cpuid(1);
  const unsigned base_family = (r1.a >> 8) & 0xf, base_model = (r1.a >> 4) & 0xf;
  f.family = int(base_family == 0xf ? base_family + ((r1.a >> 20) & 0xff) : base_family);
  f.model = int(base_family == 0x6 || base_family == 0xf ? base_model + (((r1.a >> 16) & 0xf) << 4) : base_model);
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string s = brand;
    const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    f.name = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }
  const bool osxsave = bit(r1.c, 27);
  const uint64_t x = osxsave ? xcr0() : 0;
  const bool ymm = (x & 0x6) == 0x6, zmm = ymm && (x & 0xe0) == 0xe0, tiles = (x & 0x60000) == 0x60000;
  if (r0.a < 7) return f;
  const Regs r7 = cpuid(7), r71 = cpuid(7, 1);
  f.avx2 = ymm && bit(r1.c, 28) && bit(r1.c, 12) && bit(r7.b, 5);
  f.avx512 = f.avx2 && zmm && bit(r7.b, 16) && bit(r7.b, 17) && bit(r7.b, 28) && bit(r7.b, 30) && bit(r7.b, 31);
  f.avx512_bf16 = f.avx512 && r7.a >= 1 && bit(r71.a, 5);
  f.amx_bf16 = f.avx512 && tiles && bit(r7.d, 22) && bit(r7.d, 24);
  return f;
}
#else
CpuFeatures detect() { return CpuFeatures{}; }
#endif

}  // namespace

std::string CpuFeatures::summary() const {
  std::string s = cat("family ", family, " model ", model, ",");
  if (!avx2) return s + " no AVX2";
  s += " AVX2";
  if (avx512) s += " AVX-512";
  if (avx512_bf16) s += " AVX512_BF16";
  if (amx_bf16) s += " AMX-BF16";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace vlm::cpu
