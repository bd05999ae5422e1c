// Implementation of the internal-invariant failure path (see error.h).
#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace vlm {

void vlm_check_failed(const char* what, const char* expr, const std::string& detail,
                      const char* file, int line) {
  std::fprintf(stderr, "vlm: %s failed: %s%s%s at %s:%d\n", what, expr,
               detail.empty() ? "" : " (", detail.empty() ? "" : (detail + ")").c_str(), file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace vlm
