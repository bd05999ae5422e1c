// CPU scaled dot-product attention over packed variable-length samples
// (core/ops/attention.inc). q[T,NH,HS], k/v[T,NKV,HS], out[T,NH,HS], lse[T,NH],
// cu_seqlens[B+1] i32 with cu[0] = 0, non-decreasing, cu[B] = T. Query head h reads
// kv head h / (NH/NKV). Causal: a token sees keys j <= i of its own sample.
// The heavy work is BLAS (blas_gemm_ld on the packed layout, row strides NH*HS and
// NKV*HS, no copies), one sample and one head at a time, query rows in blocks of kRows
// (causal blocks only multiply the keys they can see):
//   forward:  S = scale Q K^T, P = softmax(S) (masked, max-subtracted, lse saved in
//             f32 or f64), O = P V;
//   backward: P = exp(S - lse) recomputed, D = rowsum(dO * O), dV += P^T dO,
//             dS = P (dO V^T - D), dQ = scale dS K, dK += scale dS^T Q.
// Parallel over (sample, head) in forward and (sample, kv head) in backward (pool
// tasks, core/cpu/thread_pool.h); a backward unit sums its group's query heads and query
// blocks into dK/dV in a fixed order, so there are no races and the output is bitwise
// the same for any thread count (each element of a BLAS product is computed whole by
// one call: see blas.h). Scratch (scores, unit order) is per-thread and kept.
#include <algorithm>
#include <cmath>

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

constexpr int64_t kRows = 64;  // query rows per block (the causal waste is <= kRows/L)

struct AttnDims {
  int64_t T, NH, NKV, HS, B;
  const int32_t* cu;  // [B+1] sample boundaries
};

// The sizes, and the sample boundaries checked as they are read (the rest of the
// contract is checked before the op: core/ops/contract.h).
AttnDims attn_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& cu_seqlens, int max_seqlen) {
  AttnDims d{q.size(0), q.size(1), k.size(1), q.size(2), cu_seqlens.numel() - 1, cu_seqlens.ptr<int32_t>()};
  VLM_ASSERT(d.cu[0] == 0 && d.cu[d.B] == d.T, op, ": cu_seqlens must run from 0 to T=", d.T);
  for (int64_t b = 0; b < d.B; ++b)
    VLM_ASSERT(d.cu[b] <= d.cu[b + 1] && d.cu[b + 1] - d.cu[b] <= max_seqlen, op, ": sample ", b, " spans [",
               d.cu[b], ",", d.cu[b + 1], ") with max_seqlen ", max_seqlen);
  return d;
}

// Units u = b * per_sample + x, longest sample first (load balance of the task loop),
// in per-thread scratch slot 0: order[0, B * per_sample).
const int64_t* unit_order(const AttnDims& d, int64_t per_sample) {
  int64_t* samples = thread_scratch<int64_t>(0, d.B * (per_sample + 1));
  int64_t* order = samples + d.B;
  auto len = [&](int64_t b) { return d.cu[b + 1] - d.cu[b]; };
  for (int64_t b = 0; b < d.B; ++b) {  // stable insertion sort, longest first (no allocation)
    int64_t i = b;
    for (; i > 0 && len(samples[i - 1]) < len(b); --i) samples[i] = samples[i - 1];
    samples[i] = b;
  }
  for (int64_t i = 0; i < d.B; ++i)
    for (int64_t x = 0; x < per_sample; ++x) order[i * per_sample + x] = samples[i] * per_sample + x;
  return order;
}

// Runs f(unit) for the n units of `order`: as pool tasks (claimed in order, longest
// first) when there is a unit per thread and enough work; otherwise in order on the
// caller, whose BLAS calls then split over the pool. A unit's result does not depend on
// which thread runs it, so both give the same bits.
template <typename F>
void for_units(const int64_t* order, int64_t n, int64_t work, F&& f) {
  const int nt = threads_for(work, kGrainMath * 64);
  if (nt > 1 && n >= nt)
    parallel_tasks(n, nt, [&](int64_t i) { f(order[i]); });
  else
    for (int64_t i = 0; i < n; ++i) f(order[i]);
}

// Query block rows [i0, i1) of a sample of length L see keys [0, kl): the sample
// (bidirectional) or up to the block's last row (causal). Row r sees keys [0, seen(r)).
struct QBlock {
  int64_t i0, i1, kl;
  bool causal;
  int64_t seen(int64_t r) const { return causal ? i0 + r + 1 : kl; }
};

}  // namespace

void attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                       int max_seqlen, bool causal) {
  const char* op = "attention_forward";
  const AttnDims d = attn_dims(op, q, k, cu_seqlens, max_seqlen);
  const StatRef sl(lse);
  const double scale = 1.0 / std::sqrt(double(d.HS));
  const int64_t group = d.NH / d.NKV, HS = d.HS, NH = d.NH, NKV = d.NKV;
  const int64_t ldq = NH * HS, ldk = NKV * HS;
  const int64_t work = d.T * NH * int64_t(max_seqlen) * HS;  // ~ multiply-adds
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = q.ptr<T>(), *pk = k.ptr<T>(), *pv = v.ptr<T>();
    T* po = out.ptr<T>();
    // Unit u = (sample b, head h): S[kRows, L] = scale Q K^T, softmax in place, O = P V.
    for_units(unit_order(d, NH), d.B * NH, work, [&](int64_t u) {
      const int64_t b = u / NH, h = u % NH, kh = h / group;
      const int64_t t0 = d.cu[b], L = d.cu[b + 1] - t0;
      if (L == 0) return;
      T* S = thread_scratch<T>(1, std::min(L, kRows) * L);
      const T *K = pk + (t0 * NKV + kh) * HS, *V = pv + (t0 * NKV + kh) * HS;
      for (int64_t i0 = 0; i0 < L; i0 += kRows) {
        const int64_t i1 = std::min(L, i0 + kRows), m = i1 - i0;
        const QBlock qb{i0, i1, causal ? i1 : L, causal};
        const T* Q = pq + ((t0 + i0) * NH + h) * HS;
        blas_gemm_ld(false, true, m, qb.kl, HS, scale, Q, ldq, K, ldk, 0.0, S, qb.kl);
        for (int64_t r = 0; r < m; ++r) {
          T* row = S + r * qb.kl;
          const int64_t n = qb.seen(r);
          T mx = row[0];
#pragma omp simd reduction(max : mx)
          for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
          const double sum = exp_shifted(row, n, mx);
          const T inv = T(1.0 / sum);
          for (int64_t j = 0; j < n; ++j) row[j] *= inv;
          std::fill(row + n, row + qb.kl, T(0));  // masked keys
          sl.set((t0 + i0 + r) * NH + h, double(mx) + std::log(sum));
        }
        blas_gemm_ld(false, false, m, HS, qb.kl, 1.0, S, qb.kl, V, ldk, 0.0, po + ((t0 + i0) * NH + h) * HS, ldq);
      }
    });
  });
}

void attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                        int max_seqlen, bool causal) {
  const char* op = "attention_backward";
  const AttnDims d = attn_dims(op, q, k, cu_seqlens, max_seqlen);
  const StatRef sl(lse);
  const double scale = 1.0 / std::sqrt(double(d.HS));
  const int64_t group = d.NH / d.NKV, HS = d.HS, NH = d.NH, NKV = d.NKV;
  const int64_t ldq = NH * HS, ldk = NKV * HS;
  const int64_t work = d.T * NH * int64_t(max_seqlen) * HS;  // ~ multiply-adds
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = q.ptr<T>(), *pk = k.ptr<T>(), *pv = v.ptr<T>(), *po = out.ptr<T>(), *pg = dout.ptr<T>();
    T *pdq = dq.ptr<T>(), *pdk = dk.ptr<T>(), *pdv = dv.ptr<T>();
    // Unit u = (sample b, kv head kh): owns dK, dV of its rows and dQ of its group's heads.
    for_units(unit_order(d, NKV), d.B * NKV, work * 3, [&](int64_t u) {
      const int64_t b = u / NKV, kh = u % NKV;
      const int64_t t0 = d.cu[b], L = d.cu[b + 1] - t0;
      if (L == 0) return;
      const int64_t bs = std::min(L, kRows);
      T* P = thread_scratch<T>(1, 2 * bs * L);
      T* dS = P + bs * L;
      const T *K = pk + (t0 * NKV + kh) * HS, *V = pv + (t0 * NKV + kh) * HS;
      T *dK = pdk + (t0 * NKV + kh) * HS, *dV = pdv + (t0 * NKV + kh) * HS;
      for (int64_t j = 0; j < L; ++j) {
        std::fill(dK + j * ldk, dK + j * ldk + HS, T(0));
        std::fill(dV + j * ldk, dV + j * ldk + HS, T(0));
      }
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < L; i0 += kRows) {
          const int64_t i1 = std::min(L, i0 + kRows), m = i1 - i0;
          const QBlock qb{i0, i1, causal ? i1 : L, causal};
          const int64_t off = ((t0 + i0) * NH + h) * HS;  // row i0 of head h in q/out/dout/dq
          const T *Q = pq + off, *G = pg + off, *O = po + off;
          blas_gemm_ld(false, true, m, qb.kl, HS, scale, Q, ldq, K, ldk, 0.0, P, qb.kl);
          blas_gemm_ld(false, true, m, qb.kl, HS, 1.0, G, ldq, V, ldk, 0.0, dS, qb.kl);  // dP
          for (int64_t r = 0; r < m; ++r) {
            T *pr = P + r * qb.kl, *dr = dS + r * qb.kl;
            const int64_t n = qb.seen(r);
            double Dd = 0;  // D = dout . out of this row
            for (int64_t c = 0; c < HS; ++c) Dd += double(G[r * ldq + c]) * double(O[r * ldq + c]);
            const T Dr = T(Dd);
            const T L_r = T(sl.get((t0 + i0 + r) * NH + h));
            exp_shifted(pr, n, L_r);
            for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - Dr);
            std::fill(pr + n, pr + qb.kl, T(0));  // masked keys
            std::fill(dr + n, dr + qb.kl, T(0));
          }
          blas_gemm_ld(true, false, qb.kl, HS, m, 1.0, P, qb.kl, G, ldq, 1.0, dV, ldk);
          blas_gemm_ld(false, false, m, HS, qb.kl, scale, dS, qb.kl, K, ldk, 0.0, pdq + off, ldq);
          blas_gemm_ld(true, false, qb.kl, HS, m, scale, dS, qb.kl, Q, ldq, 1.0, dK, ldk);
        }
    });
  });
}

}  // namespace vlm::cpu
