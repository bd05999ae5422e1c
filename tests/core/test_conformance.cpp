// Backend conformance in the style of ggml's test-backend-ops: every case of
// all_op_cases() (core/opcheck/op_case.h) runs on each backend and is compared with the
// CPU reference within the case's tolerance.
//  - Conformance/Cpu: the CPU backend against itself: err must be exactly 0 (the CPU
//    ops are deterministic, so two runs agree bitwise).
//  - Conformance/Cuda: the CUDA backend against the CPU; skipped with the reason
//    (vlm::cuda_unavailable_reason()) when no GPU or no CUDA build is present.
//  - ConformanceAttention: on CUDA, which path each bf16 attention shape took.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include <cctype>

#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {
namespace {

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = all_op_cases();
  return all;
}

std::string test_name(size_t i) {
  std::string s = cat(i, "_", cases()[i].name), out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

class Conformance : public ::testing::TestWithParam<size_t> {};

TEST_P(Conformance, Cpu) {
  const OpCase& c = cases()[GetParam()];
  OpCaseResult r = check_op_case(c, cpu_backend());
  EXPECT_TRUE(r.ok) << c.name << ": " << r.detail;
}

TEST_P(Conformance, Cuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA backend: " << cuda_unavailable_reason();
  const OpCase& c = cases()[GetParam()];
  OpCaseResult r = check_op_case(c, cuda_backend());
  EXPECT_TRUE(r.ok) << c.name << ": " << r.detail;
  std::printf("  %-60s %s\n", c.name.c_str(), r.detail.c_str());
}

INSTANTIATE_TEST_SUITE_P(Ops, Conformance, ::testing::Range(size_t(0), cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return test_name(info.param); });

// The bf16 attention cases at the models' head sizes (64, 128, 256) take cuDNN's fused
// attention on a GPU: a refusal would pass every case above on our kernel, unnoticed.
// Prints the path of every shape class, with cuDNN's reason where it refused.
TEST(ConformanceAttention, TheModelsHeadSizesTakeCuDnn) {
  if (!cuda_available()) {
    GTEST_SKIP() << "no CUDA backend: " << cuda_unavailable_reason();
  }
  Backend& b = cuda_backend();
  for (const OpCase& c : cases()) {
    if (!c.name.starts_with("attention bf16")) continue;
    EXPECT_TRUE(check_op_case(c, b).ok) << c.name;
  }
  const std::vector<std::string> paths = attention_paths(b.default_stream());
  ASSERT_FALSE(paths.empty()) << "no bf16 attention case ran on the default stream";
  for (const std::string& p : paths) {
    std::printf("  attention path: %s\n", p.c_str());
    if (p.find("not compiled in") != std::string::npos || p.find("VLM_CUDNN_ATTENTION=0") != std::string::npos) {
      GTEST_SKIP() << "cuDNN's route is off in this run: " << p;
    }
    const bool model_head = p.find(" HS64 ") != std::string::npos || p.find(" HS128 ") != std::string::npos ||
                            p.find(" HS256 ") != std::string::npos;
    if (model_head) {
      EXPECT_NE(p.find(": cuDNN fused attention"), std::string::npos) << p;
    }
  }
}

TEST(ConformanceTable, CoversEveryOp) {
  // Every op of the op table (vlm::op_names(), core/ops/ops_all.inc) is covered by a
  // case: a token of the first word of a case's name, split at '/'
  // ("slice_cols/unslice_cols" covers both), equal to the op's name or to the name
  // without "_forward" / "_backward" ("layernorm" covers layernorm_forward and
  // layernorm_backward). Exact match, so "matmul" does not count for "mul" nor
  // "bias_add" for "add".
  std::set<std::string> tokens;
  for (const OpCase& c : cases()) {
    std::stringstream first(c.name.substr(0, c.name.find(' ')));
    for (std::string t; std::getline(first, t, '/');) tokens.insert(t);
  }
  auto covered = [&](const std::string& op) {
    if (tokens.count(op)) return true;
    for (const std::string suffix : {"_forward", "_backward"})
      if (op.size() > suffix.size() && op.ends_with(suffix) && tokens.count(op.substr(0, op.size() - suffix.size())))
        return true;
    return false;
  };
  ASSERT_FALSE(op_names().empty());
  for (std::string_view op : op_names()) EXPECT_TRUE(covered(std::string(op))) << "no conformance case for " << op;
}

}  // namespace
}  // namespace vlm::opcheck
