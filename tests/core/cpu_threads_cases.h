// Helpers of the CPU thread-pool tests (test_cpu_threads*.cpp): a matmul op case of
// any shape, and a scope that forces every parallel path on.
#pragma once
#include <cstdint>
#include <string>

#include "base/error.h"
#include "core/cpu_threads.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {

// C = alpha op(A) op(B) + beta C (+ bias, GELU epilogue), optionally batched.
inline OpCase matmul_case(int64_t M, int64_t N, int64_t K, bool ta, bool tb, int64_t batch, bool b_batched, bool bias,
                   bool gelu, float alpha, float beta) {
  std::string name = cat("matmul ", ta ? "t" : "n", tb ? "t" : "n", " M", M, " N", N, " K", K);
  if (batch) name += cat(" batch", batch, b_batched ? "" : " (B broadcast)");
  if (bias) name += " +bias";
  if (gelu) name += " +gelu";
  return {name, 0, [=](Backend& b) {
            CaseCtx c(b, 8000 + uint64_t(M * 31 + N * 7 + K + ta * 3 + tb + batch * 5));
            Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
            if (batch) sa = Shape{batch, sa[0], sa[1]};
            if (batch && b_batched) sb = Shape{batch, sb[0], sb[1]};
            Shape sc = batch ? Shape{batch, M, N} : Shape{M, N};
            Tensor A = c.rand(sa), B = c.rand(sb), C = beta != 0.f ? c.rand(sc) : c.junk(sc);
            Tensor bv = c.rand(Shape{N}), pre = c.junk(sc);
            GemmOpts o;
            o.trans_a = ta, o.trans_b = tb, o.alpha = alpha, o.beta = beta;
            if (bias) o.bias = &bv;
            if (gelu) o.gelu = true, o.pre_gelu = &pre;
            matmul(c.stream(), C, A, B, o);
            OpOutputs out{{"C", C}};
            if (gelu) out.push_back({"pre_gelu", pre});
            return out;
          }};
}

class ForceParallel {
 public:
  ForceParallel() { set_cpu_force_parallel(true); }
  ~ForceParallel() { set_cpu_force_parallel(false); }
};

}  // namespace vlm::opcheck
