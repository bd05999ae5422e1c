// Conformance cases, part 1 (op_case.h): matmul in every variant (transposes, batched
// with broadcast, alpha/beta, bias, GELU + pre_gelu, a large shape, bf16 A/B with and
// without epilogues, batches and transposes, bf16 C, mixed f32 x bf16), bias_backward,
// the elementwise helpers (also beyond 65,536 blocks of 256 threads, where the CUDA
// grid-stride loops go round more than once), round_bf16, convert (f64 too) and copy.
// Tolerances, set by what each CUDA path computes:
//  - f32 matmul 1e-5: cuBLASLt runs exact f32 (CUBLAS_COMPUTE_32F, no TF32), so only
//    the summation order differs; the error grows as sqrt(K) eps and its largest over
//    many outputs is a few times that: K = 4096 measured 2.9e-5 on an H200, its case
//    takes 1e-5 sqrt(K) / 10 = 6.4e-5 (a dropped or doubled product is near 1e-2);
//  - bf16 A/B 1e-4: the products of bf16 values are exact in f32, tensor-core
//    accumulation is f32 but not rounded after every addition;
//  - bf16 C 8e-3: one bf16 step (2^-8) where the f32 sums round to different sides;
//  - exact-ish elementwise 1e-6, transcendental elementwise 1e-5, data movement 0.
#include <cmath>
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
                          bool bias, bool gelu, float alpha, float beta, double tol = 1e-5) {
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
// bf16-rounded values in f32 (an exact f32 reference, whatever the CPU's bf16 path).
// Optionally batched, transposed, with the bias and GELU epilogues, and with a bf16 C
// (CUDA only: cuBLASLt rounds C, and pre_gelu, from the f32 result; the reference
// rounds its f32 C the same way with round_bf16, and adds the bias rounded, as a bf16 C
// does). Tolerance: see the header.
struct Bf16Gemm {
  int64_t M, N, K;
  bool ta = false, tb = false;
  int64_t batch = 0;  // 0: 2-D; else A, B and C batched
  bool bias = false, gelu = false, bf16_out = false;
};

OpCase matmul_bf16_case(Bf16Gemm g) {
  std::string name = cat("matmul bf16 ", g.ta ? "t" : "n", g.tb ? "t" : "n", " M", g.M, " N", g.N, " K", g.K);
  if (g.batch) name += cat(" batch", g.batch);
  if (g.bias) name += " +bias";
  if (g.gelu) name += " +gelu";
  if (g.bf16_out) name += " -> bf16 C";
  return {name, g.bf16_out ? 8e-3 : 1e-4, [=](Backend& b) {
            CaseCtx c(b, 2000 + uint64_t(g.M + g.N + g.K + g.batch * 11 + g.ta * 3 + g.tb + g.bias * 5 + g.gelu * 7));
            const DType dt = c.is_cpu() ? DType::F32 : DType::BF16;
            const DType ct = g.bf16_out && !c.is_cpu() ? DType::BF16 : DType::F32;
            auto batched = [&](Shape s) { return g.batch ? Shape{g.batch, s[0], s[1]} : s; };
            Tensor A = c.rand_bf16_values(batched(g.ta ? Shape{g.K, g.M} : Shape{g.M, g.K}), dt);
            Tensor B = c.rand_bf16_values(batched(g.tb ? Shape{g.N, g.K} : Shape{g.K, g.N}), dt);
            Tensor bias = c.rand(Shape{g.N});
            if (g.bf16_out && c.is_cpu()) round_bf16(c.stream(), bias);  // a bf16 C adds it as bf16 (core/ops/gemm.inc)
            const Shape sc = batched(Shape{g.M, g.N});
            Tensor C = c.junk(sc, ct), pre = c.junk(sc, ct);
            GemmOpts o;
            o.trans_a = g.ta, o.trans_b = g.tb;
            if (g.bias) o.bias = &bias;
            if (g.gelu) o.gelu = true, o.pre_gelu = &pre;
            matmul(c.stream(), C, A, B, o);
            if (g.bf16_out && c.is_cpu()) {
              round_bf16(c.stream(), C);
              if (g.gelu) round_bf16(c.stream(), pre);
            }
            OpOutputs out{{"C", C}};
            if (g.gelu) out.push_back({"pre_gelu", pre});
            return out;
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
  v.push_back(matmul_case(256, 384, 4096, false, true, 0, false, true, false, 1.f, 0.f,
                          1e-5 * std::sqrt(4096.0) / 10));  // large K
  v.push_back(matmul_bf16_case({17, 33, 64}));
  v.push_back(matmul_bf16_case({64, 3, 129, false, true}));
  v.push_back(matmul_bf16_case({40, 64, 96, false, true, 0, true, true}));       // the MLP's epilogues
  v.push_back(matmul_bf16_case({24, 40, 33, true, false, 3}));                   // batched, A transposed
  v.push_back(matmul_bf16_case({48, 64, 72, false, false, 2, true, false}));     // batched + bias
  v.push_back(matmul_bf16_case({33, 64, 80, false, true, 0, false, false, true}));  // bf16 C
  v.push_back(matmul_bf16_case({32, 64, 48, false, true, 2, true, true, true}));    // bf16 C, batched, epilogues
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
  struct Ew {
    std::string op;
    double tol;
    std::function<OpOutputs(CaseCtx&, int64_t)> f;
  };
  const std::vector<Ew> ews = {
      {"fill", 0, [](CaseCtx& c, int64_t n) {
        Tensor x = c.rand(Shape{n});
        fill(c.stream(), x, -2.5f);
        return OpOutputs{{"x", x}};
      }},
      {"scale", 1e-6, [](CaseCtx& c, int64_t n) {
        Tensor x = c.rand(Shape{n});
        scale(c.stream(), x, 0.3f);
        return OpOutputs{{"x", x}};
      }},
      {"add", 1e-6, [](CaseCtx& c, int64_t n) {
        Tensor a = c.rand(Shape{n}), out = c.junk(Shape{n});
        add(c.stream(), out, a, c.rand(Shape{n}));
        return OpOutputs{{"out", out}};
      }},
      {"accumulate", 1e-6, [](CaseCtx& c, int64_t n) {
        Tensor y = c.rand(Shape{n});
        accumulate(c.stream(), y, c.rand(Shape{n}), -0.7f);
        return OpOutputs{{"y", y}};
      }},
      {"mul", 1e-6, [](CaseCtx& c, int64_t n) {
        Tensor out = c.junk(Shape{n});
        mul(c.stream(), out, c.rand(Shape{n}), c.rand(Shape{n}));
        return OpOutputs{{"out", out}};
      }},
      {"copy", 0, [](CaseCtx& c, int64_t n) {
        Tensor dst = c.junk(Shape{n});
        copy(c.stream(), dst, c.rand(Shape{n}));
        return OpOutputs{{"dst", dst}};
      }},
      {"convert f32->bf16->f32", 0, [](CaseCtx& c, int64_t n) {
        Tensor h = c.zeros(Shape{n}, DType::BF16), back = c.junk(Shape{n});
        convert(c.stream(), h, c.rand(Shape{n}, -300, 300));
        convert(c.stream(), back, h);
        return OpOutputs{{"bf16", h}, {"f32", back}};
      }},
      {"convert f32->f64->f32", 0, [](CaseCtx& c, int64_t n) {
        Tensor h = c.zeros(Shape{n}, DType::F64), back = c.junk(Shape{n});
        convert(c.stream(), h, c.rand(Shape{n}, -300, 300));
        convert(c.stream(), back, h);
        return OpOutputs{{"f64", h}, {"f32", back}};
      }},
      {"round_bf16", 0, [](CaseCtx& c, int64_t n) {
        Tensor x = c.rand(Shape{n}, -300, 300);
        round_bf16(c.stream(), x);
        return OpOutputs{{"x", x}};
      }},
      {"gelu_forward", 1e-5, [](CaseCtx& c, int64_t n) {
        Tensor out = c.junk(Shape{n});
        gelu_forward(c.stream(), out, c.rand(Shape{n}, -5, 5));
        return OpOutputs{{"out", out}};
      }},
      {"gelu_backward", 1e-5, [](CaseCtx& c, int64_t n) {
        Tensor in = c.rand(Shape{n}, -5, 5), din = c.junk(Shape{n});
        gelu_backward(c.stream(), din, in, c.rand(Shape{n}));
        return OpOutputs{{"din", din}};
      }},
      {"swiglu_forward", 1e-5, [](CaseCtx& c, int64_t n) {
        Tensor out = c.junk(Shape{n});
        swiglu_forward(c.stream(), out, c.rand(Shape{n}, -5, 5), c.rand(Shape{n}));
        return OpOutputs{{"out", out}};
      }},
      {"swiglu_backward", 1e-5, [](CaseCtx& c, int64_t n) {
        Tensor g = c.rand(Shape{n}, -5, 5), u = c.rand(Shape{n}), dg = c.junk(Shape{n}), du = c.junk(Shape{n});
        Tensor out = c.junk(Shape{n});
        swiglu_backward(c.stream(), dg, du, out, c.rand(Shape{n}), g, u);
        return OpOutputs{{"dgate", dg}, {"dup", du}, {"out", out}};
      }},
      {"sum_squares", 1e-5, [](CaseCtx& c, int64_t n) {
        Tensor out = c.rand(Shape{1});
        sum_squares(c.stream(), out, c.rand(Shape{n}));
        return OpOutputs{{"out", out}};
      }},
  };
  for (int64_t n : {1, 17, 4099})
    for (const Ew& e : ews) v.push_back(ew_case(e.op, n, e.tol, e.f));
  // Beyond grid_1d's cap of 65,536 blocks of 256 threads (core/cuda/cuda_util.cuh): the
  // grid-stride loops go round twice; an elementwise op and the reduction (sum_squares
  // in its fixed order on both backends: core/ops/elementwise.inc). Two cases only:
  // 16.8M elements take seconds on the CPU.
  const int64_t big = (int64_t(1) << 24) + 4097;
  for (const Ew& e : ews)
    if (e.op == "add" || e.op == "sum_squares") v.push_back(ew_case(e.op, big, e.tol, e.f));
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
