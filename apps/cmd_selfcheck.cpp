// `vlm selfcheck [--device auto|cpu|cuda] [--filter TEXT]`: prints the backend found
// and its device (on the CPU: the CPU, the BLAS and its kernel set, the level of the
// own kernels, the bf16 units, and a warning at baseline), then runs every op case of the conformance table
// (core/opcheck/op_case.h, the cases tests/core/test_conformance.cpp runs) once and
// prints one line per case with PASS/FAIL.
//  - On a GPU backend each case runs on the GPU and on the CPU reference and is
//    compared (check_op_case): max abs error and err = max |x - ref| / (1 + |ref|) <=
//    the case's tol.
//  - On the CPU backend there is no second backend to compare with, so each case runs
//    once and its outputs are checked to be finite (check_op_case_finite); the CPU ops
//    themselves are checked against double-precision references by the test suite
//    (test_ops_reference, test_gradcheck). The output says which of the two was done.
// Exit code 0 when every case passes, 1 otherwise (2 for a bad option, apps/command.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/options.h"
#include "core/cpu_kernels.h"
#include "core/device_options.h"
#include "core/opcheck/op_case.h"

namespace vlm {
namespace {

struct SelfcheckInputs {
  std::string filter;
};

const OptionSet<SelfcheckInputs>& selfcheck_inputs() {
  static const OptionSet<SelfcheckInputs> set([](OptionSet<SelfcheckInputs>& s) {
    s.option("filter", &SelfcheckInputs::filter, "run only the op cases whose name contains this text");
  });
  return set;
}

void selfcheck_options(Config& cfg) {
  register_device_options(cfg);
  selfcheck_inputs().add_to(cfg);
}

int selfcheck(const Config& cfg) {
  const std::string filter = selfcheck_inputs().read(cfg).filter;
  std::vector<opcheck::OpCase> cases;
  for (opcheck::OpCase& c : opcheck::all_op_cases())
    if (c.name.find(filter) != std::string::npos) cases.push_back(std::move(c));
  VLM_REQUIRE(!cases.empty(), "--filter '", filter, "' matches no op case");

  Backend& b = backend_from_config(cfg);
  const bool gpu = b.device() == DeviceKind::CUDA;
  std::printf("backend: %s\n", std::string(device_name(b.device())).c_str());
  std::printf("device:  %s\n", b.description().c_str());
  if (!gpu) {  // the kernels the CPU backend chose for this CPU (core/cpu_kernels.h)
    const CpuKernels k = cpu_kernels();
    std::printf("cpu:     %s\n", k.cpu.c_str());
    std::printf("blas:    %s (chosen by %s)\n", k.blas.c_str(), k.blas_chosen.c_str());
    std::printf("kernels: own %s; bf16 products on %s\n", k.own.c_str(), k.bf16.c_str());
    if (!k.warning.empty()) std::printf("%s\n", k.warning.c_str());
  }
  if (!cuda_available()) std::printf("cuda:    not available (%s)\n", cuda_unavailable_reason().c_str());
  else if (!gpu) std::printf("cuda:    available, not used (--device cpu)\n");
  if (gpu)
    std::printf("check:   every op case on %s against the CPU reference; err = max|x-ref|/(1+|ref|) <= tol\n",
                b.description().c_str());
  else
    std::printf("check:   no GPU to compare with: every op case runs once on the CPU and its outputs must be\n"
                "         finite (CPU correctness is tested against double-precision references by ctest)\n");

  int w = 0, failed = 0;
  for (const auto& c : cases) w = std::max(w, int(c.name.size()));
  auto t0 = std::chrono::steady_clock::now();
  for (const opcheck::OpCase& c : cases) {
    opcheck::OpCaseResult r;
    try {
      r = gpu ? opcheck::check_op_case(c, b) : opcheck::check_op_case_finite(c);
    } catch (const std::exception& e) {
      r.ok = false, r.detail = e.what();
    }
    failed += !r.ok;
    if (gpu)
      std::printf("  %-*s  max abs %9.2e  err %9.2e  tol %8.1e  %s", w, c.name.c_str(), r.max_abs, r.err, c.tol,
                  r.ok ? "PASS" : "FAIL");
    else
      std::printf("  %-*s  %6zu values finite  %s", w, c.name.c_str(), r.values, r.ok ? "PASS" : "FAIL");
    if (r.ok) std::printf("\n");
    else std::printf("  (%s)\n", r.detail.c_str());
  }
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int run = int(cases.size());
  std::printf("%d/%d op cases passed (%s) in %.1f s\n", run - failed, run,
              gpu ? "compared with the CPU reference" : "CPU only: finiteness", sec);
  return failed ? 1 : 0;
}

}  // namespace

VLM_COMMAND(selfcheck, {.path = "selfcheck",
                        .summary = "backend, device, and every op once against the CPU reference",
                        .options = selfcheck_options,
                        .run = selfcheck});

}  // namespace vlm
