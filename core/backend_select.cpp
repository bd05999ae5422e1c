// Run-time backend selection (see backend.h). The only place outside core/cuda/ that
// knows whether CUDA was compiled in.
#include <cstdio>

#include "base/error.h"
#include "core/backend.h"

namespace vlm {

#ifdef VLM_HAS_CUDA
namespace cuda {
int device_count(std::string* reason);  // core/cuda/backend_cuda.cpp
Backend& backend();
uint64_t allocations();
}  // namespace cuda
#endif

bool cuda_available() {
#ifdef VLM_HAS_CUDA
  return cuda::device_count(nullptr) > 0;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef VLM_HAS_CUDA
  std::string reason;
  if (cuda::device_count(&reason) > 0) return "";
  return reason;
#else
  return "the CUDA backend was not compiled in (configure with -DVLM_CUDA=ON and nvcc present)";
#endif
}

uint64_t cuda_allocations() {
#ifdef VLM_HAS_CUDA
  return cuda::allocations();
#else
  return 0;
#endif
}

Backend& cuda_backend() {
#ifdef VLM_HAS_CUDA
  VLM_REQUIRE(cuda_available(), "--device cuda: no usable GPU (", cuda_unavailable_reason(), ")");
  return cuda::backend();
#else
  throw UserError(cat("--device cuda: ", cuda_unavailable_reason()));
#endif
}

Backend& backend_for(DeviceKind d) { return d == DeviceKind::CPU ? cpu_backend() : cuda_backend(); }

Backend& select_backend(const std::string& which, bool log) {
  Backend* b = nullptr;
  std::string why;
  if (which == "cpu") {
    b = &cpu_backend();
    why = "requested";
  } else if (which == "cuda") {
    b = &cuda_backend();
    why = "requested";
  } else if (which == "auto") {
    if (cuda_available()) {
      b = &cuda_backend();
      why = "auto: GPU found";
    } else {
      b = &cpu_backend();
      why = cat("auto: ", cuda_unavailable_reason());
    }
  } else {
    throw UserError(cat("--device: expected auto, cpu or cuda, got '", which, "'"));
  }
  // Logs go to stdout: stderr carries only errors (one line; docs/errors.md).
  if (log) std::printf("vlm: backend %s [%s]\n", b->description().c_str(), why.c_str());
  return *b;
}

}  // namespace vlm
