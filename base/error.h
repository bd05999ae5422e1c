// Error policy (docs/architecture.md, "Core"; docs/errors.md).
// Two tiers:
//  - UserError: bad config, data or launch. Thrown, caught in main(), printed as one
//    line naming the option/file/dataset and what was expected; exit code 2. The
//    constructor makes the message one line, so no caller can break that rule.
//  - Internal invariants: VLM_ASSERT aborts with the expression and file:line.
// Library status checks (CUDA_CHECK, CUBLAS_CHECK, CUDNN_CHECK, NCCL_CHECK, MPI_CHECK,
// H5_CHECK) all go through vlm_check_failed() so they print the same way; each is
// defined next to its library (core/cuda/cuda_check.h, parallel/mpi/mpi_check.h,
// io/h5_check.h).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace vlm {

// The message as one printable line: every line break (with the indentation after it)
// becomes "; ", other control characters and bytes that are not UTF-8 become '?',
// trailing breaks are dropped, and the text is cut at kMaxUserErrorBytes (on a UTF-8
// character boundary).
inline constexpr size_t kMaxUserErrorBytes = 1000;
std::string one_line(const std::string& msg);

// A mistake of the user's (config, data, launch): message is the whole story. It is
// always one line (one_line), whatever the thrower put in it, since it may quote
// hostile input.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg) : std::runtime_error(one_line(msg)) {}
};

// Builds a message from any streamable pieces: cat("bad d_model=", 7, " (expected > 0)").
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Prints "<what> failed: <expr> (<detail>) at file:line" to stderr and aborts.
[[noreturn]] void vlm_check_failed(const char* what, const char* expr, const std::string& detail,
                                   const char* file, int line);

}  // namespace vlm

// Internal invariant: aborts with file:line when false. Not for user input.
#define VLM_ASSERT(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) ::vlm::vlm_check_failed("assertion", #cond, ::vlm::cat("" __VA_OPT__(, ) __VA_ARGS__), \
                                         __FILE__, __LINE__);                              \
  } while (0)

// User-facing check: throws UserError with the message when false.
#define VLM_REQUIRE(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) throw ::vlm::UserError(::vlm::cat(__VA_ARGS__));           \
  } while (0)
