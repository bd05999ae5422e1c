// bf16 activations and the fused ops on the CPU (part of test_ops_reference):
//  - every op that takes bf16 activations (core/ops/contract.h kAct) gives, on bf16
//    tensors, the f32 op's result on the same values rounded once to bf16 (bitwise); its
//    f32 outputs (statistics, weight gradients) equal the f32 op's bitwise. The f32 ops
//    themselves are checked against double references (test_ref_*.cpp), so this pins
//    the bf16 variants to them.
//  - the fused ops (docs/ops.md, "Fused ops") equal their unfused sequences bitwise:
//    RoPE of q and k together (every dtype), the loss's gradient written in place of
//    the logits, SwiGLU's backward recomputing the forward's value; the residual add +
//    norm: test_ref_fused.cpp.
#include <functional>

#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

constexpr DType kB = DType::BF16, kF = DType::F32;

float rnd(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// A run of an op at activation dtype `act`: its outputs.
using Run = std::function<std::vector<Tensor>(DType act)>;

// The outputs at bf16 against those at f32: a bf16 output is the f32 one rounded, an
// output of another dtype equals it.
void expect_rounded_f32(const std::string& what, const Run& run) {
  const std::vector<Tensor> f = run(kF), h = run(kB);
  ASSERT_EQ(f.size(), h.size()) << what;
  for (size_t k = 0; k < f.size(); ++k) {
    const std::vector<float> vf = to_vector_f32(f[k]), vh = to_vector_f32(h[k]);
    ASSERT_EQ(vf.size(), vh.size()) << what << " output " << k;
    const bool rounded = h[k].dtype() == kB;
    if (!rounded) {
      EXPECT_EQ(h[k].dtype(), f[k].dtype()) << what << " output " << k;
    }
    size_t bad = 0, first = vf.size();
    for (size_t i = 0; i < vf.size(); ++i) {
      const float want = rounded ? rnd(vf[i]) : vf[i];
      const bool same = want == vh[i] || (std::isnan(want) && std::isnan(vh[i]));
      if (!same && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << " output " << k << ": " << bad << " of " << vf.size()
                       << " differ from the f32 result" << (rounded ? " rounded" : "") << ", first at " << first
                       << ": " << (first < vf.size() ? vh[first] : 0.f) << " vs "
                       << (first < vf.size() ? vf[first] : 0.f);
  }
}

// Inputs of a run: values drawn once, rounded to bf16 so both dtypes see the same ones.
struct Inputs {
  explicit Inputs(uint64_t seed) : rng(seed) {}
  Vec draw(int64_t n, double lo = -1, double hi = 1) { return rounded(rng.vec(n, lo, hi), kB); }
  Rng rng;
};

TEST(RefBf16, ElementwiseAndActivations) {
  Inputs in(1);
  const int64_t n = 3001;
  const Shape s{n};
  const Vec a = in.draw(n, -5, 5), b = in.draw(n), c = in.draw(n), bias = in.draw(41);
  expect_rounded_f32("elementwise", [&](DType dt) {
    Tensor f = zeros(s, dt), sc = host(a, s, dt), sum = zeros(s, dt), acc = host(b, s, dt), prod = zeros(s, dt);
    fill(cpu_stream(), f, 0.3f);
    scale(cpu_stream(), sc, 0.7f);
    add(cpu_stream(), sum, host(a, s, dt), host(b, s, dt));
    accumulate(cpu_stream(), acc, host(c, s, dt), -0.3f);
    mul(cpu_stream(), prod, host(a, s, dt), host(c, s, dt));
    const Shape m{73, 41};
    Tensor ba = zeros(m, dt), part = zeros(Shape{73, 30}, dt), un = zeros(m, dt);
    bias_add(cpu_stream(), ba, host(Vec(a.begin(), a.begin() + m.numel()), m, dt), host(bias, Shape{41}, kF));
    slice_cols(cpu_stream(), part, ba, 5);
    unslice_cols(cpu_stream(), un, part, 11);
    Tensor db = zeros(Shape{41}, kF);
    bias_backward(cpu_stream(), db, host(Vec(c.begin(), c.begin() + m.numel()), m, dt));
    return std::vector<Tensor>{f, sc, sum, acc, prod, ba, part, un, db};
  });
  expect_rounded_f32("activations", [&](DType dt) {
    Tensor ge = zeros(s, dt), dge = zeros(s, dt), sw = zeros(s, dt), dg = zeros(s, dt), du = zeros(s, dt),
           again = zeros(s, dt);
    gelu_forward(cpu_stream(), ge, host(a, s, dt));
    gelu_backward(cpu_stream(), dge, host(a, s, dt), host(b, s, dt));
    swiglu_forward(cpu_stream(), sw, host(a, s, dt), host(c, s, dt));
    swiglu_backward(cpu_stream(), dg, du, again, host(b, s, dt), host(a, s, dt), host(c, s, dt));
    EXPECT_EQ(to_vector_f32(again), to_vector_f32(sw)) << "swiglu_backward's out differs from the forward";
    return std::vector<Tensor>{ge, dge, sw, dg, du};
  });
}

TEST(RefBf16, MatmulWithABf16Result) {
  Inputs in(2);
  const int64_t M = 37, N = 70, K = 53;
  const Vec a = in.draw(M * K), b = in.draw(N * K), c0 = in.draw(M * N), bias = in.draw(N);
  for (int variant = 0; variant < 3; ++variant)
    expect_rounded_f32(cat("matmul variant ", variant), [&](DType dt) {
      // A, B bf16 at both dtypes (the f32 run is the mixed-precision GEMM into f32 C).
      Tensor A = host(a, Shape{M, K}, kB), B = host(b, Shape{N, K}, kB);
      Tensor C = host(c0, Shape{M, N}, dt), pre = zeros(Shape{M, N}, dt), bv = host(bias, Shape{N}, kF);
      GemmOpts o;
      o.trans_b = true;
      if (variant == 1) o.bias = &bv, o.gelu = true, o.pre_gelu = &pre;
      if (variant == 2) o.alpha = 0.5f, o.beta = 1.f;
      matmul(cpu_stream(), C, A, B, o);
      return std::vector<Tensor>{C, pre};
    });
}

// With a bf16 C the bias enters as bf16 values (core/ops/gemm.inc, as cuBLASLt's
// epilogue reads it): an f32 bias that bf16 cannot hold gives the f32 product plus the
// rounded bias, rounded once; a bf16 bias of those values gives the same bits; an f32 C
// keeps the f32 bias.
TEST(RefBf16, MatmulIntoBf16AddsTheBiasAsBf16Values) {
  Inputs in(3);
  const int64_t M = 19, N = 40, K = 24;
  const Vec a = in.draw(M * K), b = in.draw(N * K);
  const Vec bias = in.rng.vec(N, -1, 1), bias16 = rounded(bias, kB);
  ASSERT_NE(bias, bias16);
  auto run = [&](DType c_dt, const Vec& bv, DType b_dt, bool gelu) {
    Tensor A = host(a, Shape{M, K}, kB), B = host(b, Shape{N, K}, kB);
    Tensor C = zeros(Shape{M, N}, c_dt), pre = zeros(Shape{M, N}, c_dt), bt = host(bv, Shape{N}, b_dt);
    GemmOpts o;
    o.trans_b = true, o.bias = &bt;
    if (gelu) o.gelu = true, o.pre_gelu = &pre;
    matmul(cpu_stream(), C, A, B, o);
    return std::vector<std::vector<float>>{to_vector_f32(C), to_vector_f32(pre)};
  };
  for (bool gelu : {false, true}) {
    const auto want = run(kF, bias16, kF, gelu);  // f32 C, the rounded bias's values
    const auto got = run(kB, bias, kF, gelu), got16 = run(kB, bias16, kB, gelu);
    for (size_t k = 0; k < 2; ++k) {
      size_t bad = 0;
      for (size_t i = 0; i < want[k].size(); ++i) bad += got[k][i] != rnd(want[k][i]);
      EXPECT_EQ(bad, 0u) << "gelu " << gelu << " output " << k;
      EXPECT_EQ(got16[k], got[k]) << "gelu " << gelu << " output " << k;
    }
    EXPECT_NE(run(kF, bias, kF, gelu)[0], want[0]) << "an f32 C adds the f32 bias";
  }
}

TEST(RefBf16, Norms) {
  Inputs in(3);
  for (int64_t C : {1, 33, 300}) {
    const int64_t N = 19;
    const Shape s{N, C};
    const Vec x = in.draw(N * C, -2, 3), w = in.draw(C), bb = in.draw(C), g = in.draw(N * C), r = in.draw(N * C);
    for (bool fused : {false, true})
      expect_rounded_f32(cat(fused ? "add_" : "", "layernorm/rmsnorm C", C), [&](DType dt) {
        const Tensor W = host(w, Shape{C}, kF), Bb = host(bb, Shape{C}, kF);
        Tensor out = zeros(s, dt), mean = zeros(Shape{N}, kF), rstd = zeros(Shape{N}, kF);
        Tensor din = fused ? host(r, s, dt) : zeros(s, dt), dw = host(w, Shape{C}, kF), db = host(bb, Shape{C}, kF);
        Tensor out2 = zeros(s, dt), rstd2 = zeros(Shape{N}, kF), din2 = fused ? host(r, s, dt) : zeros(s, dt);
        Tensor dw2 = host(w, Shape{C}, kF);
        const Tensor X = host(x, s, dt), G = host(g, s, dt);
        // The fused forward's rule is the bitwise equality of the next test; its backward
        // (dsum += din, one rounding) follows this one.
        layernorm_forward(cpu_stream(), out, mean, rstd, X, W, Bb, 1e-5f);
        rmsnorm_forward(cpu_stream(), out2, rstd2, X, W, 1e-6f);
        if (fused) {
          add_layernorm_backward(cpu_stream(), din, dw, db, G, X, W, mean, rstd);
          add_rmsnorm_backward(cpu_stream(), din2, dw2, G, X, W, rstd2);
        } else {
          layernorm_backward(cpu_stream(), din, dw, db, G, X, W, mean, rstd);
          rmsnorm_backward(cpu_stream(), din2, dw2, G, X, W, rstd2);
        }
        return std::vector<Tensor>{out, mean, rstd, din, dw, db, out2, rstd2, din2, dw2};
      });
  }
}

TEST(RefBf16, RopeOfQAndKTogetherEqualsEach) {
  Inputs in(5);
  const int64_t T = 29, NH = 6, NKV = 2, HS = 18;
  const Vec q = in.draw(T * NH * HS), k = in.draw(T * NKV * HS);
  std::vector<int32_t> p(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) p[size_t(t)] = int32_t((t * 37) % 700);
  const Tensor pos = host_i32(p, Shape{T});
  const Shape sq{T, NH, HS}, sk{T, NKV, HS};
  for (DType dt : {kF, DType::F64, kB})
    for (bool fwd : {true, false}) {
      Tensor q1 = host(q, sq, dt), k1 = host(k, sk, dt), q2 = host(q, sq, dt), k2 = host(k, sk, dt);
      if (fwd) {
        rope_qk_forward(cpu_stream(), q1, k1, pos, 10000.f);
        rope_forward(cpu_stream(), q2, q2, pos, 10000.f);
        rope_forward(cpu_stream(), k2, k2, pos, 10000.f);
      } else {
        rope_qk_backward(cpu_stream(), q1, k1, pos, 10000.f);
        rope_backward(cpu_stream(), q2, q2, pos, 10000.f);
        rope_backward(cpu_stream(), k2, k2, pos, 10000.f);
      }
      EXPECT_EQ(to_vector_f64(q1), to_vector_f64(q2)) << dtype_name(dt) << (fwd ? " forward" : " backward");
      EXPECT_EQ(to_vector_f64(k1), to_vector_f64(k2)) << dtype_name(dt) << (fwd ? " forward" : " backward");
    }
  expect_rounded_f32("rope", [&](DType dt) {
    Tensor q1 = host(q, sq, dt), k1 = host(k, sk, dt), out = zeros(sq, dt);
    rope_qk_forward(cpu_stream(), q1, k1, pos, 10000.f);
    rope_backward(cpu_stream(), out, host(q, sq, dt), pos, 10000.f);
    return std::vector<Tensor>{q1, k1, out};
  });
}

TEST(RefBf16, AttentionAndDecode) {
  Inputs in(6);
  const std::vector<int32_t> cu{0, 5, 22, 55};
  const int64_t T = 55, NH = 4, NKV = 2, HS = 16;
  const Shape sq{T, NH, HS}, skv{T, NKV, HS};
  const Vec q = in.draw(sq.numel(), -2, 2), k = in.draw(skv.numel(), -2, 2), v = in.draw(skv.numel()),
            g = in.draw(sq.numel());
  for (bool causal : {true, false})
    expect_rounded_f32(causal ? "attention causal" : "attention bidirectional", [&](DType dt) {
      const Tensor Q = host(q, sq, dt), K = host(k, skv, dt), V = host(v, skv, dt), cus = host_i32(cu, Shape{4});
      Tensor out = zeros(sq, dt), lse = zeros(Shape{T, NH}, kF);
      attention_forward(cpu_stream(), out, lse, Q, K, V, cus, 33, causal);
      // The backward reads the bf16 run's own (rounded) out, as a layer does.
      Tensor dq = zeros(sq, dt), dk = zeros(skv, dt), dv = zeros(skv, dt);
      attention_backward(cpu_stream(), dq, dk, dv, host(g, sq, dt), Q, K, V, host(rounded(to_vector_f64(out), kB), sq, dt),
                         lse, cus, 33, causal);
      return std::vector<Tensor>{out, lse, dq, dk, dv};
    });
  expect_rounded_f32("attention_decode", [&](DType dt) {
    const Tensor Q = host(Vec(q.begin(), q.begin() + 3 * NH * HS), Shape{3, NH, HS}, dt);
    Tensor out = zeros(Shape{3, NH, HS}, dt);
    attention_decode(cpu_stream(), out, Q, host(k, skv, dt), host(v, skv, dt), host_i32({7, 20, 30}, Shape{3}),
                     host_i32({1, 17, 25}, Shape{3}), 25);
    return std::vector<Tensor>{out};
  });
}

TEST(RefBf16, EmbeddingLossAndPatches) {
  Inputs in(7);
  const int64_t V = 37, C = 33, T = 65, N = 17, Vl = 41;
  const Vec table = in.draw(V * C), dout = in.draw(T * C), logits = in.draw(N * Vl, -10, 10), dl = in.draw(N);
  std::vector<int32_t> ids(static_cast<size_t>(T)), tg(static_cast<size_t>(N));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = int32_t((t * 13) % 60);
  for (int64_t i = 0; i < N; ++i) tg[size_t(i)] = i == 3 ? -1 : int32_t((i * 7) % 120);
  expect_rounded_f32("embedding", [&](DType dt) {
    Tensor out = zeros(Shape{T, C}, dt), dtable = host(table, Shape{V, C}, kF), drows = host(table, Shape{V, C}, dt);
    embedding_forward(cpu_stream(), out, host_i32(ids, Shape{T}), host(table, Shape{V, C}, dt), 10);
    embedding_backward(cpu_stream(), dtable, host(dout, Shape{T, C}, dt), host_i32(ids, Shape{T}), 10);
    // Into a bf16 table (the backbone's caller rows) each row's sum is rounded once, also
    // over a long run of one id (as on CUDA): the f32 sums rounded.
    std::vector<int32_t> runs(ids);
    for (int64_t t = 0; t < T; t += 2) runs[size_t(t)] = 12;  // 33 tokens of row 2
    embedding_backward(cpu_stream(), drows, host(dout, Shape{T, C}, dt), host_i32(runs, Shape{T}), 10);
    return std::vector<Tensor>{out, dtable, drows};
  });
  expect_rounded_f32("vocab_ce", [&](DType dt) {
    const Tensor L = host(logits, Shape{N, Vl}, dt), targets = host_i32(tg, Shape{N});
    Tensor rowmax = zeros(Shape{N}, kF), sumexp = zeros(Shape{N}, kF), tl = zeros(Shape{N}, kF),
           losses = zeros(Shape{N}, kF), dlog = zeros(Shape{N, Vl}, dt);
    vocab_ce_rowmax(cpu_stream(), rowmax, L);
    vocab_ce_sumexp(cpu_stream(), sumexp, tl, L, rowmax, targets, 50);
    vocab_ce_loss(cpu_stream(), losses, rowmax, sumexp, tl, targets, -1);
    vocab_ce_backward(cpu_stream(), dlog, L, rowmax, sumexp, targets, host(dl, Shape{N}, kF), 50, -1);
    // In place (the output head's fused loss): the same gradient over the logits.
    const Tensor L2 = host(logits, Shape{N, Vl}, dt);
    vocab_ce_backward(cpu_stream(), L2, L2, rowmax, sumexp, targets, host(dl, Shape{N}, kF), 50, -1);
    EXPECT_EQ(to_vector_f64(L2), to_vector_f64(dlog)) << "in place, " << dtype_name(dt);
    return std::vector<Tensor>{rowmax, sumexp, tl, losses, dlog};
  });
  expect_rounded_f32("image_to_patches", [&](DType dt) {
    std::vector<int32_t> px(2 * 12 * 12 * 3);
    for (size_t i = 0; i < px.size(); ++i) px[i] = int32_t((i * 31) % 256);
    Tensor u8 = zeros(Shape{2, 12, 12, 3}, DType::U8);
    for (size_t i = 0; i < px.size(); ++i) u8.ptr<uint8_t>()[i] = uint8_t(px[i]);
    Tensor out = zeros(Shape{18, 48}, dt);
    image_to_patches(cpu_stream(), out, u8, 4, PixelNorm{});
    return std::vector<Tensor>{out};
  });
}

}  // namespace
}  // namespace vlm::test
