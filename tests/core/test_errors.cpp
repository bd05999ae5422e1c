// Error-path tests (base/error.h): require_shape's message, VLM_REQUIRE throwing
// UserError with the message, bad backend names and an unavailable CUDA backend as
// UserErrors, and VLM_ASSERT / op shape checks aborting with the expression, the
// detail and file:line (death tests).
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "core/backend.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm {
namespace {

std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError thrown>";
}

TEST(Errors, RequireShapeMessage) {
  Tensor t = Tensor::zeros(cpu_backend(), Shape{3, 2});
  EXPECT_EQ(user_error_of([&] { require_shape(t, Shape{2, 3}, "model.embedding"); }),
            "model.embedding: expected shape [2,3], got [3,2]");
  EXPECT_NO_THROW(require_shape(t, Shape{3, 2}, "x"));
}

TEST(Errors, RequireThrowsUserErrorWithMessage) {
  const int d_model = -4;
  EXPECT_EQ(user_error_of([&] { VLM_REQUIRE(d_model > 0, "model.d_model=", d_model, " (expected > 0)"); }),
            "model.d_model=-4 (expected > 0)");
  EXPECT_NO_THROW(VLM_REQUIRE(d_model < 0, "unused"));
}

TEST(Errors, BadBackendName) {
  EXPECT_EQ(user_error_of([] { select_backend("gpu", false); }), "--device: expected auto, cpu or cuda, got 'gpu'");
  EXPECT_EQ(&select_backend("cpu", false), &cpu_backend());
  Backend& a = select_backend("auto", false);
  EXPECT_EQ(a.device(), cuda_available() ? DeviceKind::CUDA : DeviceKind::CPU);
}

TEST(Errors, CudaUnavailableIsAUserError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  const std::string reason = cuda_unavailable_reason();
  EXPECT_FALSE(reason.empty());
  const std::string msg = user_error_of([] { cuda_backend(); });
  EXPECT_NE(msg.find("--device cuda"), std::string::npos) << msg;
  EXPECT_NE(msg.find(reason), std::string::npos) << msg;
}

TEST(ErrorsDeathTest, AssertAbortsWithExpressionAndLocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(VLM_ASSERT(1 + 1 == 3, "boom ", 42), "assertion failed: 1 \\+ 1 == 3 \\(boom 42\\) at .*test_errors\\.cpp:");
  EXPECT_DEATH(vlm_check_failed("CUDA", "cudaMalloc(&p, n)", "out of memory", "x.cu", 7),
               "CUDA failed: cudaMalloc\\(&p, n\\) \\(out of memory\\) at x\\.cu:7");
}

TEST(ErrorsDeathTest, OpShapeMismatchAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Tensor a = Tensor::zeros(cpu_backend(), Shape{2, 3}), b = Tensor::zeros(cpu_backend(), Shape{4, 5});
  Tensor c = Tensor::zeros(cpu_backend(), Shape{2, 5});
  EXPECT_DEATH(matmul(cpu_backend().default_stream(), c, a, b, GemmOpts{}), "matmul: inner dims differ");
  Tensor i32 = Tensor::zeros(cpu_backend(), Shape{2, 3}, DType::I32);
  EXPECT_DEATH(gelu_forward(cpu_backend().default_stream(), i32, i32), "unsupported dtype i32");
}

}  // namespace
}  // namespace vlm
