// Finite-difference checks (f64, CPU) of the GEMM and elementwise backward rules:
// matmul (all four transpose combinations, batched with a broadcast operand,
// alpha/beta, bias and GELU epilogues with pre_gelu), bias_add/bias_backward, gelu,
// swiglu, add, accumulate, mul, scale, sum_squares, slice_cols, unslice_cols and copy.
// Each backward is written with the library's own ops, as the model code does.
#include "tests/core/gradcheck.h"

namespace vlm::test {
namespace {

Stream& S() { return cpu_stream(); }

// C = gelu?(alpha op(A) op(B) + beta C0 + bias?), A possibly batched (3-D), B 2-D or 3-D.
void matmul_problem(bool ta, bool tb, int64_t nb, bool b_batched, bool bias, bool gelu, uint64_t seed) {
  Rng rng(seed);
  const int64_t M = 3, N = 4, K = 5;
  const bool batched = nb > 0;
  const int64_t z = batched ? nb : 1;
  Shape sa2 = ta ? Shape{K, M} : Shape{M, K}, sb2 = tb ? Shape{N, K} : Shape{K, N};
  Shape sa = batched ? Shape{nb, sa2[0], sa2[1]} : sa2;
  Shape sb = b_batched ? Shape{nb, sb2[0], sb2[1]} : sb2;
  Shape sc = batched ? Shape{nb, M, N} : Shape{M, N};
  GradProblem p;
  p.inputs = {host(rng.vec(sa.numel()), sa), host(rng.vec(sb.numel()), sb), host(rng.vec(sc.numel()), sc),
              host(rng.vec(N), Shape{N})};
  const float alpha = 0.7f, beta = 0.3f;
  Tensor pre = zeros(sc);
  auto fwd = [=, &p]() {
    Tensor C = zeros(sc);
    copy_tensor(C, p.inputs[2]);
    GemmOpts o;
    o.trans_a = ta, o.trans_b = tb, o.alpha = alpha, o.beta = beta;
    if (bias) o.bias = &p.inputs[3];
    if (gelu) o.gelu = true, o.pre_gelu = &pre;
    matmul(S(), C, p.inputs[0], p.inputs[1], o);
    return std::vector<Tensor>{C};
  };
  p.forward = fwd;
  p.backward = [=, &p](const std::vector<Tensor>& d) {
    fwd();  // refresh pre_gelu at the unperturbed point
    Tensor dz = garbage(sc);
    if (gelu)
      gelu_backward(S(), dz, pre, d[0]);
    else
      copy_tensor(dz, d[0]);
    Tensor dA = zeros(sa), dB = zeros(sb), dC0 = zeros(sc);
    accumulate(S(), dC0, dz, beta);
    auto mat = [](const Tensor& t, int64_t i) {  // batch entry i of a 2-D or 3-D operand
      return t.ndim() == 2 ? t : t.slice(i, i + 1).view(Shape{t.size(1), t.size(2)});
    };
    for (int64_t i = 0; i < z; ++i) {
      Tensor dzi = mat(dz, i), Ai = mat(p.inputs[0], i), Bi = mat(p.inputs[1], i), dAi = mat(dA, i), dBi = mat(dB, i);
      GemmOpts oa, ob;
      oa.alpha = ob.alpha = alpha;
      oa.beta = ob.beta = 1.f;  // a broadcast operand sums over the batch
      if (!ta) {
        oa.trans_b = !tb;
        matmul(S(), dAi, dzi, Bi, oa);  // dA = dZ op(B)^T
      } else {
        oa.trans_a = tb, oa.trans_b = true;
        matmul(S(), dAi, Bi, dzi, oa);  // dA = op(B) dZ^T
      }
      if (!tb) {
        ob.trans_a = !ta;
        matmul(S(), dBi, Ai, dzi, ob);  // dB = op(A)^T dZ
      } else {
        ob.trans_a = true, ob.trans_b = ta;
        matmul(S(), dBi, dzi, Ai, ob);  // dB = dZ^T op(A)
      }
    }
    Tensor dbias = bias ? accumulated(Shape{N}, [&](const Tensor& g) { bias_backward(S(), g, dz); }) : Tensor();
    return std::vector<Tensor>{dA, dB, dC0, dbias};
  };
  SCOPED_TRACE(::testing::Message() << "ta" << ta << " tb" << tb << " nb" << nb << " bbatched" << b_batched
                                    << " bias" << bias << " gelu" << gelu);
  gradcheck(p, seed + 1);
}

TEST(Gradcheck, MatmulTransposes) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) matmul_problem(ta, tb, 0, false, false, false, 10 + ta * 2 + tb);
}

TEST(Gradcheck, MatmulBatched) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      matmul_problem(ta, tb, 2, false, false, false, 20 + ta * 2 + tb);  // B broadcast
      matmul_problem(ta, tb, 3, true, true, false, 30 + ta * 2 + tb);
    }
}

TEST(Gradcheck, MatmulBiasGeluEpilogue) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) matmul_problem(ta, tb, 0, false, true, true, 40 + ta * 2 + tb);
  matmul_problem(false, true, 2, false, true, true, 48);
}

TEST(Gradcheck, BiasAdd) {
  Rng rng(50);
  GradProblem p;
  p.inputs = {host(rng.vec(15), Shape{5, 3}), host(rng.vec(3), Shape{3})};
  p.forward = [&] {
    Tensor o = zeros(Shape{5, 3});
    bias_add(S(), o, p.inputs[0], p.inputs[1]);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor db = accumulated(Shape{3}, [&](const Tensor& g) { bias_backward(S(), g, d[0]); });
    return std::vector<Tensor>{d[0], db};
  };
  gradcheck(p, 51);
}

TEST(Gradcheck, GeluSwiglu) {
  Rng rng(60);
  const Shape s{4, 7};
  GradProblem g;
  g.inputs = {host(rng.vec(28, -3, 3), s)};
  g.forward = [&] {
    Tensor o = zeros(s);
    gelu_forward(S(), o, g.inputs[0]);
    return std::vector<Tensor>{o};
  };
  g.backward = [&](const std::vector<Tensor>& d) {
    Tensor din = garbage(s);
    gelu_backward(S(), din, g.inputs[0], d[0]);
    return std::vector<Tensor>{din};
  };
  gradcheck(g, 61);
  GradProblem w;
  w.inputs = {host(rng.vec(28, -3, 3), s), host(rng.vec(28), s)};
  w.forward = [&] {
    Tensor o = zeros(s);
    swiglu_forward(S(), o, w.inputs[0], w.inputs[1]);
    return std::vector<Tensor>{o};
  };
  w.backward = [&](const std::vector<Tensor>& d) {
    Tensor dg = garbage(s), du = garbage(s);
    swiglu_backward(S(), dg, du, Tensor{}, d[0], w.inputs[0], w.inputs[1]);
    return std::vector<Tensor>{dg, du};
  };
  gradcheck(w, 62);
}

// add, accumulate, mul, scale and sum_squares composed: outputs
//   o1 = a + b, o2 = a + 0.5 x (accumulate), o3 = a * b, o4 = -2 b (scale), o5 = 0.25 + sum(x^2).
TEST(Gradcheck, ArithmeticHelpers) {
  Rng rng(70);
  const Shape s{3, 5};
  GradProblem p;
  p.inputs = {host(rng.vec(15), s), host(rng.vec(15), s), host(rng.vec(15), s)};
  p.forward = [&] {
    Tensor o1 = zeros(s), o2 = zeros(s), o3 = zeros(s), o4 = zeros(s), o5 = host(Vec{0.25}, Shape{1});
    add(S(), o1, p.inputs[0], p.inputs[1]);
    copy_tensor(o2, p.inputs[0]);
    accumulate(S(), o2, p.inputs[2], 0.5f);
    mul(S(), o3, p.inputs[0], p.inputs[1]);
    copy_tensor(o4, p.inputs[1]);
    scale(S(), o4, -2.f);
    sum_squares(S(), o5, p.inputs[2]);
    return std::vector<Tensor>{o1, o2, o3, o4, o5};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor da = zeros(s), db = zeros(s), dx = zeros(s), t = zeros(s);
    accumulate(S(), da, d[0], 1.f);  // from o1
    accumulate(S(), db, d[0], 1.f);
    accumulate(S(), da, d[1], 1.f);  // from o2
    accumulate(S(), dx, d[1], 0.5f);
    mul(S(), t, d[2], p.inputs[1]);  // from o3
    accumulate(S(), da, t, 1.f);
    mul(S(), t, d[2], p.inputs[0]);
    accumulate(S(), db, t, 1.f);
    accumulate(S(), db, d[3], -2.f);  // from o4
    const double g5 = to_vector_f64(d[4])[0];  // from o5: 2 x g5
    accumulate(S(), dx, p.inputs[2], float(2 * g5));
    return std::vector<Tensor>{da, db, dx};
  };
  gradcheck(p, 71);
}

// o1 = src[:, 2:5] (slice_cols); o2 = dst with columns [1, 4) replaced by small (unslice).
TEST(Gradcheck, SliceUnsliceCols) {
  Rng rng(80);
  GradProblem p;
  p.inputs = {host(rng.vec(28), Shape{4, 7}), host(rng.vec(24), Shape{4, 6}), host(rng.vec(12), Shape{4, 3})};
  p.forward = [&] {
    Tensor o1 = zeros(Shape{4, 3}), o2 = zeros(Shape{4, 6});
    slice_cols(S(), o1, p.inputs[0], 2);
    copy_tensor(o2, p.inputs[1]);
    unslice_cols(S(), o2, p.inputs[2], 1);
    return std::vector<Tensor>{o1, o2};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor dsrc = zeros(Shape{4, 7}), ddst = zeros(Shape{4, 6}), dsmall = zeros(Shape{4, 3});
    unslice_cols(S(), dsrc, d[0], 2);
    copy_tensor(ddst, d[1]);
    unslice_cols(S(), ddst, zeros(Shape{4, 3}), 1);  // overwritten columns get no gradient
    slice_cols(S(), dsmall, d[1], 1);
    return std::vector<Tensor>{dsrc, ddst, dsmall};
  };
  gradcheck(p, 81);
}

// o[12] = copy of x[3, 4]; backward: dx = copy of do (copy is its own backward).
TEST(Gradcheck, Copy) {
  Rng rng(90);
  GradProblem p;
  p.inputs = {host(rng.vec(12), Shape{3, 4})};
  p.forward = [&] {
    Tensor o = zeros(Shape{12});
    copy(S(), o, p.inputs[0]);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor dx = zeros(Shape{3, 4});
    copy(S(), dx, d[0]);
    return std::vector<Tensor>{dx};
  };
  gradcheck(p, 91);
}

}  // namespace
}  // namespace vlm::test
