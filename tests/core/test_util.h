// Helpers of the core tests: host tensors from double vectors in any float dtype (the RNG
// and the error metrics are tests/support's).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "tests/support/metrics.h"
#include "tests/support/rng.h"

namespace vlm::test {

// A host tensor of dtype dt (f32, f64 or bf16) holding the values of v (rounded).
inline Tensor host(const Vec& v, Shape s, DType dt = DType::F64) {
  Tensor d = Tensor::from_vector(v, s);
  if (dt == DType::F64) return d;
  Tensor t = Tensor::empty(cpu_backend(), s, dt);
  convert(cpu_backend().default_stream(), t, d);
  return t;
}
inline Tensor host_i32(const std::vector<int32_t>& v, Shape s) { return Tensor::from_vector(v, s); }
inline Tensor zeros(Shape s, DType dt = DType::F64) { return Tensor::zeros(cpu_backend(), s, dt); }

// The values of v as stored in dtype dt (what an op on a dt tensor actually sees).
inline Vec rounded(const Vec& v, DType dt) { return to_vector_f64(host(v, Shape{int64_t(v.size())}, dt)); }

inline Stream& cpu_stream() { return cpu_backend().default_stream(); }

}  // namespace vlm::test

