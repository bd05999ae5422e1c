// Contracts of core/ops/decode.inc (see contract.h). The values of rows, key_start and
// key_len are the caller's invariant; the CPU ops check them as they read them.
#include "core/ops/contract.h"

namespace vlm::contract {

void scatter_rows(const Op& op, const Tensor& dst, const Tensor& src, const Tensor& rows) {
  op.on_device(dst, "dst");
  op.on_device(src, "src");
  VLM_ASSERT(dst.ndim() >= 1 && src.ndim() >= 1 && dst.dtype() == src.dtype(), op.name, ": dst ", dst.str(), " src ",
             src.str());
  const int64_t R = dst.size(0), N = src.size(0), width = R > 0 ? dst.numel() / R : 0;
  VLM_ASSERT(N == 0 || src.numel() / N == width, op.name, ": rows of dst ", dst.str(), " and src ", src.str(),
             " differ in width");
  op.elems(rows, DType::I32, N, "rows");
}

void attention_decode(const Op& op, const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& key_start, const Tensor& key_len, int max_len) {
  op.dtype(q, "q", kAct);
  op.on_device(k_cache, "k_cache");
  VLM_ASSERT(q.ndim() == 3 && k_cache.ndim() == 3, op.name, ": q ", q.str(), " k_cache ", k_cache.str(),
             " must be 3-D");
  const int64_t N = q.size(0), NH = q.size(1), HS = q.size(2), R = k_cache.size(0), NKV = k_cache.size(1);
  VLM_ASSERT(k_cache.dtype() == q.dtype() && k_cache.size(2) == HS && HS >= 1 && NKV > 0 && NH >= NKV && NH % NKV == 0,
             op.name, ": q ", q.str(), " k_cache ", k_cache.str(), " (need the same HS, NH >= 1 and NH % NKV == 0)");
  op.same(v_cache, k_cache, "v_cache");
  op.same(out, q, "out");
  op.elems(key_start, DType::I32, N, "key_start");
  op.elems(key_len, DType::I32, N, "key_len");
  VLM_ASSERT(max_len >= 1 && max_len <= R, op.name, ": max_len ", max_len, " for a cache of ", R, " rows");
}

}  // namespace vlm::contract
