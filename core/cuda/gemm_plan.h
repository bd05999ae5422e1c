// cuBLASLt plans of core/cuda/gemm.cu (docs/gpu.md, "GEMMs"): the descriptors, the
// layouts and the algorithm of a call are built once per GemmKey (shape, batch strides,
// leading dimensions, transposes, dtypes, epilogue, alignments: core/gemm_key.h) and
// cached on the stream (core/plan_cache.h); a call with a known key sets its pointers
// and runs. A key for which cuBLASLt has no algorithm, or whose epilogue it refuses
// (INVALID_VALUE or NOT_SUPPORTED, at the heuristic or at the call), is cached as such:
// gemm.cu then takes the plain GEMM and its epilogue kernel, without asking again.
#pragma once
#include "core/cuda/cuda_backend.h"
#include "core/gemm_key.h"

namespace vlm::cuda {

// Runs p (row-major terms, core/gemm_key.h) with cuBLASLt epilogue e through the
// stream's plan for its key. Returns false, having done nothing, when cuBLASLt has no
// algorithm for this epilogue; a plain GEMM (e == None) without one aborts.
bool lt_matmul(CudaStream& cs, const GemmProblem& p, GemmEpilogue e, const GemmEpilogueArgs& ep);

}  // namespace vlm::cuda
