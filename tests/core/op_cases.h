// The op conformance table (in the style of ggml's test-backend-ops), shared by
// tests/core/test_conformance.cpp and the `vlm selfcheck` command.
//
//   struct OpCase { std::string name; double tol; std::function<OpOutputs(Backend&)> run; };
//   std::vector<OpCase> all_op_cases();                 // every op, odd sizes included
//   OpCaseResult check_op_case(const OpCase&, Backend&);  // run on CPU and on b, compare
//
// A case's `run` builds its inputs on the given backend from a fixed seed (identical
// values on every backend: they are drawn on the host and copied), runs the op on the
// backend's default stream and returns the named output tensors (still on that
// backend). Accumulated outputs start from random values, overwritten ones from junk,
// so "+=" and "=" are both checked. check_op_case runs the case on the CPU backend
// (the reference) and on b, and compares every output with the metric
//   err = max_i |x_i - ref_i| / (1 + |ref_i|)      (ok when err <= tol).
// On the CPU backend itself err must be 0 (the CPU ops are deterministic).
// Header-only (no GoogleTest), so apps/ can include it: #include "tests/core/op_cases.h".
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm::opcheck {

struct NamedTensor {
  std::string name;
  Tensor t;
};
using OpOutputs = std::vector<NamedTensor>;

struct OpCase {
  std::string name;  // op and sizes, e.g. "matmul tn M17 N33 K65"
  double tol;        // bound on err (see above) for every output
  std::function<OpOutputs(Backend&)> run;
};

struct OpCaseResult {
  bool ok = true;
  double err = 0;      // worst err over the outputs
  std::string detail;  // "out: err 1.2e-07 (tol 1e-05)" per output, or what went wrong
};

// Input factory of one case run: draws values on the host from a seeded generator and
// copies them to the backend.
class CaseCtx {
 public:
  CaseCtx(Backend& b, uint64_t seed) : b_(b), g_(seed) {}
  Backend& backend() { return b_; }
  Stream& stream() { return b_.default_stream(); }
  bool is_cpu() const { return b_.device() == DeviceKind::CPU; }

  // Uniform values in [lo, hi); bf16 tensors hold the rounded values.
  Tensor rand(Shape s, double lo = -1, double hi = 1, DType dt = DType::F32) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = float(lo + (hi - lo) * unit());
    return upload(Tensor::from_vector(v, s), dt);
  }
  // rand() rounded to bf16 and stored as dt (f32 or bf16): same values either way.
  Tensor rand_bf16_values(Shape s, DType dt, double lo = -1, double hi = 1) {
    Tensor h = rand_host(s, lo, hi);
    Tensor r = Tensor::empty(cpu_backend(), s, DType::BF16);
    convert(cpu_backend().default_stream(), r, h);
    return upload(r, dt);
  }
  Tensor ints(Shape s, int lo, int hi) {  // uniform in [lo, hi]
    std::vector<int32_t> v(static_cast<size_t>(s.numel()));
    for (int32_t& x : v) x = lo + int32_t(g_() % uint64_t(hi - lo + 1));
    return to_backend(b_, Tensor::from_vector(v, s));
  }
  Tensor i32(const std::vector<int32_t>& v) {
    return to_backend(b_, Tensor::from_vector(v, Shape{int64_t(v.size())}));
  }
  Tensor zeros(Shape s, DType dt = DType::F32) { return Tensor::zeros(b_, s, dt); }
  // An output that the op must overwrite: starts as junk.
  Tensor junk(Shape s) {
    Tensor t = Tensor::empty(b_, s, DType::F32);
    fill(stream(), t, 777.f);
    return t;
  }

 private:
  double unit() { return double(g_() >> 11) * (1.0 / 9007199254740992.0); }
  Tensor rand_host(Shape s, double lo, double hi) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = float(lo + (hi - lo) * unit());
    return Tensor::from_vector(v, s);
  }
  Tensor upload(const Tensor& h, DType dt) {
    Tensor c = h;
    if (h.dtype() != dt) {
      c = Tensor::empty(cpu_backend(), h.shape(), dt);
      convert(cpu_backend().default_stream(), c, h);
    }
    return to_backend(b_, c);
  }
  Backend& b_;
  std::mt19937_64 g_;
};

inline double op_case_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(x[i] - ref[i]) / (1.0 + std::fabs(ref[i]));
    if (std::isnan(e)) return INFINITY;
    m = std::max(m, e);
  }
  return m;
}

inline OpCaseResult check_op_case(const OpCase& c, Backend& b) {
  OpCaseResult res;
  OpOutputs ref = c.run(cpu_backend());
  OpOutputs got = c.run(b);
  b.synchronize();
  VLM_ASSERT(ref.size() == got.size(), c.name, ": output count differs");
  const double tol = b.device() == DeviceKind::CPU ? 0.0 : c.tol;
  for (size_t k = 0; k < ref.size(); ++k) {
    std::vector<double> r = to_vector_f64(ref[k].t), x = to_vector_f64(got[k].t);
    if (r.size() != x.size()) {
      res.ok = false;
      res.err = INFINITY;
      res.detail += cat(ref[k].name, ": size ", x.size(), " vs ", r.size(), "; ");
      continue;
    }
    const double e = op_case_err(x, r);
    res.err = std::max(res.err, e);
    if (!(e <= tol)) res.ok = false;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: err %.3g (tol %.3g); ", ref[k].name.c_str(), e, tol);
    res.detail += buf;
  }
  return res;
}

}  // namespace vlm::opcheck

#include "tests/core/op_cases_gemm.inc"
#include "tests/core/op_cases_nn.inc"

namespace vlm::opcheck {

inline std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto* part : {&gemm_elementwise_cases, &nn_cases, &loss_conv_optim_cases}) {
    std::vector<OpCase> v = part();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace vlm::opcheck
