// CPU ops of incremental decoding (core/ops/decode.inc): scatter_rows and
// attention_decode.
//  - scatter_rows copies whole rows as bytes (any dtype), rows split over the pool.
//  - attention_decode: one unit per (row n, kv head kh) computes the heads of kh's group
//    together, as BLAS products on the cache layout (row stride NKV*HS, no copies):
//    S[group, len] = scale Q K^T, a row softmax (max-subtracted, exp_shifted of
//    vec_math.h, sums in double: the same rounding as attention_forward), O = P V.
//    Units run as pool tasks when there is enough work; each writes only its own output
//    rows, so the result does not depend on the thread count. Scratch (scores) is
//    per-thread and kept.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"

namespace vlm::cpu {

void scatter_rows(Stream& s, const Tensor& dst, const Tensor& src, const Tensor& rows) {
  const int64_t R = dst.size(0), N = src.size(0);
  const int64_t width = R > 0 ? dst.numel() / R : 0;
  const int32_t* r = rows.ptr<int32_t>();
  for (int64_t i = 0; i < N; ++i)
    VLM_ASSERT(r[i] < R, "scatter_rows: row ", r[i], " of ", i, " outside dst ", dst.str());
  const size_t row_bytes = size_t(width) * dtype_size(dst.dtype());
  char* d = static_cast<char*>(dst.data());
  const char* p = static_cast<const char*>(src.data());
  parallel_for(N, row_grain(width, kGrainStream), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      if (r[i] >= 0) std::memcpy(d + size_t(r[i]) * row_bytes, p + size_t(i) * row_bytes, row_bytes);
  });
}

void attention_decode(Stream& s, const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& key_start, const Tensor& key_len, int max_len) {
  const char* op = "attention_decode";
  const int64_t N = q.size(0), NH = q.size(1), HS = q.size(2), R = k_cache.size(0), NKV = k_cache.size(1);
  const int32_t *ks = key_start.ptr<int32_t>(), *kl = key_len.ptr<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    VLM_ASSERT(kl[n] >= 1 && kl[n] <= max_len && ks[n] >= 0 && int64_t(ks[n]) + kl[n] <= R, op, ": row ", n,
               " attends to cache rows [", ks[n], ", +", kl[n], ") of ", R, " with max_len ", max_len);
  const double scale = 1.0 / std::sqrt(double(HS));
  const int64_t group = NH / NKV, ldk = NKV * HS;
  const int64_t units = N * NKV, work = N * NH * int64_t(max_len) * HS;  // ~ multiply-adds
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = q.ptr<T>(), *pk = k_cache.ptr<T>(), *pv = v_cache.ptr<T>();
    T* po = out.ptr<T>();
    const int nt = int(std::min<int64_t>(threads_for(work, kGrainMath * 64), units));
    parallel_tasks(units, nt, [&](int64_t u) {
      const int64_t n = u / NKV, kh = u % NKV, len = kl[n];
      T* S = thread_scratch<T>(1, group * len);
      const int64_t at = (n * NH + kh * group) * HS;  // the group's heads of row n: [group, HS]
      const T *K = pk + (int64_t(ks[n]) * NKV + kh) * HS, *V = pv + (int64_t(ks[n]) * NKV + kh) * HS;
      blas_gemm_ld(false, true, group, len, HS, scale, pq + at, HS, K, ldk, 0.0, S, len);
      for (int64_t r = 0; r < group; ++r) {
        T* row = S + r * len;
        T mx = row[0];
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < len; ++j) mx = row[j] > mx ? row[j] : mx;
        const T inv = T(1.0 / exp_shifted(row, len, mx));
        for (int64_t j = 0; j < len; ++j) row[j] *= inv;
      }
      blas_gemm_ld(false, false, group, HS, len, 1.0, S, len, V, ldk, 0.0, po + at, HS);
    });
  });
}

}  // namespace vlm::cpu
