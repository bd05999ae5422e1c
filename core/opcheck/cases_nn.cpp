// Conformance cases, parts 2 and 3 (op_case.h): norms (also frozen: no weight
// gradients), softmax, sigmoid, row_stats, rope, attention and embedding, forward and
// backward (nn_cases), then cross-entropy, the vocab-parallel pieces, conv2d (also
// without bias, without input or bias gradient), avgpool2d, maps_to_rows/rows_to_maps,
// image_to_patches and AdamW (loss_conv_optim_cases).
// Tolerances, set by what each CUDA path computes: norms and row_stats 1e-4 (f32
// statistics), softmax/sigmoid/CE/pool 1e-5, rope 2e-4 (f32 angles of positions up to
// 512), attention 1e-4 (f32 on both backends, online softmax against the CPU's order;
// an off-by-one causal mask moves outputs by about 1/length, a wrong GQA mapping by
// O(0.1)), conv 1e-5 (cuDNN with CUDNN_FMA_MATH: exact f32, no TF32),
// image_to_patches 1e-6, AdamW 1e-5.
// Attention runs at head sizes 16, 24, 64, 128 and 256 (the CUDA kernels' 1, 2, 4 and
// 8 registers per lane, core/cuda/attention_common.cuh) and lengths that are not
// multiples of its tiles (16 queries, 32 keys).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {

std::vector<OpCase> nn_cases() {
  std::vector<OpCase> v;
  // N = 300: the CUDA weight gradients' row chunks (norm.cu) are three, the last partial.
  for (int64_t N : {1, 17, 300})
    for (int64_t C : {33, 768}) {
      v.push_back({cat("layernorm N", N, " C", C), 1e-4, [=](Backend& b) {
                     CaseCtx c(b, 6000 + uint64_t(N * C));
                     Tensor in = c.rand(Shape{N, C}, -2, 4), w = c.rand(Shape{C}), bias = c.rand(Shape{C});
                     Tensor out = c.junk(Shape{N, C}), mean = c.junk(Shape{N}), rstd = c.junk(Shape{N});
                     layernorm_forward(c.stream(), out, mean, rstd, in, w, bias, 1e-5f);
                     Tensor din = c.junk(Shape{N, C}), dw = c.rand(Shape{C}), db = c.rand(Shape{C});
                     layernorm_backward(c.stream(), din, dw, db, c.rand(Shape{N, C}), in, w, mean, rstd);
                     return OpOutputs{{"out", out}, {"mean", mean}, {"rstd", rstd}, {"din", din}, {"dw", dw}, {"db", db}};
                   }});
      v.push_back({cat("rmsnorm N", N, " C", C), 1e-4, [=](Backend& b) {
                     CaseCtx c(b, 6100 + uint64_t(N * C));
                     Tensor in = c.rand(Shape{N, C}, -2, 4), w = c.rand(Shape{C});
                     Tensor out = c.junk(Shape{N, C}), rstd = c.junk(Shape{N});
                     rmsnorm_forward(c.stream(), out, rstd, in, w, 1e-6f);
                     Tensor din = c.junk(Shape{N, C}), dw = c.rand(Shape{C});
                     rmsnorm_backward(c.stream(), din, dw, c.rand(Shape{N, C}), in, w, rstd);
                     return OpOutputs{{"out", out}, {"rstd", rstd}, {"din", din}, {"dw", dw}};
                   }});
      // A frozen norm (only din): the backward without weight gradients.
      v.push_back({cat("layernorm/rmsnorm frozen N", N, " C", C), 1e-4, [=](Backend& b) {
                     CaseCtx c(b, 6150 + uint64_t(N * C));
                     Tensor in = c.rand(Shape{N, C}, -2, 4), w = c.rand(Shape{C}), bias = c.rand(Shape{C});
                     Tensor out = c.junk(Shape{N, C}), mean = c.junk(Shape{N}), rstd = c.junk(Shape{N});
                     Tensor din = c.junk(Shape{N, C}), dout = c.rand(Shape{N, C});
                     layernorm_forward(c.stream(), out, mean, rstd, in, w, bias, 1e-5f);
                     layernorm_backward(c.stream(), din, Tensor{}, Tensor{}, dout, in, w, mean, rstd);
                     Tensor rout = c.junk(Shape{N, C}), rrstd = c.junk(Shape{N}), rdin = c.junk(Shape{N, C});
                     rmsnorm_forward(c.stream(), rout, rrstd, in, w, 1e-6f);
                     rmsnorm_backward(c.stream(), rdin, Tensor{}, dout, in, w, rrstd);
                     return OpOutputs{{"layernorm din", din}, {"rmsnorm din", rdin}};
                   }});
      v.push_back({cat("softmax N", N, " C", C), 1e-5, [=](Backend& b) {
                     CaseCtx c(b, 6200 + uint64_t(N * C));
                     Tensor out = c.junk(Shape{N, C}), din = c.junk(Shape{N, C});
                     softmax_forward(c.stream(), out, c.rand(Shape{N, C}, -20, 20));
                     softmax_backward(c.stream(), din, c.rand(Shape{N, C}), out);
                     return OpOutputs{{"out", out}, {"din", din}};
                   }});
      v.push_back({cat("sigmoid N", N, " C", C), 1e-5, [=](Backend& b) {
                     CaseCtx c(b, 6250 + uint64_t(N * C));
                     Tensor out = c.junk(Shape{N, C}), din = c.junk(Shape{N, C});
                     sigmoid_forward(c.stream(), out, c.rand(Shape{N, C}, -12, 12));
                     sigmoid_backward(c.stream(), din, c.rand(Shape{N, C}), out);
                     return OpOutputs{{"out", out}, {"din", din}};
                   }});
      v.push_back({cat("row_stats N", N, " C", C), 1e-4, [=](Backend& b) {
                     CaseCtx c(b, 6270 + uint64_t(N * C));
                     Tensor in = c.rand(Shape{N, C}, -3, 5);
                     Tensor out = c.junk(Shape{N, 3}), din = c.junk(Shape{N, C});
                     row_stats_forward(c.stream(), out, in, 1e-6f);
                     row_stats_backward(c.stream(), din, c.rand(Shape{N, 3}), in, out);
                     return OpOutputs{{"out", out}, {"din", din}};
                   }});
    }
  // Head sizes 6 and 12 turn one pair per thread on CUDA (half a head not a multiple of
  // 4), 64 four.
  for (int64_t HS : {6, 12, 64})
    v.push_back({cat("rope T17 NH3 HS", HS), 2e-4, [=](Backend& b) {
                   CaseCtx c(b, 6300 + uint64_t(HS));
                   Tensor pos = c.ints(Shape{17}, 0, 512), x = c.rand(Shape{17, 3, HS});
                   Tensor out = c.junk(Shape{17, 3, HS}), din = c.rand(Shape{17, 3, HS});
                   rope_forward(c.stream(), out, x, pos, 10000.f);
                   rope_backward(c.stream(), din, din, pos, 10000.f);  // in place
                   return OpOutputs{{"out", out}, {"din", din}};
                 }});
  struct AttnCfg {
    std::vector<int32_t> lens;
    int64_t NH, NKV, HS;
  };
  const AttnCfg cfgs[] = {{{1, 17, 33}, 4, 2, 16}, {{65}, 2, 2, 64},    {{7, 3}, 6, 1, 24},
                          {{47, 129}, 4, 2, 128},  {{1, 70}, 2, 1, 256}, {{100}, 2, 2, 200}};
  for (const AttnCfg& cf : cfgs)
    for (bool causal : {true, false}) {
      std::vector<int32_t> cu{0};
      int mx = 0;
      for (int32_t l : cf.lens) cu.push_back(cu.back() + l), mx = std::max(mx, int(l));
      const int64_t T = cu.back(), NH = cf.NH, NKV = cf.NKV, HS = cf.HS;
      v.push_back({cat("attention T", T, " B", cf.lens.size(), " NH", NH, " NKV", NKV, " HS", HS,
                       causal ? " causal" : " bidirectional"),
                   1e-4, [=](Backend& b) {
                     CaseCtx c(b, 6400 + uint64_t(T * NH + HS + causal));
                     const Shape sq{T, NH, HS}, skv{T, NKV, HS};
                     Tensor q = c.rand(sq, -2, 2), k = c.rand(skv, -2, 2), vv = c.rand(skv), cus = c.i32(cu);
                     Tensor out = c.junk(sq), lse = c.junk(Shape{T, NH});
                     attention_forward(c.stream(), out, lse, q, k, vv, cus, mx, causal);
                     Tensor dq = c.junk(sq), dk = c.junk(skv), dv = c.junk(skv);
                     attention_backward(c.stream(), dq, dk, dv, c.rand(sq), q, k, vv, out, lse, cus, mx, causal);
                     return OpOutputs{{"out", out}, {"lse", lse}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
                   }});
    }
  for (int64_t C : {1, 33})
    v.push_back({cat("embedding V37 C", C, " T65 offset10"), 1e-5, [=](Backend& b) {
                   CaseCtx c(b, 6500 + uint64_t(C));
                   Tensor ids = c.ints(Shape{65}, 0, 60), table = c.rand(Shape{37, C});
                   Tensor out = c.junk(Shape{65, C}), dtable = c.rand(Shape{37, C});
                   embedding_forward(c.stream(), out, ids, table, 10);
                   embedding_backward(c.stream(), dtable, c.rand(Shape{65, C}), ids, 10);
                   return OpOutputs{{"out", out}, {"dtable", dtable}};
                 }});
  return v;
}

OpCase vocab_ce_case(int64_t Vl, DType dt, double tol, uint64_t seed) {
  const bool in_place = dt == DType::BF16;
  return {cat("vocab_ce_rowmax/vocab_ce_sumexp/vocab_ce_loss/vocab_ce_backward", in_place ? " bf16" : "",
              " N17 shard [50,", 50 + Vl, ")", in_place ? " in place" : ""),
          tol, [=](Backend& b) {
            CaseCtx c(b, seed);
            const int64_t N = 17;
            Tensor logits = c.rand(Shape{N, Vl}, -10, 10, dt), tg = c.ints(Shape{N}, -1, int(Vl) + 87);
            Tensor rowmax = c.junk(Shape{N}), sumexp = c.junk(Shape{N}), tl = c.junk(Shape{N});
            Tensor losses = c.junk(Shape{N}), dl = in_place ? logits : c.junk(Shape{N, Vl});
            vocab_ce_rowmax(c.stream(), rowmax, logits);
            vocab_ce_sumexp(c.stream(), sumexp, tl, logits, rowmax, tg, 50);
            vocab_ce_loss(c.stream(), losses, rowmax, sumexp, tl, tg, -1);
            vocab_ce_backward(c.stream(), dl, logits, rowmax, sumexp, tg, c.rand(Shape{N}), 50, -1);
            return OpOutputs{{"rowmax", rowmax}, {"sumexp", sumexp}, {"target_logit", tl}, {"losses", losses},
                             {"dlogits", dl}};
          }};
}

std::vector<OpCase> loss_conv_optim_cases() {
  std::vector<OpCase> v;
  for (int64_t V : {33, 1000})
    v.push_back({cat("cross_entropy N17 V", V), 1e-5, [=](Backend& b) {
                   CaseCtx c(b, 7000 + uint64_t(V));
                   Tensor logits = c.rand(Shape{17, V}, -10, 10), tg = c.ints(Shape{17}, -1, int(V) - 1);
                   Tensor losses = c.junk(Shape{17}), dl = c.junk(Shape{17, V});
                   cross_entropy_forward(c.stream(), losses, logits, tg, -1);
                   cross_entropy_backward(c.stream(), dl, logits, tg, c.rand(Shape{17}), -1);
                   return OpOutputs{{"losses", losses}, {"dlogits", dl}};
                 }});
  // A shard of 33 columns (one element per access on CUDA) and of 1024 (four).
  for (int64_t Vl : {33, 1024}) v.push_back(vocab_ce_case(Vl, DType::F32, 1e-5, 7100 + uint64_t(Vl == 33 ? 0 : Vl)));
  struct ConvCfg {
    int64_t B, Cin, H, W, Cout, K;
    int stride, pad;
  };
  // Variants: 0 all of it; 1 no bias (forward without it, backward without dbias);
  // 2 no input gradient (a first layer: dw and dbias only).
  for (auto [cf, variant] : {std::pair{ConvCfg{2, 3, 17, 15, 8, 3, 1, 1}, 0}, {ConvCfg{1, 3, 32, 32, 16, 8, 8, 0}, 0},
                             {ConvCfg{3, 5, 9, 9, 7, 4, 2, 1}, 0}, {ConvCfg{2, 4, 11, 13, 6, 3, 2, 1}, 1},
                             {ConvCfg{1, 3, 32, 32, 16, 8, 8, 0}, 2}}) {
    const int64_t Ho = (cf.H + 2 * cf.pad - cf.K) / cf.stride + 1, Wo = (cf.W + 2 * cf.pad - cf.K) / cf.stride + 1;
    const bool has_bias = variant != 1, has_din = variant != 2;
    v.push_back({cat("conv2d B", cf.B, " Cin", cf.Cin, " ", cf.H, "x", cf.W, " Cout", cf.Cout, " k", cf.K, " s",
                     cf.stride, " p", cf.pad, has_bias ? "" : " no bias", has_din ? "" : " no din"),
                 1e-5, [=](Backend& b) {
                   CaseCtx c(b, 7200 + uint64_t(cf.H * cf.K + variant));
                   const Shape si{cf.B, cf.Cin, cf.H, cf.W}, sw{cf.Cout, cf.Cin, cf.K, cf.K}, so{cf.B, cf.Cout, Ho, Wo};
                   Tensor in = c.rand(si), w = c.rand(sw), bias = c.rand(Shape{cf.Cout}), out = c.junk(so);
                   conv2d_forward(c.stream(), out, in, w, has_bias ? bias : Tensor{}, cf.stride, cf.pad);
                   Tensor din = c.junk(si), dw = c.rand(sw), db = c.rand(Shape{cf.Cout});
                   conv2d_backward(c.stream(), has_din ? din : Tensor{}, dw, has_bias ? db : Tensor{}, c.rand(so), in,
                                   w, cf.stride, cf.pad);
                   OpOutputs o{{"out", out}, {"dw", dw}};
                   if (has_din) o.push_back({"din", din});
                   if (has_bias) o.push_back({"dbias", db});
                   return o;
                 }});
  }
  for (int k : {2, 3}) {
    const int stride = k == 2 ? 2 : 1;
    v.push_back({cat("avgpool2d 2x3x9x8 k", k, " s", stride), 1e-5, [=](Backend& b) {
                   CaseCtx c(b, 7300 + uint64_t(k));
                   const Shape si{2, 3, 9, 8}, so{2, 3, (9 - k) / stride + 1, (8 - k) / stride + 1};
                   Tensor out = c.junk(so), din = c.junk(si);
                   avgpool2d_forward(c.stream(), out, c.rand(si), k, stride);
                   avgpool2d_backward(c.stream(), din, c.rand(so), k, stride);
                   return OpOutputs{{"out", out}, {"din", din}};
                 }});
  }
  // maps_to_rows / rows_to_maps: a permutation, so exact (tolerance 0).
  v.push_back({"maps_to_rows/rows_to_maps 2x5x3x4", 0, [=](Backend& b) {
                 CaseCtx c(b, 7400);
                 const Shape sm{2, 5, 3, 4}, sr{2 * 3 * 4, 5};
                 Tensor rows = c.junk(sr), maps = c.junk(sm);
                 maps_to_rows(c.stream(), rows, c.rand(sm));
                 rows_to_maps(c.stream(), maps, c.rand(sr));
                 return OpOutputs{{"rows", rows}, {"maps", maps}};
               }});
  // image_to_patches: exact on both backends up to the last bit of the division (pixel
  // values 0..255, so any indexing mistake moves values by >= 1/255 / 0.5).
  for (int P : {1, 4}) {
    v.push_back({cat("image_to_patches B2 S12 P", P), 1e-6, [=](Backend& b) {
                   CaseCtx c(b, 7500 + uint64_t(P));
                   const int64_t B = 2, S = 12, G = S / P;
                   const std::vector<float> vals = to_vector_f32(c.ints(Shape{B, S, S, 3}, 0, 255));
                   Tensor px = Tensor::empty(cpu_backend(), Shape{B, S, S, 3}, DType::U8);
                   for (size_t i = 0; i < vals.size(); ++i) px.ptr<uint8_t>()[i] = uint8_t(vals[i]);
                   PixelNorm n;
                   n.mean = {0.48f, 0.46f, 0.41f};
                   n.stddev = {0.27f, 0.26f, 0.28f};
                   Tensor out = c.junk(Shape{B * G * G, 3 * P * P});
                   image_to_patches(c.stream(), out, to_backend(b, px), P, n);
                   return OpOutputs{{"out", out}};
                 }});
  }
  // n = 1025: the CUDA kernel's four-wide path and a tail of one; offset 1: every array
  // a slice one element off the 16-byte alignment the four-wide path needs.
  for (auto [n, off] : {std::pair<int64_t, int64_t>{1, 0}, {1025, 0}, {1027, 1}})
    for (bool bf16_copy : {false, true})
      v.push_back({cat("adamw_step n", n, off ? " offset 1" : "", bf16_copy ? " bf16 copy" : " f32 copy"),
                   bf16_copy ? 8e-3 : 1e-5, [=](Backend& b) {
                     CaseCtx c(b, 7400 + uint64_t(n));
                     auto part = [&](Tensor t) { return t.slice(off, off + n); };
                     Tensor p = part(c.rand(Shape{n + off})), m = part(c.rand(Shape{n + off}, -0.1, 0.1)),
                            vv = part(c.rand(Shape{n + off}, 0, 0.01));
                     Tensor copy = part(c.zeros(Shape{n + off}, bf16_copy ? DType::BF16 : DType::F32));
                     AdamWOpts o;
                     o.lr = 1e-2f, o.weight_decay = 0.1f, o.grad_scale = 0.5f, o.step = 7;
                     adamw_step(c.stream(), p, part(c.rand(Shape{n + off})), m, vv, copy, o);
                     return OpOutputs{{"param", p}, {"m", m}, {"v", vv}, {"param_copy", copy}};
                   }});
  return v;
}

}  // namespace vlm::opcheck
