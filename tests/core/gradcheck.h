// Central finite-difference gradient check used by test_gradcheck*.cpp (CPU, f64).
// A GradProblem holds f64 input tensors, a forward that returns its outputs, and a
// backward that, given the output gradients, returns one gradient per input (an
// undefined Tensor for inputs that are not differentiated). gradcheck() draws a random
// linear functional L = sum_k <r_k, out_k>, gets the analytic gradient of L from
// backward(r), and compares it with (L(x + h e_i) - L(x - h e_i)) / 2h for every
// element of every differentiated input: |fd - an| <= tol * (1 + |an|).
// Helpers: garbage() makes an overwritten gradient start from junk (checks "="),
// accumulated() starts a += gradient from random values and subtracts them after.
#pragma once
#include <functional>

#include "tests/core/test_util.h"

namespace vlm::test {

struct GradProblem {
  std::vector<Tensor> inputs;
  std::function<std::vector<Tensor>()> forward;
  std::function<std::vector<Tensor>(const std::vector<Tensor>& douts)> backward;
};

inline Tensor garbage(Shape s) {
  Tensor t = zeros(s);
  fill(cpu_stream(), t, 1234.5f);
  return t;
}

// Runs op(g) on g = R (random) and returns g - R: the amount op added.
template <typename F>
Tensor accumulated(Shape s, F&& op, uint64_t seed = 99) {
  Rng rng(seed);
  Vec r0 = rng.vec(s.numel());
  Tensor g = host(r0, s);
  op(g);
  Vec v = to_vector_f64(g);
  for (size_t i = 0; i < v.size(); ++i) v[i] -= r0[i];
  return host(v, s);
}

inline void gradcheck(GradProblem& p, uint64_t seed, double tol = 1e-8, double h = 1e-5) {
  Rng rng(seed);
  std::vector<Tensor> outs = p.forward();
  std::vector<Vec> r;
  std::vector<Tensor> douts;
  for (const Tensor& o : outs) {
    r.push_back(rng.vec(o.numel()));
    douts.push_back(host(r.back(), o.shape()));
  }
  auto functional = [&]() {
    std::vector<Tensor> os = p.forward();
    double L = 0;
    for (size_t k = 0; k < os.size(); ++k) {
      Vec v = to_vector_f64(os[k]);
      for (size_t i = 0; i < v.size(); ++i) L += r[k][i] * v[i];
    }
    return L;
  };
  std::vector<Tensor> grads = p.backward(douts);
  ASSERT_EQ(grads.size(), p.inputs.size());
  for (size_t in = 0; in < p.inputs.size(); ++in) {
    if (!grads[in].defined()) continue;
    ASSERT_EQ(grads[in].shape(), p.inputs[in].shape()) << "gradient of input " << in;
    Vec an = to_vector_f64(grads[in]);
    double* x = p.inputs[in].ptr<double>();
    double worst = 0;
    int64_t worst_i = -1;
    double worst_fd = 0;
    for (int64_t i = 0; i < p.inputs[in].numel(); ++i) {
      const double x0 = x[i];
      x[i] = x0 + h;
      const double lp = functional();
      x[i] = x0 - h;
      const double lm = functional();
      x[i] = x0;
      const double fd = (lp - lm) / (2 * h);
      double err = std::fabs(fd - an[size_t(i)]) / (1 + std::fabs(an[size_t(i)]));
      if (std::isnan(err)) err = INFINITY;
      if (err > worst || worst_i < 0) worst = err, worst_i = i, worst_fd = fd;
    }
    EXPECT_LE(worst, tol) << "input " << in << " element " << worst_i << ": analytic "
                          << (worst_i >= 0 ? an[size_t(worst_i)] : 0.0) << " vs finite difference " << worst_fd;
  }
}

}  // namespace vlm::test
