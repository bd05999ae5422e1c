// The op conformance table (in the style of ggml's test-backend-ops) and its
// comparison: library vlm_opcheck, used by tests/core/test_conformance.cpp and by the
// `vlm selfcheck` command.
//
//   struct OpCase { std::string name; double tol; std::function<OpOutputs(Backend&)> run; };
//   std::vector<OpCase> all_op_cases();                   // every op, odd sizes included
//   OpCaseResult check_op_case(const OpCase&, Backend&);   // run on CPU and on b, compare
//   OpCaseResult check_op_case_finite(const OpCase&);      // one CPU run, outputs finite
//
// A case's `run` builds its inputs on the given backend from a fixed seed (identical
// values on every backend: they are drawn on the host and copied), runs the op on the
// backend's default stream and returns the named output tensors (still on that
// backend). Accumulated outputs start from random values, overwritten ones from junk,
// so "+=" and "=" are both checked. check_op_case runs the case on the CPU backend
// (the reference) and on b, and compares every output with the metric
//   err = max_i |x_i - ref_i| / (1 + |ref_i|)      (ok when err <= tol).
// On the CPU backend itself err must be 0 (the CPU ops are deterministic).
// The first word of a case's name is its op ("slice_cols/unslice_cols" names two ops;
// "layernorm" names layernorm_forward and layernorm_backward); tests/core/
// test_conformance.cpp checks that every op of the op table has a case.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm::opcheck {

struct NamedTensor {
  std::string name;
  Tensor t;
};
using OpOutputs = std::vector<NamedTensor>;

struct OpCase {
  std::string name;  // op and sizes, e.g. "matmul tn M17 N33 K65"
  double tol;        // bound on err (see above) for every output
  std::function<OpOutputs(Backend&)> run;
};

struct OpCaseResult {
  bool ok = true;
  double err = 0;       // worst err over the outputs (check_op_case)
  double max_abs = 0;   // worst |x - ref| over the outputs (check_op_case)
  size_t values = 0;    // output values compared or checked
  std::string detail;   // "out: err 1.2e-07 (tol 1e-05); " per output, or what went wrong
};

// Input factory of one case run: draws values on the host from a seeded generator and
// copies them to the backend.
class CaseCtx {
 public:
  CaseCtx(Backend& b, uint64_t seed) : b_(b), g_(seed) {}
  Backend& backend() { return b_; }
  Stream& stream() { return b_.default_stream(); }
  bool is_cpu() const { return b_.device() == DeviceKind::CPU; }

  // Uniform values in [lo, hi); bf16 tensors hold the rounded values.
  Tensor rand(Shape s, double lo = -1, double hi = 1, DType dt = DType::F32);
  // rand() rounded to bf16 and stored as dt (f32 or bf16): same values either way.
  Tensor rand_bf16_values(Shape s, DType dt, double lo = -1, double hi = 1);
  Tensor ints(Shape s, int lo, int hi);  // uniform in [lo, hi]
  Tensor i32(const std::vector<int32_t>& v);
  Tensor zeros(Shape s, DType dt = DType::F32) { return Tensor::zeros(b_, s, dt); }
  // An output that the op must overwrite: starts as junk (777, f32 or bf16).
  Tensor junk(Shape s, DType dt = DType::F32);

 private:
  double unit() { return double(g_() >> 11) * (1.0 / 9007199254740992.0); }
  Tensor rand_host(Shape s, double lo, double hi);
  Tensor upload(const Tensor& h, DType dt);
  Backend& b_;
  std::mt19937_64 g_;
};

// max_i |x_i - ref_i| / (1 + |ref_i|); infinity when any term is NaN.
double op_case_err(const std::vector<double>& x, const std::vector<double>& ref);
// Runs c on the CPU backend and on b and compares every output (tol = 0 when b is the
// CPU). A differing output count or size is a failure, not an abort.
OpCaseResult check_op_case(const OpCase& c, Backend& b);
// Runs c once on the CPU backend: every output value must be finite (the check the
// CPU alone can make without a second backend).
OpCaseResult check_op_case_finite(const OpCase& c);

// The table, in five parts (core/opcheck/cases_*.cpp), and all of it.
std::vector<OpCase> gemm_elementwise_cases();  // matmul, bias_backward, elementwise, copy
std::vector<OpCase> nn_cases();                // norms, softmax, rope, attention, embedding
std::vector<OpCase> loss_conv_optim_cases();   // cross-entropy, vocab pieces, conv, pool, AdamW
std::vector<OpCase> decode_cases();            // scatter_rows, attention_decode
std::vector<OpCase> bf16_fused_cases();        // bf16 activations of every op that takes them; the fused ops
std::vector<OpCase> fast_path_cases();         // the fast CUDA paths: bf16 GEMM epilogues, dGELU,
                                               // chunked mixed GEMMs, fixed-order reductions, bf16 attention
std::vector<OpCase> all_op_cases();

// The vocab-parallel loss pieces (rowmax, sumexp, loss, backward) on N = 17 rows of a
// shard [50, 50 + Vl) of logits of dtype dt (bf16: the gradient in place of the
// logits), from `seed` (core/opcheck/cases_nn.cpp; the bf16 table uses it too).
OpCase vocab_ce_case(int64_t Vl, DType dt, double tol, uint64_t seed);

}  // namespace vlm::opcheck
