// Conformance cases, part 1 (op_case.h): matmul in every variant (transposes, batched
// with broadcast, alpha/beta, bias, GELU + pre_gelu, bf16 A/B on non-CPU backends,
// mixed f32 x bf16), bias_backward, the elementwise helpers, round_bf16 and copy.
// Tolerances: matmul 2e-3 (admits TF32 tensor-core math; a wrong layout gives O(1)),
// exact-ish elementwise 1e-6, transcendental elementwise 1e-5, data movement 0.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {

namespace {

OpCase matmul_case(int64_t M, int64_t N, int64_t K, bool ta, bool tb, int64_t batch, bool b_batched,
                          bool bias, bool gelu, float alpha, float beta, double tol = 2e-3) {
  std::string name = cat("matmul ", ta ? "t" : "n", tb ? "t" : "n", " M", M, " N", N, " K", K);
  if (batch) name += cat(" batch", batch, b_batched ? "" : " (B broadcast)");
  if (bias) name += " +bias";
  if (gelu) name += " +gelu";
  if (alpha != 1.f || beta != 0.f) name += cat(" alpha", alpha, " beta", beta);
  return {name, tol, [=](Backend& b) {
            CaseCtx c(b, 1000 + uint64_t(M * 31 + N * 7 + K + ta * 3 + tb + batch * 5));
            Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
            if (batch) sa = Shape{batch, sa[0], sa[1]};
            if (batch && b_batched) sb = Shape{batch, sb[0], sb[1]};
            Shape sc = batch ? Shape{batch, M, N} : Shape{M, N};
            Tensor A = c.rand(sa), B = c.rand(sb), C = beta != 0.f ? c.rand(sc) : c.junk(sc);
            Tensor bv = c.rand(Shape{N}), pre = c.junk(sc);
            GemmOpts o;
            o.trans_a = ta, o.trans_b = tb, o.alpha = alpha, o.beta = beta;
            if (bias) o.bias = &bv;
            if (gelu) o.gelu = true, o.pre_gelu = &pre;
            matmul(c.stream(), C, A, B, o);
            OpOutputs out{{"C", C}};
            if (gelu) out.push_back({"pre_gelu", pre});
            return out;
          }};
}

// bf16 A and B where the backend takes them (CUDA); the CPU reference gets the same
// bf16-rounded values in f32. Accumulation is f32 on both, so the tolerance is tight.
OpCase matmul_bf16_case(int64_t M, int64_t N, int64_t K, bool tb) {
  return {cat("matmul bf16 n", tb ? "t" : "n", " M", M, " N", N, " K", K), 1e-4, [=](Backend& b) {
            CaseCtx c(b, 2000 + uint64_t(M + N + K));
            const DType dt = c.is_cpu() ? DType::F32 : DType::BF16;
            Tensor A = c.rand_bf16_values(Shape{M, K}, dt);
            Tensor B = c.rand_bf16_values(tb ? Shape{N, K} : Shape{K, N}, dt);
            Tensor C = c.junk(Shape{M, N});
            GemmOpts o;
            o.trans_b = tb;
            matmul(c.stream(), C, A, B, o);
            return OpOutputs{{"C", C}};
          }};
}

// Mixed precision (train.precision=bf16): an f32 activation A (not bf16-valued: the op
// rounds it) times bf16 weights B^T, f32 bias, f32 C; with beta = 1 the f32
// accumulation of a weight gradient (dW += dy^T x, bf16 x) is checked instead.
OpCase matmul_mixed_case(int64_t M, int64_t N, int64_t K, bool grad) {
  return {cat("matmul mixed ", grad ? "tn (f32 C += f32^T bf16)" : "nt (f32 x bf16^T + bias)", " M", M, " N", N, " K",
              K),
          1e-4, [=](Backend& b) {
            CaseCtx c(b, 2500 + uint64_t(M + N + K) + grad);
            GemmOpts o;
            Tensor bias = c.rand(Shape{N});
            if (grad) {
              Tensor C = c.rand(Shape{M, N});
              o.trans_a = true, o.beta = 1.f;
              matmul(c.stream(), C, c.rand(Shape{K, M}), c.rand(Shape{K, N}, -1, 1, DType::BF16), o);
              return OpOutputs{{"C", C}};
            }
            Tensor C = c.junk(Shape{M, N});
            o.trans_b = true, o.bias = &bias;
            matmul(c.stream(), C, c.rand(Shape{M, K}, -3, 3), c.rand(Shape{N, K}, -1, 1, DType::BF16), o);
            return OpOutputs{{"C", C}};
          }};
}

// An elementwise case over n elements: f(ctx, n) returns the outputs.
OpCase ew_case(const std::string& op, int64_t n, double tol,
                      std::function<OpOutputs(CaseCtx&, int64_t)> f) {
  return {cat(op, " n", n), tol, [=](Backend& b) {
            CaseCtx c(b, 3000 + uint64_t(n) + std::hash<std::string>{}(op) % 1000);
            return f(c, n);
          }};
}

}  // namespace

std::vector<OpCase> gemm_elementwise_cases() {
  std::vector<OpCase> v;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      v.push_back(matmul_case(17, 33, 65, ta, tb, 0, false, false, false, 1.f, 0.f));
      v.push_back(matmul_case(33, 17, 3, ta, tb, 3, true, true, false, 0.5f, 0.75f));
    }
  v.push_back(matmul_case(1, 1, 1, false, false, 0, false, false, false, 1.f, 0.f));
  v.push_back(matmul_case(3, 129, 64, false, true, 0, false, true, true, 1.f, 0.f));
  v.push_back(matmul_case(64, 48, 96, false, false, 2, false, true, true, 1.f, 0.f));
  v.push_back(matmul_case(5, 7, 9, true, false, 4, false, false, false, 1.f, 1.f));
  v.push_back(matmul_bf16_case(17, 33, 64, false));
  v.push_back(matmul_bf16_case(64, 3, 129, true));
  v.push_back(matmul_mixed_case(19, 40, 33, false));
  v.push_back(matmul_mixed_case(24, 9, 70, true));
  for (int64_t rows : {1, 37})
    for (int64_t n : {3, 65})
      v.push_back({cat("bias_backward rows", rows, " N", n), 1e-5, [=](Backend& b) {
                     CaseCtx c(b, 4000 + uint64_t(rows * n));
                     Tensor db = c.rand(Shape{n});
                     bias_backward(c.stream(), db, c.rand(Shape{rows, n}));
                     return OpOutputs{{"dbias", db}};
                   }});
  for (int64_t n : {1, 17, 4099}) {
    v.push_back(ew_case("fill", n, 0, [](CaseCtx& c, int64_t n) {
      Tensor x = c.rand(Shape{n});
      fill(c.stream(), x, -2.5f);
      return OpOutputs{{"x", x}};
    }));
    v.push_back(ew_case("scale", n, 1e-6, [](CaseCtx& c, int64_t n) {
      Tensor x = c.rand(Shape{n});
      scale(c.stream(), x, 0.3f);
      return OpOutputs{{"x", x}};
    }));
    v.push_back(ew_case("add", n, 1e-6, [](CaseCtx& c, int64_t n) {
      Tensor a = c.rand(Shape{n}), out = c.junk(Shape{n});
      add(c.stream(), out, a, c.rand(Shape{n}));
      return OpOutputs{{"out", out}};
    }));
    v.push_back(ew_case("accumulate", n, 1e-6, [](CaseCtx& c, int64_t n) {
      Tensor y = c.rand(Shape{n});
      accumulate(c.stream(), y, c.rand(Shape{n}), -0.7f);
      return OpOutputs{{"y", y}};
    }));
    v.push_back(ew_case("mul", n, 1e-6, [](CaseCtx& c, int64_t n) {
      Tensor out = c.junk(Shape{n});
      mul(c.stream(), out, c.rand(Shape{n}), c.rand(Shape{n}));
      return OpOutputs{{"out", out}};
    }));
    v.push_back(ew_case("copy", n, 0, [](CaseCtx& c, int64_t n) {
      Tensor dst = c.junk(Shape{n});
      copy(c.stream(), dst, c.rand(Shape{n}));
      return OpOutputs{{"dst", dst}};
    }));
    v.push_back(ew_case("convert f32->bf16->f32", n, 0, [](CaseCtx& c, int64_t n) {
      Tensor h = c.zeros(Shape{n}, DType::BF16), back = c.junk(Shape{n});
      convert(c.stream(), h, c.rand(Shape{n}, -300, 300));
      convert(c.stream(), back, h);
      return OpOutputs{{"bf16", h}, {"f32", back}};
    }));
    v.push_back(ew_case("round_bf16", n, 0, [](CaseCtx& c, int64_t n) {
      Tensor x = c.rand(Shape{n}, -300, 300);
      round_bf16(c.stream(), x);
      return OpOutputs{{"x", x}};
    }));
    v.push_back(ew_case("gelu_forward", n, 1e-5, [](CaseCtx& c, int64_t n) {
      Tensor out = c.junk(Shape{n});
      gelu_forward(c.stream(), out, c.rand(Shape{n}, -5, 5));
      return OpOutputs{{"out", out}};
    }));
    v.push_back(ew_case("gelu_backward", n, 1e-5, [](CaseCtx& c, int64_t n) {
      Tensor in = c.rand(Shape{n}, -5, 5), din = c.junk(Shape{n});
      gelu_backward(c.stream(), din, in, c.rand(Shape{n}));
      return OpOutputs{{"din", din}};
    }));
    v.push_back(ew_case("swiglu_forward", n, 1e-5, [](CaseCtx& c, int64_t n) {
      Tensor out = c.junk(Shape{n});
      swiglu_forward(c.stream(), out, c.rand(Shape{n}, -5, 5), c.rand(Shape{n}));
      return OpOutputs{{"out", out}};
    }));
    v.push_back(ew_case("swiglu_backward", n, 1e-5, [](CaseCtx& c, int64_t n) {
      Tensor g = c.rand(Shape{n}, -5, 5), u = c.rand(Shape{n}), dg = c.junk(Shape{n}), du = c.junk(Shape{n});
      swiglu_backward(c.stream(), dg, du, c.rand(Shape{n}), g, u);
      return OpOutputs{{"dgate", dg}, {"dup", du}};
    }));
    v.push_back(ew_case("sum_squares", n, 1e-5, [](CaseCtx& c, int64_t n) {
      Tensor out = c.rand(Shape{1});
      sum_squares(c.stream(), out, c.rand(Shape{n}));
      return OpOutputs{{"out", out}};
    }));
  }
  // copy: more than one 1 MiB chunk (the CPU splits there), other dtypes, other shapes.
  v.push_back(ew_case("copy", 300007, 0, [](CaseCtx& c, int64_t n) {
    Tensor dst = c.junk(Shape{n});
    copy(c.stream(), dst, c.rand(Shape{n}));
    return OpOutputs{{"dst", dst}};
  }));
  // The host round trip: host -> device (into junk) -> host (into junk); both must hold
  // the drawn values exactly.
  v.push_back({"copy_from_host/copy_to_host f32 [5,7], i32 [13]", 0, [](Backend& b) {
                 CaseCtx c(b, 5150);
                 const Tensor h = to_host(c.rand(Shape{5, 7})), hi = to_host(c.ints(Shape{13}, -9, 9));
                 Tensor d = c.junk(Shape{5, 7}), di = c.zeros(Shape{13}, DType::I32);
                 copy_from_host(c.stream(), d, h);
                 copy_from_host(c.stream(), di, hi);
                 Tensor back = to_host(c.junk(Shape{5, 7})), backi = Tensor::zeros(cpu_backend(), Shape{13}, DType::I32);
                 copy_to_host(c.stream(), back, d);
                 copy_to_host(c.stream(), backi, di);
                 return OpOutputs{{"device", d}, {"device i32", di}, {"host", back}, {"host i32", backi}};
               }});
  v.push_back({"copy bf16 [7,33] -> [231]", 0, [](Backend& b) {
                 CaseCtx c(b, 5200);
                 Tensor dst = c.rand(Shape{231}, 5, 9, DType::BF16);
                 copy(c.stream(), dst, c.rand(Shape{7, 33}, -3, 3, DType::BF16));
                 return OpOutputs{{"dst", dst}};
               }});
  v.push_back({"copy i32 [5,3] -> [3,5]", 0, [](Backend& b) {
                 CaseCtx c(b, 5300);
                 Tensor dst = c.ints(Shape{3, 5}, 5000, 6000);
                 copy(c.stream(), dst, c.ints(Shape{5, 3}, -1000, 1000));
                 return OpOutputs{{"dst", dst}};
               }});
  for (int64_t w : {1, 33}) {
    v.push_back({cat("bias_add N17 C", w), 1e-6, [=](Backend& b) {
                   CaseCtx c(b, 5000 + uint64_t(w));
                   Tensor in = c.rand(Shape{17, w});
                   bias_add(c.stream(), in, in, c.rand(Shape{w}));  // in place
                   return OpOutputs{{"out", in}};
                 }});
    v.push_back({cat("slice_cols/unslice_cols N5 W", w + 7, " w", w), 0, [=](Backend& b) {
                   CaseCtx c(b, 5100 + uint64_t(w));
                   Tensor src = c.rand(Shape{5, w + 7}), part = c.junk(Shape{5, w}), dst = c.rand(Shape{5, w + 7});
                   slice_cols(c.stream(), part, src, 3);
                   unslice_cols(c.stream(), dst, c.rand(Shape{5, w}), 4);
                   return OpOutputs{{"slice", part}, {"unslice", dst}};
                 }});
  }
  return v;
}

}  // namespace vlm::opcheck
