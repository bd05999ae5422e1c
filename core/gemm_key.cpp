// GemmKey (core/gemm_key.h): equality, hash, text.
#include "core/gemm_key.h"

#include <tuple>

#include "base/error.h"
#include "core/plan_cache.h"

namespace vlm {

const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return "none";
    case GemmEpilogue::Bias: return "bias";
    case GemmEpilogue::Gelu: return "gelu";
    case GemmEpilogue::GeluBias: return "bias+gelu";
    case GemmEpilogue::GeluAux: return "gelu+aux";
    case GemmEpilogue::GeluAuxBias: return "bias+gelu+aux";
    case GemmEpilogue::DGelu: return "dgelu";
  }
  return "?";
}

bool epilogue_has_bias(GemmEpilogue e) {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::GeluBias || e == GemmEpilogue::GeluAuxBias;
}
bool epilogue_has_aux(GemmEpilogue e) {
  return e == GemmEpilogue::GeluAux || e == GemmEpilogue::GeluAuxBias || e == GemmEpilogue::DGelu;
}

GemmEpilogue fused_epilogue(const GemmProblem& p, const GemmEpilogueArgs& ep) {
  if (!ep.any()) return GemmEpilogue::None;
  const bool bias_ok = !ep.bias || (ep.bias_dtype == p.c_dtype && pointer_alignment(ep.bias) >= 16);
  const bool aux_ok = !ep.aux || (p.ldc % 8 == 0 && pointer_alignment(ep.aux) >= 16);
  if (!bias_ok || !aux_ok) return GemmEpilogue::None;
  if (ep.dgelu) return GemmEpilogue::DGelu;
  if (ep.gelu)
    return ep.aux ? (ep.bias ? GemmEpilogue::GeluAuxBias : GemmEpilogue::GeluAux)
                  : (ep.bias ? GemmEpilogue::GeluBias : GemmEpilogue::Gelu);
  return GemmEpilogue::Bias;
}

GemmKey gemm_key(const GemmProblem& p, GemmEpilogue e) {
  GemmKey k;
  k.M = p.M, k.N = p.N, k.K = p.K, k.batch = p.batch;
  k.stride_a = p.stride_a, k.stride_b = p.stride_b, k.stride_c = p.stride_c;
  k.lda = p.lda, k.ldb = p.ldb, k.ldc = p.ldc;
  k.trans_a = p.ta, k.trans_b = p.tb;
  k.ab = p.ab, k.c = p.c_dtype;
  k.epilogue = e;
  k.align_a = pointer_alignment(p.a), k.align_b = pointer_alignment(p.b), k.align_c = pointer_alignment(p.c);
  return k;
}

namespace {
auto tie(const GemmKey& k) {
  return std::tie(k.M, k.N, k.K, k.batch, k.stride_a, k.stride_b, k.stride_c, k.lda, k.ldb, k.ldc, k.trans_a,
                  k.trans_b, k.ab, k.c, k.epilogue, k.align_a, k.align_b, k.align_c);
}
}  // namespace

bool GemmKey::operator==(const GemmKey& o) const { return tie(*this) == tie(o); }

size_t GemmKeyHash::operator()(const GemmKey& k) const {
  size_t h = 0;
  for (int64_t v : {k.M, k.N, k.K, k.batch, k.stride_a, k.stride_b, k.stride_c, k.lda, k.ldb, k.ldc})
    hash_mix(h, uint64_t(v));
  hash_mix(h, uint64_t(k.trans_a) | uint64_t(k.trans_b) << 1 | uint64_t(k.ab) << 8 | uint64_t(k.c) << 16 |
                  uint64_t(k.epilogue) << 32);
  hash_mix(h, uint64_t(k.align_a) | uint64_t(k.align_b) << 16 | uint64_t(k.align_c) << 32);
  return h;
}

std::string GemmKey::str() const {
  return cat("M", M, " N", N, " K", K, batch > 1 ? cat(" batch", batch) : std::string(), " ", trans_a ? "t" : "n",
             trans_b ? "t" : "n", " ", dtype_name(ab), "->", dtype_name(c), " ", gemm_epilogue_name(epilogue),
             " a", align_a, "/", align_b, "/", align_c);
}

uint16_t pointer_alignment(const void* p) {
  uint16_t a = 256;
  while (a > 1 && (reinterpret_cast<uintptr_t>(p) % a) != 0) a /= 2;
  return a;
}

}  // namespace vlm
