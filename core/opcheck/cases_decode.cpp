// Conformance cases of the decoding ops (op_case.h): scatter_rows (exact: a byte copy;
// rows that are skipped or not listed keep their random values; f32 and bf16 rows) and attention_decode
// (1e-4: f32 on both backends, different summation orders) on caches with several
// sequences at odd offsets, grouped-query heads and head sizes that are not multiples
// of 32.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/opcheck/op_case.h"
#include "core/ops.h"

namespace vlm::opcheck {

std::vector<OpCase> decode_cases() {
  std::vector<OpCase> v;
  // bf16 rows of odd width: rows of 2 W bytes, not a multiple of 4 (the byte path).
  for (auto [W, dt] : {std::pair{int64_t(1), DType::F32}, {int64_t(15), DType::F32}, {int64_t(15), DType::BF16}})
    v.push_back({cat("scatter_rows R20 N7 W", W, dt == DType::BF16 ? " bf16" : ""), 0, [=](Backend& b) {
                   CaseCtx c(b, 6600 + uint64_t(W));
                   Tensor dst = c.rand(Shape{20, W}, -1, 1, dt), src = c.rand(Shape{7, W}, -1, 1, dt);
                   scatter_rows(c.stream(), dst, src, c.i32({4, -1, 0, 19, 7, -1, 11}));
                   return OpOutputs{{"dst", dst}};
                 }});
  struct Cfg {
    std::vector<int32_t> start, len;
    int64_t R, NH, NKV, HS;
  };
  const Cfg cfgs[] = {{{0, 40, 80}, {1, 17, 33}, 120, 4, 2, 16},
                      {{3}, {65}, 70, 2, 2, 64},
                      {{9, 0}, {7, 3}, 20, 6, 1, 24},
                      {{5, 50}, {40, 2}, 60, 2, 1, 130}};
  for (const Cfg& cf : cfgs) {
    const int64_t N = int64_t(cf.len.size()), NH = cf.NH, NKV = cf.NKV, HS = cf.HS, R = cf.R;
    const int mx = *std::max_element(cf.len.begin(), cf.len.end());
    v.push_back({cat("attention_decode N", N, " R", R, " NH", NH, " NKV", NKV, " HS", HS), 1e-4, [=](Backend& b) {
                   CaseCtx c(b, 6700 + uint64_t(N * NH + HS));
                   Tensor q = c.rand(Shape{N, NH, HS}, -2, 2), k = c.rand(Shape{R, NKV, HS}, -2, 2);
                   Tensor vv = c.rand(Shape{R, NKV, HS}), out = c.junk(Shape{N, NH, HS});
                   attention_decode(c.stream(), out, q, k, vv, c.i32(cf.start), c.i32(cf.len), mx);
                   return OpOutputs{{"out", out}};
                 }});
  }
  return v;
}

}  // namespace vlm::opcheck
