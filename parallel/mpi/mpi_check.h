// MPI_CHECK(expr): evaluates an MPI call and, unless it returns MPI_SUCCESS, prints
// "MPI failed: <expr> (<MPI error string>) at file:line" through vlm_check_failed and
// aborts (base/error.h). For internal failures only; launch mistakes are UserErrors.
#pragma once
#include <mpi.h>

#include "base/error.h"

namespace vlm::detail {
[[noreturn]] inline void mpi_check_failed(int rc, const char* expr, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  vlm_check_failed("MPI", expr, cat(std::string(msg, size_t(len)), " [code ", rc, "]"), file, line);
}
}  // namespace vlm::detail

#define MPI_CHECK(expr)                                                                   \
  do {                                                                                    \
    const int vlm_mpi_rc_ = (expr);                                                       \
    if (vlm_mpi_rc_ != MPI_SUCCESS) ::vlm::detail::mpi_check_failed(vlm_mpi_rc_, #expr, __FILE__, __LINE__); \
  } while (0)
