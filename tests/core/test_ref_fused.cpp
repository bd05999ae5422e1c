// The fused residual add + norm (core/ops: add_layernorm_*, add_rmsnorm_*; docs/ops.md,
// "Fused ops") on the CPU (part of test_ops_reference) equals its unfused sequence
// bitwise: the forward (f32, f64, bf16: the norm of the stored sum, also in place as the
// decode step's residual stream), the backward (f32, f64: the norm's backward, then
// accumulate into the residual's gradient). The unfused ops themselves are checked
// against double references (test_ref_nn.cpp).
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

constexpr DType kB = DType::BF16, kF = DType::F32;

TEST(RefFused, ResidualAddNormEqualsAddThenNorm) {
  Rng rng(4);
  const auto draw = [&](int64_t n, double lo = -1, double hi = 1) { return rounded(rng.vec(n, lo, hi), kB); };
  const int64_t N = 23, C = 65;
  const Shape s{N, C};
  const Vec a = draw(N * C, -2, 2), b = draw(N * C, -2, 2), w = draw(C), bb = draw(C);
  const Vec g = draw(N * C), r = draw(N * C);
  for (DType dt : {kF, DType::F64, kB}) {
    const DType pd = dt == kB ? kF : dt;
    const Tensor W = host(w, Shape{C}, pd), Bb = host(bb, Shape{C}, pd), G = host(g, s, dt);
    for (bool layer : {true, false}) {
      // Fused: sum and out in one op; unfused: add, then the norm of the stored sum.
      Tensor sum = zeros(s, dt), out = zeros(s, dt), mean = zeros(Shape{N}, pd), rstd = zeros(Shape{N}, pd);
      Tensor sum2 = zeros(s, dt), out2 = zeros(s, dt), mean2 = zeros(Shape{N}, pd), rstd2 = zeros(Shape{N}, pd);
      const Tensor A = host(a, s, dt), B = host(b, s, dt);
      add(cpu_stream(), sum2, A, B);
      if (layer) {
        add_layernorm_forward(cpu_stream(), sum, out, mean, rstd, A, B, W, Bb, 1e-5f);
        layernorm_forward(cpu_stream(), out2, mean2, rstd2, sum2, W, Bb, 1e-5f);
      } else {
        add_rmsnorm_forward(cpu_stream(), sum, out, rstd, A, B, W, 1e-5f);
        rmsnorm_forward(cpu_stream(), out2, rstd2, sum2, W, 1e-5f);
      }
      const std::string what = cat(layer ? "add_layernorm" : "add_rmsnorm", " ", dtype_name(dt));
      EXPECT_EQ(to_vector_f64(sum), to_vector_f64(sum2)) << what << " sum";
      EXPECT_EQ(to_vector_f64(out), to_vector_f64(out2)) << what << " out";
      EXPECT_EQ(to_vector_f64(rstd), to_vector_f64(rstd2)) << what << " rstd";
      if (layer) {
        EXPECT_EQ(to_vector_f64(mean), to_vector_f64(mean2)) << what << " mean";
      }
      // In place (sum = a), as the decode step's residual stream.
      Tensor a3 = host(a, s, dt), out3 = zeros(s, dt);
      if (layer)
        add_layernorm_forward(cpu_stream(), a3, out3, mean2, rstd2, a3, B, W, Bb, 1e-5f);
      else
        add_rmsnorm_forward(cpu_stream(), a3, out3, rstd2, a3, B, W, 1e-5f);
      EXPECT_EQ(to_vector_f64(a3), to_vector_f64(sum)) << what << " in place";
      EXPECT_EQ(to_vector_f64(out3), to_vector_f64(out)) << what << " in place";
      if (dt == kB) continue;  // bf16 backward: one rounding (RefBf16.Norms), not two
      // Backward: dsum += din, against the norm backward then accumulate.
      Tensor dsum = host(r, s, dt), dsum2 = host(r, s, dt), din = zeros(s, dt);
      Tensor dw = host(w, Shape{C}, pd), dw2 = host(w, Shape{C}, pd), db = host(bb, Shape{C}, pd),
             db2 = host(bb, Shape{C}, pd);
      if (layer) {
        add_layernorm_backward(cpu_stream(), dsum, dw, db, G, sum, W, mean, rstd);
        layernorm_backward(cpu_stream(), din, dw2, db2, G, sum, W, mean, rstd);
      } else {
        add_rmsnorm_backward(cpu_stream(), dsum, dw, G, sum, W, rstd);
        rmsnorm_backward(cpu_stream(), din, dw2, G, sum, W, rstd);
      }
      accumulate(cpu_stream(), dsum2, din, 1.f);
      EXPECT_EQ(to_vector_f64(dsum), to_vector_f64(dsum2)) << what << " dsum";
      EXPECT_EQ(to_vector_f64(dw), to_vector_f64(dw2)) << what << " dw";
      EXPECT_EQ(to_vector_f64(db), to_vector_f64(db2)) << what << " db";
    }
  }
}

}  // namespace
}  // namespace vlm::test
