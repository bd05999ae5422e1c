// CPU scaled dot-product attention over packed variable-length samples
// (core/ops/attention.inc). q[T,NH,HS], k/v[T,NKV,HS], out[T,NH,HS], lse[T,NH],
// cu_seqlens[B+1] i32 with cu[0] = 0, non-decreasing, cu[B] = T. Query head h reads
// kv head h / (NH/NKV). Causal: a token sees keys j <= i of its own sample.
// Forward: per (token, head), scores in double, max-subtracted softmax, lse saved
// (f32, or f64 when the caller passes f64 for gradient checks).
// Backward recomputes P = exp(s - lse): pass 1 gives dq per (token, head); pass 2 gives
// dk, dv per (key token, kv head), summing over the group's heads and the sample's
// queries in a fixed order, so there are no races and the result is deterministic.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

struct AttnDims {
  int64_t T, NH, NKV, HS, B;
  std::vector<int64_t> start, end;  // per token: its sample's [start, end)
};

AttnDims attn_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& cu_seqlens, int max_seqlen) {
  check_cpu(q, op, "q");
  VLM_ASSERT(q.ndim() == 3 && k.ndim() == 3, op, ": q ", q.str(), " k ", k.str(), " must be 3-D");
  AttnDims d{q.size(0), q.size(1), k.size(1), q.size(2), cu_seqlens.numel() - 1, {}, {}};
  check_cpu(k, op, "k");
  check_same(v, k, op, "v");
  VLM_ASSERT(k.dtype() == q.dtype() && k.size(0) == d.T && k.size(2) == d.HS && d.NKV > 0 && d.NH % d.NKV == 0,
             op, ": q ", q.str(), " k ", k.str(), " (need NH % NKV == 0)");
  VLM_ASSERT(cu_seqlens.dtype() == DType::I32 && cu_seqlens.is_cpu() && d.B >= 0, op, ": cu_seqlens ",
             cu_seqlens.str());
  const int32_t* cu = cu_seqlens.ptr<int32_t>();
  VLM_ASSERT(cu[0] == 0 && cu[d.B] == d.T, op, ": cu_seqlens must run from 0 to T=", d.T);
  d.start.resize(size_t(d.T));
  d.end.resize(size_t(d.T));
  for (int64_t b = 0; b < d.B; ++b) {
    VLM_ASSERT(cu[b] <= cu[b + 1] && cu[b + 1] - cu[b] <= max_seqlen, op, ": sample ", b, " spans [", cu[b],
               ",", cu[b + 1], ") with max_seqlen ", max_seqlen);
    for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
      d.start[size_t(t)] = cu[b];
      d.end[size_t(t)] = cu[b + 1];
    }
  }
  return d;
}

template <typename T>
double dot(const T* a, const T* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += double(a[i]) * double(b[i]);
  return acc;
}

}  // namespace

void attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                       int max_seqlen, bool causal) {
  const char* op = "attention_forward";
  AttnDims d = attn_dims(op, q, k, v, cu_seqlens, max_seqlen);
  check_same(out, q, op, "out");
  StatRef sl(lse, d.T * d.NH, op, "lse");
  const double scale = 1.0 / std::sqrt(double(d.HS));
  const int64_t group = d.NH / d.NKV, HS = d.HS;
  const int64_t work = d.T * d.NH * int64_t(max_seqlen) * HS;  // ~ multiply-adds
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = q.ptr<T>(), *pk = k.ptr<T>(), *pv = v.ptr<T>();
    T* po = out.ptr<T>();
#pragma omp parallel if (work > kOmpMin)
    {
      std::vector<double> sc, acc(static_cast<size_t>(HS));
#pragma omp for schedule(dynamic, 4)
      for (int64_t th = 0; th < d.T * d.NH; ++th) {
        const int64_t t = th / d.NH, h = th % d.NH, kh = h / group;
        const int64_t j0 = d.start[size_t(t)], j1 = causal ? t + 1 : d.end[size_t(t)];
        const T* qr = pq + th * HS;
        sc.assign(size_t(j1 - j0), 0.0);
        double mx = -INFINITY;
        for (int64_t j = j0; j < j1; ++j) {
          sc[size_t(j - j0)] = scale * dot(qr, pk + (j * d.NKV + kh) * HS, HS);
          mx = std::max(mx, sc[size_t(j - j0)]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = j0; j < j1; ++j) {
          const double p = std::exp(sc[size_t(j - j0)] - mx);
          sum += p;
          const T* vr = pv + (j * d.NKV + kh) * HS;
          for (int64_t c = 0; c < HS; ++c) acc[size_t(c)] += p * double(vr[c]);
        }
        for (int64_t c = 0; c < HS; ++c) po[th * HS + c] = T(acc[size_t(c)] / sum);
        sl.set(th, mx + std::log(sum));
      }
    }
  });
}

void attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                        int max_seqlen, bool causal) {
  const char* op = "attention_backward";
  AttnDims d = attn_dims(op, q, k, v, cu_seqlens, max_seqlen);
  check_same(out, q, op, "out");
  check_same(dout, q, op, "dout");
  check_same(dq, q, op, "dq");
  check_same(dk, k, op, "dk");
  check_same(dv, k, op, "dv");
  StatRef sl(lse, d.T * d.NH, op, "lse");
  const double scale = 1.0 / std::sqrt(double(d.HS));
  const int64_t group = d.NH / d.NKV, HS = d.HS, NH = d.NH, NKV = d.NKV;
  const int64_t work = d.T * NH * int64_t(max_seqlen) * HS;  // ~ multiply-adds
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = q.ptr<T>(), *pk = k.ptr<T>(), *pv = v.ptr<T>(), *po = out.ptr<T>(), *pg = dout.ptr<T>();
    T *pdq = dq.ptr<T>(), *pdk = dk.ptr<T>(), *pdv = dv.ptr<T>();
    std::vector<double> D(size_t(d.T * NH));  // D[t,h] = dout . out
    // Pass 1: dq[t,h] = scale * sum_j P (dP - D) k_j.
#pragma omp parallel if (work > kOmpMin)
    {
      std::vector<double> acc(static_cast<size_t>(HS));
#pragma omp for schedule(dynamic, 4)
      for (int64_t th = 0; th < d.T * NH; ++th) {
        const int64_t t = th / NH, h = th % NH, kh = h / group;
        const int64_t j0 = d.start[size_t(t)], j1 = causal ? t + 1 : d.end[size_t(t)];
        const T *qr = pq + th * HS, *gr = pg + th * HS;
        const double Di = dot(gr, po + th * HS, HS), L = sl.get(th);
        D[size_t(th)] = Di;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = j0; j < j1; ++j) {
          const T *kr = pk + (j * NKV + kh) * HS, *vr = pv + (j * NKV + kh) * HS;
          const double p = std::exp(scale * dot(qr, kr, HS) - L);
          const double ds = p * (dot(gr, vr, HS) - Di);
          for (int64_t c = 0; c < HS; ++c) acc[size_t(c)] += ds * double(kr[c]);
        }
        for (int64_t c = 0; c < HS; ++c) pdq[th * HS + c] = T(scale * acc[size_t(c)]);
      }
    }
    // Pass 2: dk[j,kh], dv[j,kh] summed over the group's heads and the queries that see j.
#pragma omp parallel if (work > kOmpMin)
    {
      std::vector<double> ak(static_cast<size_t>(HS)), av(static_cast<size_t>(HS));
#pragma omp for schedule(dynamic, 4)
      for (int64_t jk = 0; jk < d.T * NKV; ++jk) {
        const int64_t j = jk / NKV, kh = jk % NKV;
        const int64_t i0 = causal ? j : d.start[size_t(j)], i1 = d.end[size_t(j)];
        const T *kr = pk + jk * HS, *vr = pv + jk * HS;
        std::fill(ak.begin(), ak.end(), 0.0);
        std::fill(av.begin(), av.end(), 0.0);
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t ih = i * NH + h;
            const T *qr = pq + ih * HS, *gr = pg + ih * HS;
            const double p = std::exp(scale * dot(qr, kr, HS) - sl.get(ih));
            const double ds = p * (dot(gr, vr, HS) - D[size_t(ih)]);
            for (int64_t c = 0; c < HS; ++c) {
              av[size_t(c)] += p * double(gr[c]);
              ak[size_t(c)] += ds * double(qr[c]);
            }
          }
        for (int64_t c = 0; c < HS; ++c) {
          pdv[jk * HS + c] = T(av[size_t(c)]);
          pdk[jk * HS + c] = T(scale * ak[size_t(c)]);
        }
      }
    }
  });
}

}  // namespace vlm::cpu
