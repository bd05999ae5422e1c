// `vlm selfcheck [--device auto|cpu|cuda] [--filter TEXT]`: prints the backend found
// and its device, then runs every op case of the conformance table
// (tests/core/op_cases.h) once and prints one line per case with PASS/FAIL.
//  - On a GPU backend each case runs on the GPU and on the CPU reference and is
//    compared: max abs error and err = max |x - ref| / (1 + |ref|) <= the case's tol.
//  - On the CPU backend there is no second backend to compare with, so each case runs
//    once and its outputs are checked to be finite; the CPU ops themselves are checked
//    against double-precision references by the test suite (test_ops_reference,
//    test_gradcheck). The output says which of the two was done.
// Exit code 0 when every case passes, 1 otherwise (2 for a bad option, from main).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/config.h"
#include "core/device_options.h"
#include "tests/core/op_cases.h"

namespace vlm {
namespace {

struct CaseOutcome {
  bool ok = true;
  double max_abs = 0, err = 0;
  size_t values = 0;
  std::string detail;  // why it failed
};

// GPU vs CPU reference: every output of the case, compared element by element.
CaseOutcome compare_with_cpu(const opcheck::OpCase& c, Backend& b) {
  CaseOutcome r;
  opcheck::OpOutputs ref = c.run(cpu_backend()), got = c.run(b);
  b.synchronize();
  if (ref.size() != got.size()) return {false, INFINITY, INFINITY, 0, "output count differs from the CPU"};
  for (size_t k = 0; k < ref.size(); ++k) {
    std::vector<double> e = to_vector_f64(ref[k].t), x = to_vector_f64(got[k].t);
    if (e.size() != x.size()) return {false, INFINITY, INFINITY, 0, ref[k].name + ": size differs from the CPU"};
    for (size_t i = 0; i < e.size(); ++i) {
      double d = std::fabs(x[i] - e[i]);
      r.max_abs = std::isnan(d) ? INFINITY : std::max(r.max_abs, d);
    }
    double err = opcheck::op_case_err(x, e);
    if (!(err <= c.tol)) r.ok = false, r.detail += cat(ref[k].name, " err ", err, "; ");
    r.err = std::max(r.err, err);
    r.values += e.size();
  }
  return r;
}

// CPU only: one run, every output value must be finite.
CaseOutcome check_finite(const opcheck::OpCase& c) {
  CaseOutcome r;
  for (const opcheck::NamedTensor& out : c.run(cpu_backend())) {
    size_t bad = 0;
    for (double v : to_vector_f64(out.t)) bad += !std::isfinite(v);
    if (bad) r.ok = false, r.detail += cat(out.name, ": ", bad, " non-finite values; ");
    r.values += size_t(out.t.numel());
  }
  return r;
}

int selfcheck(int argc, char** argv) {
  Config cfg("vlm selfcheck", "");
  register_device_options(cfg);
  cfg.add_string("filter", "", "run only the op cases whose name contains this text");
  if (!cfg.parse(argc, argv)) return 0;
  VLM_REQUIRE(cfg.positional().empty(), "unexpected argument '", cfg.positional()[0], "' (see --help)");

  const std::string filter = cfg.get_string("filter");
  std::vector<opcheck::OpCase> cases;
  for (opcheck::OpCase& c : opcheck::all_op_cases())
    if (c.name.find(filter) != std::string::npos) cases.push_back(std::move(c));
  VLM_REQUIRE(!cases.empty(), "--filter '", filter, "' matches no op case");

  Backend& b = backend_from_config(cfg);
  const bool gpu = b.device() == DeviceKind::CUDA;
  std::printf("backend: %s\n", std::string(device_name(b.device())).c_str());
  std::printf("device:  %s\n", b.description().c_str());
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
    CaseOutcome r;
    try {
      r = gpu ? compare_with_cpu(c, b) : check_finite(c);
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

VLM_COMMAND("selfcheck", "backend, device, and every op once against the CPU reference", selfcheck);

}  // namespace vlm
