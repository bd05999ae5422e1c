// One GEMM call as core/cuda/gemm.cu runs it (GemmProblem, GemmEpilogueArgs), which
// epilogue cuBLASLt runs for it (fused_epilogue), and the key of its cached cuBLASLt
// plan (core/plan_cache.h): everything cuBLASLt's heuristic reads. Host code, so the
// rules are tested without a GPU (tests/core/test_plan_cache.cpp). Two calls with equal keys get the same
// descriptors and the same algorithm, so the same bits; a key differs when the shape,
// the batch strides, the leading dimensions, a transpose, the dtypes of A/B and C (a
// fused bias has C's), the epilogue, or an operand's alignment differ (the heuristic is told each
// pointer's alignment: an algorithm chosen for 256-byte aligned operands may fault on
// 16-byte aligned ones).
// Row-major terms (as core/ops/gemm.inc): C[M,N] = op(A) op(B), K the inner dimension.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace vlm {

// cuBLASLt's epilogues that matmul uses (GemmOpts, core/ops.h): none; + bias; GELU
// (after the bias, if any), optionally saving its input (Aux); dGELU: C times the GELU
// derivative at a saved input (the backward of a GELU layer).
enum class GemmEpilogue : uint8_t { None, Bias, Gelu, GeluBias, GeluAux, GeluAuxBias, DGelu };
const char* gemm_epilogue_name(GemmEpilogue e);

bool epilogue_has_bias(GemmEpilogue e);
bool epilogue_has_aux(GemmEpilogue e);

// One GEMM in row-major terms: C[M,N] = alpha op(A) op(B) + beta C; lda, ldb, ldc are
// the row strides of the stored A ([M,K], or [K,M] when ta), B and C.
struct GemmProblem {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements; 0 = broadcast
  int64_t lda = 0, ldb = 0, ldc = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  DType ab = DType::F32, c_dtype = DType::F32;
  float alpha = 1.f, beta = 0.f;
};

// What follows the product: bias (of bias_dtype), then GELU (saving its input to aux),
// or the GELU derivative at aux (dgelu). aux has C's dtype and leading dimension.
struct GemmEpilogueArgs {
  const void* bias = nullptr;
  DType bias_dtype = DType::F32;
  void* aux = nullptr;
  bool gelu = false, dgelu = false;
  bool any() const { return bias || gelu || dgelu; }
};

// The epilogue cuBLASLt runs for ep on p, or None when cuBLASLt does not document the
// combination (then a plain GEMM and our epilogue kernel): aux with ldc % 8 == 0, the
// bias of C's dtype (cuBLASLt reads the bias in D's type: an f32 bias on a bf16 C is
// refused, "Unsupported config of bias pointer type"; matmul rounds such a bias to bf16
// first, core/ops/gemm.inc), bias and aux 16-byte aligned.
GemmEpilogue fused_epilogue(const GemmProblem& p, const GemmEpilogueArgs& ep);

struct GemmKey {
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1;                         // strided batch count (1: one GEMM)
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries
  int64_t lda = 0, ldb = 0, ldc = 0;         // row strides of the stored A, B, C
  bool trans_a = false, trans_b = false;
  DType ab = DType::F32, c = DType::F32;  // a fused bias has C's dtype (fused_epilogue)
  GemmEpilogue epilogue = GemmEpilogue::None;
  uint16_t align_a = 256, align_b = 256, align_c = 256;  // bytes (pointer_alignment)

  bool operator==(const GemmKey& o) const;
  std::string str() const;  // for messages: "M17 N33 K65 nt bf16->f32 bias a256/256/16"
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const;
};

// The key of p run with epilogue e.
GemmKey gemm_key(const GemmProblem& p, GemmEpilogue e);

// The largest power of two, at most 256, that divides the address (cuBLASLt assumes
// 256 unless told; arena views may be less aligned).
uint16_t pointer_alignment(const void* p);

}  // namespace vlm
