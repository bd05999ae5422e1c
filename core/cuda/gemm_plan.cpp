// cuBLASLt plans (core/cuda/gemm_plan.h). Row-major through column-major cuBLASLt
// (core/cuda/gemm.cu's file comment): cuBLASLt's "A" is our B and its "B" our A, with
// m = N, n = M.
#include "core/cuda/gemm_plan.h"

#include <cstdint>
#include <memory>
#include <optional>

#include "core/cuda/cuda_check.h"
#include "core/plan_cache.h"

namespace vlm::cuda {
namespace {

cudaDataType_t lt_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// RAII owners of the cuBLASLt descriptors of a plan.
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&h, t, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
      const int32_t b = int32_t(batch);
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof stride));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct OpDesc {
  cublasLtMatmulDesc_t h = nullptr;
  OpDesc() { CUBLAS_CHECK(cublasLtMatmulDescCreate(&h, CUBLAS_COMPUTE_32F, CUDA_R_32F)); }
  ~OpDesc() { cublasLtMatmulDescDestroy(h); }
  OpDesc(const OpDesc&) = delete;
  OpDesc& operator=(const OpDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t a, const T& v) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(h, a, &v, sizeof v));
  }
};

struct Pref {
  cublasLtMatmulPreference_t h = nullptr;
  Pref() { CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&h)); }
  ~Pref() { cublasLtMatmulPreferenceDestroy(h); }
  Pref(const Pref&) = delete;
  Pref& operator=(const Pref&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t a, const T& v) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(h, a, &v, sizeof v));
  }
};


// A cached plan: descriptors, layouts and the heuristic's algorithm (ok = found one).
struct LtPlan {
  OpDesc desc;
  std::optional<Layout> la, lb, lc;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

struct GemmPlans final : StreamState {
  PlanCache<GemmKey, LtPlan, GemmKeyHash> cache;
};

GemmPlans& plans_of(CudaStream& cs) {
  std::unique_ptr<StreamState>& st = cs.state(StreamSlot::Gemm);
  if (!st) st = std::make_unique<GemmPlans>();
  return static_cast<GemmPlans&>(*st);
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmEpilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GemmEpilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Descriptors and the heuristic's first algorithm for key k (ok = false when none).
std::unique_ptr<LtPlan> build_plan(CudaStream& cs, const GemmKey& k) {
  auto plan = std::make_unique<LtPlan>();
  OpDesc& d = plan->desc;
  d.set(CUBLASLT_MATMUL_DESC_TRANSA, k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);  // cuBLASLt's A = our B
  d.set(CUBLASLT_MATMUL_DESC_TRANSB, k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);  // cuBLASLt's B = our A
  d.set(CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(k.epilogue));
  if (epilogue_has_aux(k.epilogue)) {
    d.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, k.ldc);
    if (k.batch > 1) d.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, k.stride_c);
  }
  // Stored (pre-op) column-major shapes: our B is [K,N] row-major = N x K col-major, or
  // [N,K] = K x N when trans_b; likewise our A; C is N x M.
  plan->la.emplace(lt_type(k.ab), k.trans_b ? k.K : k.N, k.trans_b ? k.N : k.K, k.ldb, k.batch, k.stride_b);
  plan->lb.emplace(lt_type(k.ab), k.trans_a ? k.M : k.K, k.trans_a ? k.K : k.M, k.lda, k.batch, k.stride_a);
  plan->lc.emplace(lt_type(k.c), k.N, k.M, k.ldc, k.batch, k.stride_c);

  Pref pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(cs.workspace_bytes()));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(k.align_b));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(k.align_a));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(k.align_c));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(k.align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cs.cublaslt(), d.h, plan->la->h, plan->lb->h,
                                                           plan->lc->h, plan->lc->h, pref.h, 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) return plan;  // ok = false
  // An epilogue the heuristic rejects as a value (on an H200, CUDA 13.0: GELU_AUX_BIAS
  // into a bf16 C with an f32 bias, which matmul now rounds to bf16 first, gemm.cu) is
  // one cuBLASLt cannot fuse here: our kernel does it.
  if (st == CUBLAS_STATUS_INVALID_VALUE && k.epilogue != GemmEpilogue::None) return plan;
  CUBLAS_CHECK(st);
  plan->algo = result.algo;
  plan->ok = true;
  return plan;
}

}  // namespace

bool lt_matmul(CudaStream& cs, const GemmProblem& p, GemmEpilogue e, const GemmEpilogueArgs& ep) {
  const GemmKey k = gemm_key(p, e);
  LtPlan& plan = plans_of(cs).cache.get(k, [&] { return build_plan(cs, k); });
  if (!plan.ok) {
    VLM_ASSERT(e != GemmEpilogue::None, "matmul: cuBLASLt has no algorithm for ", k.str());
    return false;
  }
  if (epilogue_has_bias(e)) plan.desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, ep.bias);
  if (epilogue_has_aux(e)) plan.desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(ep.aux));
  const cublasStatus_t st =
      cublasLtMatmul(cs.cublaslt(), plan.desc.h, &p.alpha, p.b, plan.la->h, p.a, plan.lb->h, &p.beta, p.c,
                     plan.lc->h, p.c, plan.lc->h, &plan.algo, cs.workspace(), cs.workspace_bytes(), cs.handle());
  // Likewise an epilogue cuBLASLt would reject only at the call.
  if ((st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) && e != GemmEpilogue::None) {
    plan.ok = false;  // never asked again for this key
    return false;
  }
  CUBLAS_CHECK(st);
  return true;
}

PlanCounts gemm_plan_counts(CudaStream& s) {
  const GemmPlans& g = plans_of(s);
  return PlanCounts{g.cache.builds(), g.cache.hits(), g.cache.size()};
}

}  // namespace vlm::cuda
