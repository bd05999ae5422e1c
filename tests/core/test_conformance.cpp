// Backend conformance in the style of ggml's test-backend-ops: every case of
// all_op_cases() (core/opcheck/op_case.h) runs on each backend and is compared with the
// CPU reference within the case's tolerance.
//  - Conformance/Cpu: the CPU backend against itself: err must be exactly 0 (the CPU
//    ops are deterministic, so two runs agree bitwise).
//  - Conformance/Cuda: the CUDA backend against the CPU; skipped with the reason
//    (vlm::cuda_unavailable_reason()) when no GPU or no CUDA build is present.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>

#include <cctype>

#include "core/opcheck/op_case.h"

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

TEST(ConformanceTable, CoversEveryOp) {
  // Every public op of core/ops/*.inc is the op token of at least one case: the first
  // word of its name, split at '/' ("slice_cols/unslice_cols" covers both). Exact
  // match, so "matmul" does not count for "mul" nor "bias_add" for "add".
  std::set<std::string> tokens;
  for (const OpCase& c : cases()) {
    std::stringstream first(c.name.substr(0, c.name.find(' ')));
    for (std::string t; std::getline(first, t, '/');) tokens.insert(t);
  }
  const char* ops[] = {"matmul", "bias_backward", "fill", "scale", "add", "accumulate", "mul", "copy", "convert", "round_bf16",
                       "bias_add", "slice_cols", "unslice_cols", "gelu_forward", "gelu_backward",
                       "swiglu_forward", "swiglu_backward", "sum_squares", "layernorm", "rmsnorm", "softmax",
                       "rope", "attention", "embedding", "cross_entropy", "vocab_ce", "conv2d", "avgpool2d",
                       "image_to_patches", "adamw_step", "sigmoid", "row_stats", "scatter_rows",
                       "attention_decode", "maps_to_rows", "rows_to_maps"};
  for (const char* op : ops) EXPECT_TRUE(tokens.count(op)) << "no conformance case for " << op;
}

}  // namespace
}  // namespace vlm::opcheck
