// Conformance cases, part 5 (op_case.h): every op that takes bf16 activations, on bf16
// tensors (train.precision=bf16: docs/training.md, "Numerics"), and the fused ops
// (docs/ops.md, "Fused ops") in f32 and bf16. A bf16 output is an f32 result rounded
// once on each backend, so a result within an f32 rounding of a bf16 halfway point may
// round either way: tolerance 1e-2 (a wrong value is O(0.1..1)); the fused ops in f32
// take their unfused ops' tolerances.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {
namespace {

constexpr DType kB = DType::BF16;
constexpr double kTolBf16 = 1e-2;

const char* dname(DType dt) { return dt == kB ? "bf16" : "f32"; }
double tol_of(DType dt, double f32_tol) { return dt == kB ? kTolBf16 : f32_tol; }

}  // namespace

std::vector<OpCase> bf16_fused_cases() {
  std::vector<OpCase> v;
  // matmul with a bf16 C: epilogues (bias, GELU with pre_gelu) and beta = 1.
  for (bool epi : {false, true})
    v.push_back({cat("matmul bf16 C nt M33 N65 K48", epi ? " +bias +gelu" : " alpha0.5 beta1"), kTolBf16,
                 [=](Backend& b) {
                   CaseCtx c(b, 8000 + epi);
                   Tensor A = c.rand(Shape{33, 48}, -1, 1, kB), B = c.rand(Shape{65, 48}, -1, 1, kB);
                   Tensor C = epi ? c.junk(Shape{33, 65}, kB) : c.rand(Shape{33, 65}, -1, 1, kB);
                   Tensor bias = c.rand(Shape{65}), pre = c.junk(Shape{33, 65}, kB);
                   GemmOpts o;
                   o.trans_b = true;
                   if (epi) o.bias = &bias, o.gelu = true, o.pre_gelu = &pre;
                   else o.alpha = 0.5f, o.beta = 1.f;
                   matmul(c.stream(), C, A, B, o);
                   OpOutputs out{{"C", C}};
                   if (epi) out.push_back({"pre_gelu", pre});
                   return out;
                 }});
  v.push_back({"bias_backward bf16 rows37 N65", 1e-5, [](Backend& b) {
                 CaseCtx c(b, 8010);
                 Tensor db = c.rand(Shape{65});
                 bias_backward(c.stream(), db, c.rand(Shape{37, 65}, -1, 1, kB));
                 return OpOutputs{{"dbias", db}};
               }});
  // The elementwise ops on bf16 (one case each, 1000 elements: a partial last block).
  const int64_t n = 1000;
  v.push_back({"fill/scale/add/accumulate/mul bf16 n1000", kTolBf16, [=](Backend& b) {
                 CaseCtx c(b, 8020);
                 Tensor x = c.rand(Shape{n}, -1, 1, kB), a = c.rand(Shape{n}, -1, 1, kB), y = c.rand(Shape{n}, -1, 1, kB);
                 Tensor f = c.junk(Shape{n}, kB), sum = c.junk(Shape{n}, kB), prod = c.junk(Shape{n}, kB);
                 fill(c.stream(), f, -2.5f);
                 scale(c.stream(), x, 0.3f);
                 add(c.stream(), sum, x, a);
                 accumulate(c.stream(), y, a, -0.7f);
                 mul(c.stream(), prod, x, a);
                 return OpOutputs{{"fill", f}, {"scale", x}, {"add", sum}, {"accumulate", y}, {"mul", prod}};
               }});
  v.push_back({"bias_add/slice_cols/unslice_cols bf16 N17 W40", kTolBf16, [](Backend& b) {
                 CaseCtx c(b, 8030);
                 Tensor in = c.rand(Shape{17, 40}, -1, 1, kB), part = c.junk(Shape{17, 33}, kB);
                 Tensor dst = c.rand(Shape{17, 40}, -1, 1, kB);
                 bias_add(c.stream(), in, in, c.rand(Shape{40}));
                 slice_cols(c.stream(), part, in, 3);
                 unslice_cols(c.stream(), dst, c.rand(Shape{17, 33}, -1, 1, kB), 4);
                 return OpOutputs{{"bias_add", in}, {"slice", part}, {"unslice", dst}};
               }});
  v.push_back({"gelu_forward/gelu_backward/swiglu_forward/swiglu_backward bf16 n1000", kTolBf16, [=](Backend& b) {
                 CaseCtx c(b, 8040);
                 const Shape s{n};
                 Tensor x = c.rand(s, -5, 5, kB), u = c.rand(s, -1, 1, kB), g = c.rand(s, -1, 1, kB);
                 Tensor ge = c.junk(s, kB), dge = c.junk(s, kB), sw = c.junk(s, kB);
                 Tensor dg = c.junk(s, kB), du = c.junk(s, kB), again = c.junk(s, kB);
                 gelu_forward(c.stream(), ge, x);
                 gelu_backward(c.stream(), dge, x, g);
                 swiglu_forward(c.stream(), sw, x, u);
                 swiglu_backward(c.stream(), dg, du, again, g, x, u);
                 return OpOutputs{{"gelu", ge}, {"dgelu", dge}, {"swiglu", sw}, {"dgate", dg}, {"dup", du}, {"out", again}};
               }});
  // SwiGLU's CUDA kernels go four elements at a time where every operand is 16-byte
  // aligned: here none is (slices one element in) and 1003 leaves a tail of three.
  v.push_back({"swiglu_forward/swiglu_backward bf16 n1003 offset 1", kTolBf16, [](Backend& b) {
                 CaseCtx c(b, 8045);
                 const int64_t m = 1003;
                 auto one_in = [&](Tensor t) { return t.slice(1, m + 1); };
                 const Shape s{m + 1};
                 Tensor x = one_in(c.rand(s, -5, 5, kB)), u = one_in(c.rand(s, -1, 1, kB)), g = one_in(c.rand(s, -1, 1, kB));
                 Tensor sw = one_in(c.junk(s, kB)), dg = one_in(c.junk(s, kB)), du = one_in(c.junk(s, kB));
                 Tensor again = one_in(c.junk(s, kB));
                 swiglu_forward(c.stream(), sw, x, u);
                 swiglu_backward(c.stream(), dg, du, again, g, x, u);
                 return OpOutputs{{"swiglu", sw}, {"dgate", dg}, {"dup", du}, {"out", again}};
               }});
  // Norms: bf16 activations with f32 weights and statistics, and the fused residual
  // add + norm (forward: sum, out, statistics; backward: dsum += din) in f32 and bf16.
  for (DType dt : {DType::F32, kB})
    for (bool layer : {true, false}) {
      const char* nm = layer ? "layernorm" : "rmsnorm";
      for (bool fused : {false, true}) {
        if (!fused && dt == DType::F32) continue;  // the plain f32 norms: nn_cases
        v.push_back({cat(fused ? "add_" : "", nm, " ", dname(dt), " N17 C768"), tol_of(dt, 1e-4), [=](Backend& b) {
                       CaseCtx c(b, 8100 + 10 * fused + 2 * layer + (dt == kB));
                       const int64_t N = 17, C = 768;
                       const Shape s{N, C};
                       Tensor a = c.rand(s, -2, 4, dt), r = c.rand(s, -1, 1, dt), w = c.rand(Shape{C});
                       Tensor bias = c.rand(Shape{C}), out = c.junk(s, dt), sum = c.junk(s, dt);
                       Tensor mean = c.junk(Shape{N}), rstd = c.junk(Shape{N});
                       Tensor in = fused ? sum : a;
                       if (fused && layer) add_layernorm_forward(c.stream(), sum, out, mean, rstd, a, r, w, bias, 1e-5f);
                       if (fused && !layer) add_rmsnorm_forward(c.stream(), sum, out, rstd, a, r, w, 1e-6f);
                       if (!fused && layer) layernorm_forward(c.stream(), out, mean, rstd, a, w, bias, 1e-5f);
                       if (!fused && !layer) rmsnorm_forward(c.stream(), out, rstd, a, w, 1e-6f);
                       Tensor dout = c.rand(s, -1, 1, dt), din = fused ? c.rand(s, -1, 1, dt) : c.junk(s, dt);
                       Tensor dw = c.rand(Shape{C}), db = c.rand(Shape{C});
                       if (fused && layer) add_layernorm_backward(c.stream(), din, dw, db, dout, in, w, mean, rstd);
                       if (fused && !layer) add_rmsnorm_backward(c.stream(), din, dw, dout, in, w, rstd);
                       if (!fused && layer) layernorm_backward(c.stream(), din, dw, db, dout, in, w, mean, rstd);
                       if (!fused && !layer) rmsnorm_backward(c.stream(), din, dw, dout, in, w, rstd);
                       OpOutputs o{{"out", out}, {"rstd", rstd}, {fused ? "dsum" : "din", din}, {"dw", dw}};
                       if (fused) o.push_back({"sum", sum});
                       if (layer) o.push_back({"mean", mean}), o.push_back({"db", db});
                       return o;
                     }});
      }
    }
  // RoPE: bf16, and q and k together (grouped-query: k has fewer heads).
  for (DType dt : {DType::F32, kB}) {
    if (dt == kB)
      v.push_back({"rope bf16 T17 NH3 HS64", kTolBf16, [](Backend& b) {
                     CaseCtx c(b, 8200);
                     Tensor pos = c.ints(Shape{17}, 0, 512), x = c.rand(Shape{17, 3, 64}, -1, 1, kB);
                     Tensor out = c.junk(Shape{17, 3, 64}, kB), din = c.rand(Shape{17, 3, 64}, -1, 1, kB);
                     rope_forward(c.stream(), out, x, pos, 10000.f);
                     rope_backward(c.stream(), din, din, pos, 10000.f);
                     return OpOutputs{{"out", out}, {"din", din}};
                   }});
    v.push_back({cat("rope_qk ", dname(dt), " T17 NH4 NKV2 HS16"), tol_of(dt, 2e-4), [=](Backend& b) {
                   CaseCtx c(b, 8210 + (dt == kB));
                   Tensor pos = c.ints(Shape{17}, 0, 512);
                   Tensor q = c.rand(Shape{17, 4, 16}, -1, 1, dt), k = c.rand(Shape{17, 2, 16}, -1, 1, dt);
                   Tensor dq = c.rand(Shape{17, 4, 16}, -1, 1, dt), dk = c.rand(Shape{17, 2, 16}, -1, 1, dt);
                   rope_qk_forward(c.stream(), q, k, pos, 10000.f);
                   rope_qk_backward(c.stream(), dq, dk, pos, 10000.f);
                   return OpOutputs{{"q", q}, {"k", k}, {"dq", dq}, {"dk", dk}};
                 }});
  }
  // Attention (our kernels) and cached decoding on bf16 tensors, f32 statistics.
  for (bool causal : {true, false})
    v.push_back({cat("attention bf16 T51 B3 NH4 NKV2 HS16 ", causal ? "causal" : "bidirectional"), kTolBf16,
                 [=](Backend& b) {
                   CaseCtx c(b, 8300 + causal);
                   const int64_t T = 51, NH = 4, NKV = 2, HS = 16;
                   const Shape sq{T, NH, HS}, skv{T, NKV, HS};
                   Tensor q = c.rand(sq, -2, 2, kB), k = c.rand(skv, -2, 2, kB), vv = c.rand(skv, -1, 1, kB);
                   Tensor cus = c.i32({0, 1, 18, 51}), out = c.junk(sq, kB), lse = c.junk(Shape{T, NH});
                   attention_forward(c.stream(), out, lse, q, k, vv, cus, 33, causal);
                   Tensor dq = c.junk(sq, kB), dk = c.junk(skv, kB), dv = c.junk(skv, kB);
                   attention_backward(c.stream(), dq, dk, dv, c.rand(sq, -1, 1, kB), q, k, vv, out, lse, cus, 33, causal);
                   return OpOutputs{{"out", out}, {"lse", lse}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
                 }});
  v.push_back({"attention_decode bf16 N3 R120 NH4 NKV2 HS16", kTolBf16, [](Backend& b) {
                 CaseCtx c(b, 8310);
                 Tensor q = c.rand(Shape{3, 4, 16}, -2, 2, kB), k = c.rand(Shape{120, 2, 16}, -2, 2, kB);
                 Tensor vv = c.rand(Shape{120, 2, 16}, -1, 1, kB), out = c.junk(Shape{3, 4, 16}, kB);
                 attention_decode(c.stream(), out, q, k, vv, c.i32({0, 40, 80}), c.i32({1, 17, 33}), 33);
                 return OpOutputs{{"out", out}};
               }});
  // Embedding: a bf16 table (the working copy) into bf16 rows; bf16 gradients into the
  // f32 table gradient, and bf16 rows into bf16 (the backbone's caller rows).
  v.push_back({"embedding bf16 V37 C33 T65 offset10", kTolBf16, [](Backend& b) {
                 CaseCtx c(b, 8400);
                 Tensor ids = c.ints(Shape{65}, 0, 60), table = c.rand(Shape{37, 33}, -1, 1, kB);
                 Tensor out = c.junk(Shape{65, 33}, kB), dtable = c.rand(Shape{37, 33});
                 Tensor rows = c.rand(Shape{37, 33}, -1, 1, kB);
                 embedding_forward(c.stream(), out, ids, table, 10);
                 embedding_backward(c.stream(), dtable, c.rand(Shape{65, 33}, -1, 1, kB), ids, 10);
                 embedding_backward(c.stream(), rows, c.rand(Shape{65, 33}, -1, 1, kB), ids, 10);
                 return OpOutputs{{"out", out}, {"dtable f32", dtable}, {"dtable bf16", rows}};
               }});
  // The vocab-parallel loss on bf16 logits, its gradient in place of the logits.
  for (int64_t Vl : {33, 1024}) v.push_back(vocab_ce_case(Vl, kB, kTolBf16, 8500 + uint64_t(Vl == 33 ? 0 : Vl)));
  v.push_back({"image_to_patches bf16 B2 S12 P4", kTolBf16, [](Backend& b) {
                 CaseCtx c(b, 8600);
                 const std::vector<float> vals = to_vector_f32(c.ints(Shape{2, 12, 12, 3}, 0, 255));
                 Tensor px = Tensor::empty(cpu_backend(), Shape{2, 12, 12, 3}, DType::U8);
                 for (size_t i = 0; i < vals.size(); ++i) px.ptr<uint8_t>()[i] = uint8_t(vals[i]);
                 Tensor out = c.junk(Shape{18, 48}, kB);
                 image_to_patches(c.stream(), out, to_backend(b, px), 4, PixelNorm{});
                 return OpOutputs{{"out", out}};
               }});
  return v;
}

}  // namespace vlm::opcheck
