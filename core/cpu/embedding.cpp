// CPU embedding lookup for a (possibly vocab-parallel) table shard
// (core/ops/embedding.inc). table[V,C] holds vocabulary rows [offset, offset+V).
// Forward: out[t] = table[ids[t] - offset], zero for ids outside the shard.
// Backward: dtable[ids[t] - offset] += dout[t] (accumulate). Repeated ids add up in
// token order: the backward runs in parallel over column blocks, never over tokens,
// so there are no races and the sum order is fixed.
#include <algorithm>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void embedding_forward(Stream& s, const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_offset) {
  const int64_t V = table.size(0), C = table.size(1), T_ = ids.numel();
  const int32_t* id = ids.ptr<int32_t>();
  dispatch_float(table.dtype(), "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* tb = table.ptr<T>();
    T* o = out.ptr<T>();
    parallel_for(T_, row_grain(C, kGrainStream), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t r = int64_t(id[t]) - vocab_offset;
        if (r >= 0 && r < V)
          std::copy(tb + r * C, tb + (r + 1) * C, o + t * C);
        else
          std::fill(o + t * C, o + (t + 1) * C, T(0));
      }
    });
  });
}

void embedding_backward(Stream& s, const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t vocab_offset) {
  const int64_t V = dtable.size(0), C = dtable.size(1), T_ = ids.numel();
  const int32_t* id = ids.ptr<int32_t>();
  dispatch_float(dtable.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = dout.ptr<T>();
    T* dt = dtable.ptr<T>();
    constexpr int64_t kBlock = 64;
    const int64_t nblocks = (C + kBlock - 1) / kBlock;
    parallel_for(nblocks, row_grain(T_ * kBlock, kGrainStream), [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
        for (int64_t t = 0; t < T_; ++t) {
          const int64_t r = int64_t(id[t]) - vocab_offset;
          if (r < 0 || r >= V) continue;
          for (int64_t c = c0; c < c1; ++c) dt[r * C + c] += g[t * C + c];
        }
      }
    });
  });
}

}  // namespace vlm::cpu
