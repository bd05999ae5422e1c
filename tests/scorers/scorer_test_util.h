// Helpers of the scorer tests: small dimensions, a parameter table filled with seeded
// uniform values (larger than the init's, so every path carries a visible gradient),
// and copies of parameter gradients; f64 tables for the finite-difference checks.
#pragma once
#include <string>
#include <vector>

#include "core/backend.h"
#include "nn/param_table.h"
#include "scorers/scorer.h"
#include "tests/core/gradcheck.h"
#include "tests/support/rng.h"

namespace vlm::test {

inline ScorerDims small_dims() {
  ScorerDims d;
  d.G = 8, d.d = 6, d.hidden = 6, d.dq = 4, d.k = 3;
  return d;
}

// Full tensors drawn from the seed in table order, each rank keeping its slice (so a
// table split over a pair holds the same model as a whole one).
inline void fill_params(ParamTable& t, uint64_t seed, double scale = 0.5) {
  Rng rng(seed);
  for (const Param& p : t.params()) {
    const Vec v = rng.vec(p.spec.full.numel(), -scale, scale);
    t.set_full(p.spec.name, Tensor::from_vector(std::vector<float>(v.begin(), v.end()), p.spec.full));
  }
}

inline Tensor host_tensor(const Vec& v, Shape s, DType dt) {
  return dt == DType::F64 ? Tensor::from_vector(v, s) : Tensor::from_vector(std::vector<float>(v.begin(), v.end()), s);
}

// An f64 table of specs on one rank, filled from the seed (fill_params).
inline ParamTable table_of(std::vector<ParamSpec> specs, uint64_t seed) {
  ParamTable t(std::move(specs), 1, 0, DType::F64);
  t.allocate(cpu_backend());
  fill_params(t, seed);
  return t;
}

// Inputs = extra tensors followed by every parameter's value (perturbed in place); the
// backward returns the extra gradients followed by every parameter's gradient.
inline void add_params(GradProblem& p, const ParamTable& t) {
  for (const Param& q : t.params()) p.inputs.push_back(q.value);
}
inline std::vector<Tensor> grads_of(ParamTable& t) {
  std::vector<Tensor> g;
  for (const Param& q : t.params()) g.push_back(to_host(q.grad));
  return g;
}

}  // namespace vlm::test
