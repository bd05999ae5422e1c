// CPU embedding lookup for a (possibly vocab-parallel) table shard
// (core/ops/embedding.inc). table[V,C] holds vocabulary rows [offset, offset+V).
// Forward: out[t] = table[ids[t] - offset], zero for ids outside the shard (a row copy,
// any of f32, f64, bf16).
// Backward: dtable[ids[t] - offset] += dout[t] (accumulate; dout of dtable's dtype, or
// bf16 into an f32 dtable). Each row's sum (its old value, then its tokens' gradients
// in token order) is computed in the table's compute type (f32; f64 for f64) and stored
// once, as on CUDA (core/cuda/embedding.cu): the tokens are grouped by row first, then
// the rows run in parallel over column blocks, never over tokens, so there are no races
// and the sum order is fixed.
#include <algorithm>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

template <typename D, typename G>
void embedding_backward_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_offset) {
  const int64_t V = dtable.size(0), C = dtable.size(1), T_ = ids.numel();
  const int32_t* id = ids.ptr<int32_t>();
  const G* g = dout.ptr<G>();
  D* dt = dtable.ptr<D>();
  // The shard's tokens grouped by row, in token order within a row: keys row << 32 | t,
  // sorted (unique, so the order is stable), in the calling thread's scratch.
  uint64_t* key = thread_scratch<uint64_t>(0, std::max<int64_t>(1, T_));
  int64_t n = 0;
  for (int64_t t = 0; t < T_; ++t) {
    const int64_t r = int64_t(id[t]) - vocab_offset;
    if (r >= 0 && r < V) key[n++] = uint64_t(r) << 32 | uint64_t(t);
  }
  std::sort(key, key + n);
  using A = decltype(ld(D{}));  // the compute type: f32 (f64 for an f64 table)
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  parallel_for(nblocks, row_grain(T_ * kBlock, kGrainStream), [&](int64_t b0, int64_t b1) {
    A acc[kBlock];
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kBlock, w = std::min(C, c0 + kBlock) - c0;
      for (int64_t i = 0; i < n;) {  // one run of a row
        const int64_t r = int64_t(key[i] >> 32);
        D* out = dt + r * C + c0;
        for (int64_t c = 0; c < w; ++c) acc[c] = ld(out[c]);
        for (; i < n && int64_t(key[i] >> 32) == r; ++i) {
          const G* src = g + int64_t(key[i] & 0xffffffffu) * C + c0;
          for (int64_t c = 0; c < w; ++c) acc[c] += ld(src[c]);
        }
        for (int64_t c = 0; c < w; ++c) out[c] = st<D>(acc[c]);
      }
    }
  });
}

}  // namespace

void embedding_forward(Stream& s, const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_offset) {
  const int64_t V = table.size(0), C = table.size(1), T_ = ids.numel();
  const int32_t* id = ids.ptr<int32_t>();
  dispatch_act(table.dtype(), "embedding_forward", [&](auto tag) {
    using S = decltype(tag);
    const S* tb = table.ptr<S>();
    S* o = out.ptr<S>();
    parallel_for(T_, row_grain(C, kGrainStream), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t r = int64_t(id[t]) - vocab_offset;
        if (r >= 0 && r < V)
          std::copy(tb + r * C, tb + (r + 1) * C, o + t * C);
        else
          std::fill(o + t * C, o + (t + 1) * C, st<S>(0.f));
      }
    });
  });
}

void embedding_backward(Stream& s, const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t vocab_offset) {
  if (dtable.dtype() != dout.dtype())  // bf16 gradients into an f32 table (the contract)
    return embedding_backward_impl<float, bf16>(dtable, dout, ids, vocab_offset);
  dispatch_act(dtable.dtype(), "embedding_backward", [&](auto tag) {
    using S = decltype(tag);
    embedding_backward_impl<S, S>(dtable, dout, ids, vocab_offset);
  });
}

}  // namespace vlm::cpu
