// Finite-difference checks (f64, CPU) of the layer backwards: layernorm, rmsnorm, the
// fused residual add + norm, softmax, rope (and of q and k together), attention (causal and bidirectional, GQA, several samples of different
// lengths), embedding with a vocab offset, cross-entropy with ignore_index, the four
// vocab-parallel pieces composed over two shards, conv2d, avgpool2d, sigmoid and
// row_stats. Saved
// statistics are f64 here so the analytic gradients are exact.
#include "tests/core/gradcheck.h"

namespace vlm::test {
namespace {

Stream& S() { return cpu_stream(); }

TEST(Gradcheck, Layernorm) {
  Rng rng(100);
  const int64_t N = 3, C = 7;
  for (bool with_bias : {true, false}) {
    GradProblem p;
    p.inputs = {host(rng.vec(N * C, -2, 2), Shape{N, C}), host(rng.vec(C), Shape{C}), host(rng.vec(C), Shape{C})};
    Tensor mean = zeros(Shape{N}), rstd = zeros(Shape{N});
    p.forward = [&] {
      Tensor o = zeros(Shape{N, C});
      layernorm_forward(S(), o, mean, rstd, p.inputs[0], p.inputs[1], with_bias ? p.inputs[2] : Tensor(), 1e-5f);
      return std::vector<Tensor>{o};
    };
    p.backward = [&](const std::vector<Tensor>& d) {
      p.forward();
      Tensor din = garbage(Shape{N, C}), db;
      Tensor dw = accumulated(Shape{C}, [&](const Tensor& g) {
        if (with_bias)
          db = accumulated(Shape{C}, [&](const Tensor& gb) {
            layernorm_backward(S(), din, g, gb, d[0], p.inputs[0], p.inputs[1], mean, rstd);
          });
        else
          layernorm_backward(S(), din, g, Tensor(), d[0], p.inputs[0], p.inputs[1], mean, rstd);
      });
      return std::vector<Tensor>{din, dw, db};
    };
    gradcheck(p, 101);
  }
}

TEST(Gradcheck, Rmsnorm) {
  Rng rng(110);
  const int64_t N = 4, C = 5;
  GradProblem p;
  p.inputs = {host(rng.vec(N * C, -2, 2), Shape{N, C}), host(rng.vec(C), Shape{C})};
  Tensor rstd = zeros(Shape{N});
  p.forward = [&] {
    Tensor o = zeros(Shape{N, C});
    rmsnorm_forward(S(), o, rstd, p.inputs[0], p.inputs[1], 1e-5f);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    p.forward();
    Tensor din = garbage(Shape{N, C});
    Tensor dw = accumulated(Shape{C}, [&](const Tensor& g) {
      rmsnorm_backward(S(), din, g, d[0], p.inputs[0], p.inputs[1], rstd);
    });
    return std::vector<Tensor>{din, dw};
  };
  gradcheck(p, 111);
}

// The fused residual add + norm: outputs sum = a + b and out = norm(sum); the backward
// of both is dsum (the residual path's gradient) += the norm's input gradient, which is
// the gradient of a and of b.
TEST(Gradcheck, AddLayernormAndAddRmsnorm) {
  Rng rng(115);
  const int64_t N = 3, C = 6;
  const Shape s{N, C};
  for (bool layer : {true, false}) {
    GradProblem p;
    p.inputs = {host(rng.vec(N * C, -2, 2), s), host(rng.vec(N * C, -2, 2), s), host(rng.vec(C), Shape{C}),
                host(rng.vec(C), Shape{C})};
    Tensor sum = zeros(s), mean = zeros(Shape{N}), rstd = zeros(Shape{N});
    p.forward = [&] {
      Tensor o = zeros(s);
      if (layer)
        add_layernorm_forward(S(), sum, o, mean, rstd, p.inputs[0], p.inputs[1], p.inputs[2], p.inputs[3], 1e-5f);
      else
        add_rmsnorm_forward(S(), sum, o, rstd, p.inputs[0], p.inputs[1], p.inputs[2], 1e-5f);
      Tensor sc = zeros(s);
      copy_tensor(sc, sum);
      return std::vector<Tensor>{sc, o};
    };
    p.backward = [&](const std::vector<Tensor>& d) {
      p.forward();
      Tensor dsum = zeros(s), db;
      copy_tensor(dsum, d[0]);
      Tensor dw = accumulated(Shape{C}, [&](const Tensor& g) {
        if (layer)
          db = accumulated(Shape{C}, [&](const Tensor& gb) {
            add_layernorm_backward(S(), dsum, g, gb, d[1], sum, p.inputs[2], mean, rstd);
          });
        else
          add_rmsnorm_backward(S(), dsum, g, d[1], sum, p.inputs[2], rstd);
      });
      return std::vector<Tensor>{dsum, dsum, dw, db};
    };
    gradcheck(p, 116);
  }
}

// RoPE of q and k together (grouped-query: k has fewer heads), both in place.
TEST(Gradcheck, RopeQk) {
  Rng rng(125);
  const Shape sq{5, 4, 6}, sk{5, 2, 6};
  Tensor pos = host_i32({0, 3, 7, 100, 2}, Shape{5});
  GradProblem p;
  p.inputs = {host(rng.vec(sq.numel()), sq), host(rng.vec(sk.numel()), sk)};
  p.forward = [&] {
    Tensor q = zeros(sq), k = zeros(sk);
    copy_tensor(q, p.inputs[0]);
    copy_tensor(k, p.inputs[1]);
    rope_qk_forward(S(), q, k, pos, 500.f);
    return std::vector<Tensor>{q, k};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor dq = zeros(sq), dk = zeros(sk);
    copy_tensor(dq, d[0]);
    copy_tensor(dk, d[1]);
    rope_qk_backward(S(), dq, dk, pos, 500.f);
    return std::vector<Tensor>{dq, dk};
  };
  gradcheck(p, 126);
}

TEST(Gradcheck, SoftmaxAndRope) {
  Rng rng(120);
  GradProblem p;
  p.inputs = {host(rng.vec(18, -3, 3), Shape{3, 6})};
  p.forward = [&] {
    Tensor o = zeros(Shape{3, 6});
    softmax_forward(S(), o, p.inputs[0]);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor din = garbage(Shape{3, 6});
    softmax_backward(S(), din, d[0], p.forward()[0]);
    return std::vector<Tensor>{din};
  };
  gradcheck(p, 121);
  const Shape s{5, 2, 6};
  Tensor pos = host_i32({0, 3, 7, 100, 2}, Shape{5});
  GradProblem r;
  r.inputs = {host(rng.vec(s.numel()), s)};
  r.forward = [&] {
    Tensor o = zeros(s);
    rope_forward(S(), o, r.inputs[0], pos, 500.f);
    return std::vector<Tensor>{o};
  };
  r.backward = [&](const std::vector<Tensor>& d) {
    Tensor din = zeros(s);
    copy_tensor(din, d[0]);
    rope_backward(S(), din, din, pos, 500.f);  // in place
    return std::vector<Tensor>{din};
  };
  gradcheck(r, 122);
}

void attention_problem(const std::vector<int32_t>& lens, int64_t NH, int64_t NKV, int64_t HS, bool causal,
                       uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> cu{0};
  int mx = 0;
  for (int32_t l : lens) cu.push_back(cu.back() + l), mx = std::max(mx, int(l));
  const int64_t T = cu.back();
  const Shape sq{T, NH, HS}, skv{T, NKV, HS};
  Tensor cus = host_i32(cu, Shape{int64_t(cu.size())}), lse = zeros(Shape{T, NH});
  GradProblem p;
  p.inputs = {host(rng.vec(sq.numel(), -1.5, 1.5), sq), host(rng.vec(skv.numel(), -1.5, 1.5), skv),
              host(rng.vec(skv.numel()), skv)};
  p.forward = [&] {
    Tensor o = zeros(sq);
    attention_forward(S(), o, lse, p.inputs[0], p.inputs[1], p.inputs[2], cus, mx, causal);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor out = p.forward()[0];
    Tensor dq = garbage(sq), dk = garbage(skv), dv = garbage(skv);
    attention_backward(S(), dq, dk, dv, d[0], p.inputs[0], p.inputs[1], p.inputs[2], out, lse, cus, mx, causal);
    return std::vector<Tensor>{dq, dk, dv};
  };
  SCOPED_TRACE(::testing::Message() << "NH" << NH << " NKV" << NKV << " causal " << causal);
  gradcheck(p, seed + 1);
}

TEST(Gradcheck, Attention) {
  for (bool causal : {true, false}) {
    attention_problem({3, 1, 5}, 4, 2, 4, causal, 130);  // GQA, three samples
    attention_problem({4, 2}, 2, 2, 3, causal, 140);     // MHA, odd head size
    attention_problem({6}, 3, 1, 2, causal, 150);        // MQA
  }
}

TEST(Gradcheck, EmbeddingShard) {
  Rng rng(160);
  const int64_t V = 5, C = 3, off = 4;
  Tensor ids = host_i32({4, 8, 2, 6, 6, 9, 4}, Shape{7});  // 2 and 9 are outside [4, 9)
  GradProblem p;
  p.inputs = {host(rng.vec(V * C), Shape{V, C})};
  p.forward = [&] {
    Tensor o = zeros(Shape{7, C});
    embedding_forward(S(), o, ids, p.inputs[0], off);
    return std::vector<Tensor>{o};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    return std::vector<Tensor>{
        accumulated(Shape{V, C}, [&](const Tensor& g) { embedding_backward(S(), g, d[0], ids, off); })};
  };
  gradcheck(p, 161);
}

TEST(Gradcheck, CrossEntropy) {
  Rng rng(170);
  const int64_t N = 4, V = 6;
  Tensor tg = host_i32({2, -1, 5, 0}, Shape{N});
  GradProblem p;
  p.inputs = {host(rng.vec(N * V, -3, 3), Shape{N, V})};
  p.forward = [&] {
    Tensor l = zeros(Shape{N});
    cross_entropy_forward(S(), l, p.inputs[0], tg, -1);
    return std::vector<Tensor>{l};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    Tensor dl = garbage(Shape{N, V});
    cross_entropy_backward(S(), dl, p.inputs[0], tg, d[0], -1);
    return std::vector<Tensor>{dl};
  };
  gradcheck(p, 171);
}

// The vocab-parallel pieces composed over two column shards of the logits, with the
// all-reduces (MAX of rowmax, SUM of sumexp and target_logit) done by hand.
TEST(Gradcheck, VocabParallelCrossEntropy) {
  Rng rng(180);
  const int64_t N = 4, V = 7, off[2] = {0, 3}, w[2] = {3, 4};
  Tensor tg = host_i32({1, 5, -7, 3}, Shape{N});
  GradProblem p;
  p.inputs = {host(rng.vec(N * V, -3, 3), Shape{N, V})};
  Tensor rowmax = zeros(Shape{N}), sumexp = zeros(Shape{N});
  auto shard = [&](int i) {
    Tensor t = zeros(Shape{N, w[i]});
    slice_cols(S(), t, p.inputs[0], off[i]);
    return t;
  };
  p.forward = [&] {
    Vec mx(static_cast<size_t>(N), -1e300), se(static_cast<size_t>(N), 0.0), tl(static_cast<size_t>(N), 0.0);
    for (int i = 0; i < 2; ++i) {
      Tensor m = zeros(Shape{N});
      vocab_ce_rowmax(S(), m, shard(i));
      Vec v = to_vector_f64(m);
      for (size_t n = 0; n < mx.size(); ++n) mx[n] = std::max(mx[n], v[n]);
    }
    copy_tensor(rowmax, host(mx, Shape{N}));
    for (int i = 0; i < 2; ++i) {
      Tensor a = zeros(Shape{N}), b = zeros(Shape{N});
      vocab_ce_sumexp(S(), a, b, shard(i), rowmax, tg, off[i]);
      Vec va = to_vector_f64(a), vb = to_vector_f64(b);
      for (size_t n = 0; n < se.size(); ++n) se[n] += va[n], tl[n] += vb[n];
    }
    copy_tensor(sumexp, host(se, Shape{N}));
    Tensor l = zeros(Shape{N});
    vocab_ce_loss(S(), l, rowmax, sumexp, host(tl, Shape{N}), tg, -7);
    return std::vector<Tensor>{l};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    p.forward();
    Tensor dl = garbage(Shape{N, V});
    for (int i = 0; i < 2; ++i) {
      Tensor ds = garbage(Shape{N, w[i]});
      vocab_ce_backward(S(), ds, shard(i), rowmax, sumexp, tg, d[0], off[i], -7);
      unslice_cols(S(), dl, ds, off[i]);
    }
    return std::vector<Tensor>{dl};
  };
  gradcheck(p, 181);
}

TEST(Gradcheck, Conv2d) {
  struct Cfg {
    int64_t B, Cin, H, W, Cout, KH, KW;
    int stride, pad;
  };
  const Cfg cfgs[] = {{2, 2, 5, 4, 3, 3, 3, 2, 1}, {1, 3, 4, 4, 2, 2, 2, 2, 0}, {1, 1, 3, 5, 2, 1, 3, 1, 1}};
  uint64_t seed = 190;
  for (const Cfg& c : cfgs) {
    Rng rng(seed++);
    const Shape si{c.B, c.Cin, c.H, c.W}, sw{c.Cout, c.Cin, c.KH, c.KW};
    const Shape so{c.B, c.Cout, (c.H + 2 * c.pad - c.KH) / c.stride + 1, (c.W + 2 * c.pad - c.KW) / c.stride + 1};
    GradProblem p;
    p.inputs = {host(rng.vec(si.numel()), si), host(rng.vec(sw.numel()), sw), host(rng.vec(c.Cout), Shape{c.Cout})};
    p.forward = [&] {
      Tensor o = zeros(so);
      conv2d_forward(S(), o, p.inputs[0], p.inputs[1], p.inputs[2], c.stride, c.pad);
      return std::vector<Tensor>{o};
    };
    p.backward = [&](const std::vector<Tensor>& d) {
      Tensor din = garbage(si), db;
      Tensor dw = accumulated(sw, [&](const Tensor& g) {
        db = accumulated(Shape{c.Cout}, [&](const Tensor& gb) {
          conv2d_backward(S(), din, g, gb, d[0], p.inputs[0], p.inputs[1], c.stride, c.pad);
        });
      });
      return std::vector<Tensor>{din, dw, db};
    };
    gradcheck(p, seed + 100);
  }
}

TEST(Gradcheck, Avgpool2d) {
  for (int k : {2, 3})
    for (int stride : {1, 2}) {
      Rng rng(uint64_t(200 + k * 10 + stride));
      const Shape si{2, 2, 5, 6}, so{2, 2, (5 - k) / stride + 1, (6 - k) / stride + 1};
      GradProblem p;
      p.inputs = {host(rng.vec(si.numel()), si)};
      p.forward = [&] {
        Tensor o = zeros(so);
        avgpool2d_forward(S(), o, p.inputs[0], k, stride);
        return std::vector<Tensor>{o};
      };
      p.backward = [&](const std::vector<Tensor>& d) {
        Tensor din = garbage(si);
        avgpool2d_backward(S(), din, d[0], k, stride);
        return std::vector<Tensor>{din};
      };
      gradcheck(p, 210);
    }
}

TEST(Gradcheck, SigmoidAndRowStats) {
  Rng rng(130);
  GradProblem p;
  p.inputs = {host(rng.vec(18, -3, 3), Shape{3, 6})};
  p.forward = [&] {
    Tensor o = zeros(Shape{3, 6}), st = zeros(Shape{3, 3});
    sigmoid_forward(S(), o, p.inputs[0]);
    row_stats_forward(S(), st, p.inputs[0], 1e-6f);
    return std::vector<Tensor>{o, st};
  };
  p.backward = [&](const std::vector<Tensor>& d) {
    std::vector<Tensor> o = p.forward();
    Tensor din = garbage(Shape{3, 6}), din2 = garbage(Shape{3, 6});
    sigmoid_backward(S(), din, d[0], o[0]);
    row_stats_backward(S(), din2, d[1], p.inputs[0], o[1]);
    accumulate(S(), din, din2, 1.f);
    return std::vector<Tensor>{din};
  };
  gradcheck(p, 131);
}

}  // namespace
}  // namespace vlm::test
