// The input factory of the op cases and their comparison (see op_case.h).
#include "core/opcheck/op_case.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "core/ops.h"

namespace vlm::opcheck {

Tensor CaseCtx::rand(Shape s, double lo, double hi, DType dt) { return upload(rand_host(s, lo, hi), dt); }

Tensor CaseCtx::rand_bf16_values(Shape s, DType dt, double lo, double hi) {
  Tensor h = rand_host(s, lo, hi);
  Tensor r = Tensor::empty(cpu_backend(), s, DType::BF16);
  convert(cpu_backend().default_stream(), r, h);
  return upload(r, dt);
}

Tensor CaseCtx::ints(Shape s, int lo, int hi) {
  std::vector<int32_t> v(static_cast<size_t>(s.numel()));
  for (int32_t& x : v) x = lo + int32_t(g_() % uint64_t(hi - lo + 1));
  return to_backend(b_, Tensor::from_vector(v, s));
}

Tensor CaseCtx::i32(const std::vector<int32_t>& v) {
  return to_backend(b_, Tensor::from_vector(v, Shape{int64_t(v.size())}));
}

Tensor CaseCtx::junk(Shape s, DType dt) {
  Tensor t = Tensor::empty(b_, s, DType::F32);
  fill(stream(), t, 777.f);
  if (dt == DType::F32) return t;
  Tensor r = Tensor::empty(b_, s, dt);
  convert(stream(), r, t);
  return r;
}

Tensor CaseCtx::rand_host(Shape s, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = float(lo + (hi - lo) * unit());
  return Tensor::from_vector(v, s);
}

Tensor CaseCtx::upload(const Tensor& h, DType dt) {
  Tensor c = h;
  if (h.dtype() != dt) {
    c = Tensor::empty(cpu_backend(), h.shape(), dt);
    convert(cpu_backend().default_stream(), c, h);
  }
  return to_backend(b_, c);
}

double op_case_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(x[i] - ref[i]) / (1.0 + std::fabs(ref[i]));
    if (std::isnan(e)) return INFINITY;
    m = std::max(m, e);
  }
  return m;
}

OpCaseResult check_op_case(const OpCase& c, Backend& b) {
  OpCaseResult res;
  OpOutputs ref = c.run(cpu_backend());
  OpOutputs got = c.run(b);
  b.synchronize();
  if (ref.size() != got.size()) {
    res.ok = false, res.err = res.max_abs = INFINITY;
    res.detail = cat(got.size(), " outputs, the CPU reference has ", ref.size());
    return res;
  }
  const double tol = b.device() == DeviceKind::CPU ? 0.0 : c.tol;
  for (size_t k = 0; k < ref.size(); ++k) {
    std::vector<double> r = to_vector_f64(ref[k].t), x = to_vector_f64(got[k].t);
    if (r.size() != x.size()) {
      res.ok = false, res.err = res.max_abs = INFINITY;
      res.detail += cat(ref[k].name, ": size ", x.size(), " vs ", r.size(), "; ");
      continue;
    }
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = std::fabs(x[i] - r[i]);
      res.max_abs = std::isnan(d) ? INFINITY : std::max(res.max_abs, d);
    }
    const double e = op_case_err(x, r);
    res.err = std::max(res.err, e);
    res.values += r.size();
    if (!(e <= tol)) res.ok = false;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: err %.3g (tol %.3g); ", ref[k].name.c_str(), e, tol);
    res.detail += buf;
  }
  return res;
}

OpCaseResult check_op_case_finite(const OpCase& c) {
  OpCaseResult res;
  for (const NamedTensor& out : c.run(cpu_backend())) {
    size_t bad = 0;
    for (double v : to_vector_f64(out.t)) bad += !std::isfinite(v);
    if (bad) res.ok = false, res.detail += cat(out.name, ": ", bad, " non-finite values; ");
    res.values += size_t(out.t.numel());
  }
  return res;
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto* part : {&gemm_elementwise_cases, &nn_cases, &loss_conv_optim_cases, &decode_cases}) {
    std::vector<OpCase> v = part();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace vlm::opcheck
