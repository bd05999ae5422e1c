// Conformance cases, part 5 (op_case.h): the fast CUDA paths of docs/gpu.md against the
// CPU reference: bf16 GEMMs with cuBLASLt's epilogues (an f32 bias, rounded to bf16 for
// a bf16 C; GELU saving its input, dGELU), where cuBLASLt fuses them (aligned, ld % 8 == 0) and where
// our kernel runs instead; mixed-precision GEMMs whose f32 operand goes to bf16 in
// chunks (one case per chunked dimension: M, N and K twice); the reductions that run
// in a fixed order on both backends, compared bitwise (tolerance 0: embedding_backward
// with many repeated ids, sum_squares over more than 32 chunks); attention in bf16 at
// the shapes the models run (head sizes 64, 128, 256, GQA, causal and bidirectional,
// packed samples of uneven lengths), which CUDA runs through cuDNN's fused attention
// where it can (core/cuda/attention_cudnn.cpp) and our kernels otherwise.
// bf16 outputs: the CPU computes in f32 from the same bf16 inputs and rounds its result
// once (convert); CUDA writes bf16. Two correct results then differ by at most one bf16
// step where the f32 results straddle a rounding boundary, and one step at |r| is at most
// 2^-7 |r| < 2^-7 (1 + |r|): tolerance 2^-7 of the metric (op_case.h), which one rounding
// never exceeds at any magnitude (2^-8 is exceeded from |r| = 2 on, which millions of
// outputs reach: one step at |r| = 8 is 6.9e-3 of it). Attention:
// 1e-2, because a fused attention kernel (cuDNN's, as FlashAttention) rounds the
// probabilities and their gradients to bf16 for its tensor-core products (at most 2^-9
// of the largest |v| per output row in the forward); a mask off by one key moves the
// short samples (1, 8, 17, 33 tokens) by far more.
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {
namespace {

constexpr double kBf16Tol = 1.0 / 128;

// An output of dtype dt where the backend writes it (CUDA bf16); on the CPU the f32
// result is rounded to bf16 by `finish`.
struct Out {
  Tensor t;    // what the op writes (f32 on the CPU)
  Tensor out;  // what the case returns
};
Out output(CaseCtx& c, Shape s, DType dt) {
  if (dt == DType::F32) {
    Tensor t = c.junk(s);
    return {t, t};
  }
  if (c.is_cpu()) return {c.junk(s), Tensor::empty(c.backend(), s, DType::BF16)};
  Tensor t = Tensor::empty(c.backend(), s, DType::BF16);
  return {t, t};
}
void finish(CaseCtx& c, const Out& o) {
  if (o.out.data() != o.t.data()) convert(c.stream(), o.out, o.t);
}

// The f32 bias of a GEMM into c_dtype, drawn at full precision. A bf16 C adds it as
// bf16 values (core/ops/gemm.inc); the CPU computes such a C as an f32 C (output()),
// which adds the bias as it is, so its reference gets the rounded values.
Tensor gemm_bias(CaseCtx& c, int64_t n, DType c_dtype) {
  Tensor bias = c.rand(Shape{n});
  if (c.is_cpu() && c_dtype == DType::BF16) round_bf16(c.stream(), bias);
  return bias;
}

// bf16 A [M,K] x bf16 B^T [N,K] -> C (bf16 or f32) with an f32 bias and GELU saving its
// input (of C's dtype).
OpCase matmul_bf16_epilogue_case(int64_t M, int64_t N, int64_t K, DType c_dtype) {
  return {cat("matmul bf16 nt +bias(f32) +gelu(pre) C ", dtype_name(c_dtype), " M", M, " N", N, " K", K),
          c_dtype == DType::BF16 ? kBf16Tol : 1e-4, [=](Backend& b) {
            CaseCtx c(b, 7000 + uint64_t(M + N * 3 + K * 5) + (c_dtype == DType::BF16));
            const DType in = c.is_cpu() ? DType::F32 : DType::BF16;
            Tensor A = c.rand_bf16_values(Shape{M, K}, in), B = c.rand_bf16_values(Shape{N, K}, in);
            Tensor bias = gemm_bias(c, N, c_dtype);
            const Out C = output(c, Shape{M, N}, c_dtype), pre = output(c, Shape{M, N}, c_dtype);
            GemmOpts o;
            o.trans_b = true, o.bias = &bias, o.gelu = true, o.pre_gelu = &pre.t;
            matmul(c.stream(), C.t, A, B, o);
            finish(c, C);
            finish(c, pre);
            return OpOutputs{{"C", C.out}, {"pre_gelu", pre.out}};
          }};
}

// A bf16 C whose GELU epilogue cuBLASLt cannot fuse (ldc = N = 4100 is not a multiple
// of 8, so the saved input is no aux operand of cuBLASLt's: core/gemm_key.cpp
// fused_epilogue), computed in f32 chunks of C's rows (core/cuda/gemm.cu,
// gemm_f32_then_epilogue): N = 4100 gives chunks of 896 rows, so M = 1100 has a tail of
// 204; A plain or transposed, and a batch of 3 with beta = 0.5 (C widened into the
// chunk first).
OpCase matmul_bf16_chunked_epilogue_case(bool trans_a, int64_t batch) {
  const int64_t M = batch > 1 ? 300 : 1100, N = 4100, K = 64;
  return {cat("matmul bf16 ", trans_a ? "t" : "n", "t +bias(f32) +gelu(pre) C bf16 B", batch, " M", M, " N", N, " K", K,
              " (f32 row chunks)"),
          kBf16Tol, [=](Backend& b) {
            CaseCtx c(b, 7060 + uint64_t(trans_a) + uint64_t(batch));
            const DType in = c.is_cpu() ? DType::F32 : DType::BF16;
            const Shape sa = trans_a ? Shape{K, M} : Shape{M, K};
            Tensor A = c.rand_bf16_values(batch > 1 ? Shape{batch, sa[0], sa[1]} : sa, in);
            Tensor B = c.rand_bf16_values(batch > 1 ? Shape{batch, N, K} : Shape{N, K}, in);
            Tensor bias = gemm_bias(c, N, DType::BF16);
            const Shape sc = batch > 1 ? Shape{batch, M, N} : Shape{M, N};
            const Out C = output(c, sc, DType::BF16), pre = output(c, sc, DType::BF16);
            if (batch > 1) copy_tensor(C.t, c.rand_bf16_values(sc, C.t.dtype()));  // beta reads C: the same values everywhere
            GemmOpts o;
            o.trans_a = trans_a, o.trans_b = true, o.bias = &bias, o.gelu = true, o.pre_gelu = &pre.t;
            o.beta = batch > 1 ? 0.5f : 0.f;
            matmul(c.stream(), C.t, A, B, o);
            finish(c, C);
            finish(c, pre);
            return OpOutputs{{"C", C.out}, {"pre_gelu", pre.out}};
          }};
}

// C = (A B) * gelu'(pre): the backward of a GELU layer's input gradient, f32 or bf16.
OpCase matmul_dgelu_case(int64_t M, int64_t N, int64_t K, DType dt) {
  return {cat("matmul dgelu nn ", dtype_name(dt), " M", M, " N", N, " K", K), dt == DType::BF16 ? kBf16Tol : 1e-4,
          [=](Backend& b) {
            CaseCtx c(b, 7100 + uint64_t(M + N * 3 + K * 5) + (dt == DType::BF16));
            const DType in = c.is_cpu() || dt == DType::F32 ? DType::F32 : DType::BF16;
            Tensor A = c.rand_bf16_values(Shape{M, K}, in), B = c.rand_bf16_values(Shape{K, N}, in);
            Tensor pre = c.rand_bf16_values(Shape{M, N}, in, -3, 3);
            const Out C = output(c, Shape{M, N}, dt);
            GemmOpts o;
            o.dgelu_pre = &pre;
            matmul(c.stream(), C.t, A, B, o);
            finish(c, C);
            return OpOutputs{{"C", C.out}};
          }};
}

// A mixed-precision GEMM (C f32) whose f32 operand holds more than one cast chunk
// (16 MiB of bf16, core/cuda/gemm.cu), chunked along: "M" (f32 A), "K" (f32 A^T with
// beta = 1, or f32 B), "N" (f32 B^T, with a bias).
OpCase matmul_mixed_chunked_case(const std::string& along, bool a_f32, bool ta, bool tb) {
  // The f32 operand: 4200 x 2000 (8.4M elements: two chunks); the other dimension 24.
  const int64_t big = 4200, wide = 2000, small = 24;
  int64_t M, N, K;
  if (a_f32)
    M = ta ? wide : big, K = ta ? big : wide, N = small;
  else
    N = tb ? big : wide, K = tb ? wide : big, M = small;
  return {cat("matmul mixed chunked along ", along, " ", ta ? "t" : "n", tb ? "t" : "n", " M", M, " N", N, " K", K),
          1e-4, [=](Backend& b) {
            CaseCtx c(b, 7200 + uint64_t(M + N + K) + ta * 2 + tb);
            const Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
            Tensor A = a_f32 ? c.rand(sa) : c.rand(sa, -1, 1, DType::BF16);
            Tensor B = a_f32 ? c.rand(sb, -1, 1, DType::BF16) : c.rand(sb);
            Tensor bias = c.rand(Shape{N});
            GemmOpts o;
            o.trans_a = ta, o.trans_b = tb;
            const bool accumulate = a_f32 && ta;
            Tensor C = accumulate ? c.rand(Shape{M, N}) : c.junk(Shape{M, N});
            if (accumulate) o.beta = 1.f;
            if (!a_f32 && tb) o.bias = &bias;
            matmul(c.stream(), C, A, B, o);
            return OpOutputs{{"C", C}};
          }};
}

// Attention in bf16 over packed samples of the given lengths (sum = T).
OpCase attention_bf16_case(const std::vector<int32_t>& lens, int64_t NH, int64_t NKV, int64_t HS, bool causal) {
  int64_t T = 0;
  int max_len = 0;
  std::vector<int32_t> cu{0};
  for (int32_t l : lens) T += l, cu.push_back(int32_t(T)), max_len = std::max(max_len, int(l));
  return {cat("attention bf16 ", causal ? "causal" : "bidirectional", " T", T, " B", lens.size(), " NH", NH, " NKV",
              NKV, " HS", HS),
          1e-2, [=](Backend& b) {
            CaseCtx c(b, 7300 + uint64_t(T + NH * 7 + NKV * 11 + HS) + causal);
            const DType in = c.is_cpu() ? DType::F32 : DType::BF16;
            Tensor q = c.rand_bf16_values(Shape{T, NH, HS}, in), k = c.rand_bf16_values(Shape{T, NKV, HS}, in);
            Tensor v = c.rand_bf16_values(Shape{T, NKV, HS}, in);
            Tensor cus = c.i32(cu);
            const Out out = output(c, Shape{T, NH, HS}, DType::BF16);
            Tensor lse = c.junk(Shape{T, NH});
            attention_forward(c.stream(), out.t, lse, q, k, v, cus, max_len, causal);
            finish(c, out);
            // Backward from the rounded output (what the model keeps) and a bf16 dout.
            Tensor o_in = c.is_cpu() ? Tensor::empty(c.backend(), out.t.shape(), DType::F32) : out.t;
            if (c.is_cpu()) convert(c.stream(), o_in, out.out);
            Tensor dout = c.rand_bf16_values(Shape{T, NH, HS}, in);
            const Out dq = output(c, Shape{T, NH, HS}, DType::BF16), dk = output(c, Shape{T, NKV, HS}, DType::BF16),
                      dv = output(c, Shape{T, NKV, HS}, DType::BF16);
            attention_backward(c.stream(), dq.t, dk.t, dv.t, dout, q, k, v, o_in, lse, cus, max_len, causal);
            for (const Out* o : {&dq, &dk, &dv}) finish(c, *o);
            return OpOutputs{{"out", out.out}, {"lse", lse}, {"dq", dq.out}, {"dk", dk.out}, {"dv", dv.out}};
          }};
}

}  // namespace

std::vector<OpCase> fast_path_cases() {
  std::vector<OpCase> v;
  v.push_back(matmul_bf16_epilogue_case(64, 96, 128, DType::BF16));  // fused (aligned, N % 8 == 0)
  v.push_back(matmul_bf16_epilogue_case(40, 33, 72, DType::BF16));   // our epilogue kernel (N odd)
  for (bool ta : {false, true}) v.push_back(matmul_bf16_chunked_epilogue_case(ta, 1));
  v.push_back(matmul_bf16_chunked_epilogue_case(false, 3));
  // K == 0: no product, C = gelu(beta C + bias), rounded once.
  v.push_back({"matmul bf16 nt +bias(f32) +gelu(pre) C bf16 M5 N40 K0 beta 0.5", kBf16Tol, [](Backend& b) {
                 CaseCtx c(b, 7070);
                 const DType in = c.is_cpu() ? DType::F32 : DType::BF16;
                 Tensor A = c.rand_bf16_values(Shape{5, 0}, in), B = c.rand_bf16_values(Shape{40, 0}, in);
                 Tensor bias = gemm_bias(c, 40, DType::BF16);
                 const Out C = output(c, Shape{5, 40}, DType::BF16), pre = output(c, Shape{5, 40}, DType::BF16);
                 copy_tensor(C.t, c.rand_bf16_values(Shape{5, 40}, C.t.dtype()));
                 GemmOpts o;
                 o.trans_b = true, o.bias = &bias, o.gelu = true, o.pre_gelu = &pre.t, o.beta = 0.5f;
                 matmul(c.stream(), C.t, A, B, o);
                 finish(c, C);
                 finish(c, pre);
                 return OpOutputs{{"C", C.out}, {"pre_gelu", pre.out}};
               }});
  v.push_back(matmul_bf16_epilogue_case(64, 96, 128, DType::F32));
  v.push_back(matmul_dgelu_case(48, 64, 96, DType::F32));
  v.push_back(matmul_dgelu_case(17, 37, 40, DType::F32));  // our kernel (ld % 8 != 0)
  v.push_back(matmul_dgelu_case(64, 128, 64, DType::BF16));
  v.push_back(matmul_mixed_chunked_case("M", true, false, true));
  v.push_back(matmul_mixed_chunked_case("K", true, true, false));
  v.push_back(matmul_mixed_chunked_case("K", false, false, false));
  v.push_back(matmul_mixed_chunked_case("N", false, false, true));

  // Fixed-order reductions: the same bits on every backend.
  v.push_back({"embedding_backward fixed order V50 C72 T3000 offset5 (repeated ids)", 0.0, [](Backend& b) {
                 CaseCtx c(b, 7400);
                 Tensor ids = c.ints(Shape{3000}, 0, 60);  // rows 0..49 of the shard, some outside
                 Tensor dtable = c.rand(Shape{50, 72});
                 embedding_backward(c.stream(), dtable, c.rand(Shape{3000, 72}), ids, 5);
                 return OpOutputs{{"dtable", dtable}};
               }});
  // A bf16 table (the backbone's caller rows): each row's run of ~60 tokens summed in
  // f32 in token order and rounded once, on both backends.
  v.push_back({"embedding_backward fixed order bf16 V50 C72 T3000 offset5 (repeated ids)", 0.0, [](Backend& b) {
                 CaseCtx c(b, 7410);
                 Tensor ids = c.ints(Shape{3000}, 0, 60);
                 Tensor dtable = c.rand(Shape{50, 72}, -1, 1, DType::BF16);
                 embedding_backward(c.stream(), dtable, c.rand(Shape{3000, 72}, -1, 1, DType::BF16), ids, 5);
                 return OpOutputs{{"dtable", dtable}};
               }});
  for (int64_t n : {int64_t(1), int64_t(4097), int64_t(300001)})
    v.push_back({cat("sum_squares fixed order n", n), 0.0, [n](Backend& b) {
                   CaseCtx c(b, 7500 + uint64_t(n));
                   Tensor out = c.rand(Shape{1});
                   sum_squares(c.stream(), out, c.rand(Shape{n}, -3, 3));
                   return OpOutputs{{"out", out}};
                 }});

  // Attention at the models' head sizes, bf16 (cuDNN's fused attention on CUDA).
  const std::vector<int32_t> lens{77, 130, 1, 64, 200};
  v.push_back(attention_bf16_case(lens, 8, 2, 64, true));     // GQA, causal (the backbone)
  v.push_back(attention_bf16_case(lens, 4, 4, 64, false));    // bidirectional (the encoder)
  v.push_back(attention_bf16_case(lens, 4, 1, 128, true));    // MQA, Qwen2/SigLIP-so400m head size
  v.push_back(attention_bf16_case(lens, 2, 2, 128, false));
  v.push_back(attention_bf16_case({96, 33, 160}, 2, 1, 256, true));  // head size 256 (Gemma-like)
  v.push_back(attention_bf16_case({96, 33, 160}, 2, 2, 256, false));
  v.push_back(attention_bf16_case({8, 17}, 2, 2, 72, true));  // a head size cuDNN takes (multiple of 8)
  v.push_back(attention_bf16_case({8, 17}, 2, 2, 36, true));  // one it does not: our kernel
  return v;
}

}  // namespace vlm::opcheck
