// Status checks for the CUDA runtime, cuBLAS/cuBLASLt and cuDNN (base/error.h).
// Each macro evaluates its expression once; on failure it reports, through
// vlm_check_failed (base/error.h), the expression text, the library's own error name and
// message, and file:line, then aborts. These are internal errors: a failing CUDA call is
// never the user's fault we can explain better than the library does.
//   CUDA_CHECK(cudaMalloc(&p, n));
//   CUDA_CHECK_LAUNCH();           // after a kernel launch: reports launch errors
//   CUBLAS_CHECK(cublasLtMatmul(...));
//   CUDNN_CHECK(cudnnConvolutionForward(...));
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "base/error.h"

#define CUDA_CHECK(expr)                                                                           \
  do {                                                                                             \
    cudaError_t vlm_cuda_status_ = (expr);                                                         \
    if (vlm_cuda_status_ != cudaSuccess)                                                           \
      ::vlm::vlm_check_failed("CUDA", #expr,                                                       \
                              ::vlm::cat(cudaGetErrorName(vlm_cuda_status_), ": ",                 \
                                         cudaGetErrorString(vlm_cuda_status_)),                    \
                              __FILE__, __LINE__);                                                 \
  } while (0)

// Reports an error of the kernel launch just made (bad configuration, too much shared
// memory). Errors inside the kernel surface at the next synchronizing CUDA call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                                         \
  do {                                                                                             \
    cublasStatus_t vlm_cublas_status_ = (expr);                                                    \
    if (vlm_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                               \
      ::vlm::vlm_check_failed("cuBLAS", #expr,                                                     \
                              ::vlm::cat(cublasLtGetStatusName(vlm_cublas_status_), ": ",          \
                                         cublasLtGetStatusString(vlm_cublas_status_)),             \
                              __FILE__, __LINE__);                                                 \
  } while (0)

#define CUDNN_CHECK(expr)                                                                          \
  do {                                                                                             \
    cudnnStatus_t vlm_cudnn_status_ = (expr);                                                      \
    if (vlm_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                 \
      ::vlm::vlm_check_failed("cuDNN", #expr, cudnnGetErrorString(vlm_cudnn_status_), __FILE__,    \
                              __LINE__);                                                           \
  } while (0)
