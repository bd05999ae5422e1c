// NCCL_CHECK(expr): evaluates an NCCL call and, unless it returns ncclSuccess, prints
// "NCCL failed: <expr> (<ncclGetErrorString>; last: <ncclGetLastError>) at file:line"
// through vlm_check_failed and aborts (base/error.h). Internal errors only.
#pragma once
#include <nccl.h>

#include "base/error.h"

#define NCCL_CHECK(expr)                                                                          \
  do {                                                                                            \
    const ncclResult_t vlm_nccl_rc_ = (expr);                                                     \
    if (vlm_nccl_rc_ != ncclSuccess)                                                              \
      ::vlm::vlm_check_failed("NCCL", #expr,                                                      \
                              ::vlm::cat(ncclGetErrorString(vlm_nccl_rc_), "; last: ",            \
                                         ncclGetLastError(nullptr)),                              \
                              __FILE__, __LINE__);                                                \
  } while (0)
