// CPU 2-D convolution and average pooling, NCHW (core/ops/conv.inc).
// conv2d: per chunk of n samples (n*K*P bounded by kConvColumns), im2col into
// col[K = Cin*KH*KW, n*P] (P = Ho*Wo, zero padding; sample j in columns j*P..), then one
// GEMM g[Cout, n*P] = w[Cout,K] @ col, scattered to out[b, Cout, P] (+ bias). Backward:
// dout gathered into g the same way, dbias += row sums of g, dw += g @ col^T (one GEMM
// per chunk, chunks in order), dcol = w^T @ g scattered back by col2im per sample
// (parallel over input channels, each writing only its own plane: deterministic). The
// chunking depends only on the shapes, so the result does not depend on the threads.
// din is overwritten; din, dw, bias and dbias are skipped when undefined.
// avgpool2d: k x k windows with a stride, no padding; backward spreads dout/(k*k) over
// each window (parallel over (b, c) planes; overlapping windows add in a fixed order).
// col and g are one per-thread scratch buffer, kept between calls.
// maps_to_rows / rows_to_maps: a permutation, parallel over the images.
#include <algorithm>

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

struct ConvDims {
  int64_t B, Cin, H, W, Cout, KH, KW, Ho, Wo, K, P;
};

ConvDims conv_dims(const Tensor& in, const Tensor& w, int stride, int pad) {
  ConvDims d{};
  d.B = in.size(0), d.Cin = in.size(1), d.H = in.size(2), d.W = in.size(3);
  d.Cout = w.size(0), d.KH = w.size(2), d.KW = w.size(3);
  d.Ho = (d.H + 2 * pad - d.KH) / stride + 1;
  d.Wo = (d.W + 2 * pad - d.KW) / stride + 1;
  d.K = d.Cin * d.KH * d.KW;
  d.P = d.Ho * d.Wo;
  return d;
}

// Samples per chunk: at most this many elements of col (or of g) per chunk (16 MiB of f32).
constexpr int64_t kConvColumns = int64_t(1) << 22;

int64_t chunk_samples(const ConvDims& d) {
  return std::clamp<int64_t>(kConvColumns / std::max<int64_t>(1, std::max(d.K, d.Cout) * d.P), 1, d.B);
}

// col[(ci*KH+kh)*KW+kw, oy*Wo+ox] = in[ci, oy*stride-pad+kh, ox*stride-pad+kw] (0 outside);
// col's rows are ld apart (ld >= P: several samples side by side).
template <typename T>
void im2col(const ConvDims& d, const T* in, T* col, int64_t ld, int stride, int pad) {
  parallel_for(d.K, row_grain(d.P, kGrainStream), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ci = r / (d.KH * d.KW), kh = (r / d.KW) % d.KH, kw = r % d.KW;
      for (int64_t oy = 0; oy < d.Ho; ++oy) {
        const int64_t y = oy * stride - pad + kh;
        for (int64_t ox = 0; ox < d.Wo; ++ox) {
          const int64_t x = ox * stride - pad + kw;
          const bool inside = y >= 0 && y < d.H && x >= 0 && x < d.W;
          col[r * ld + oy * d.Wo + ox] = inside ? in[(ci * d.H + y) * d.W + x] : T(0);
        }
      }
    }
  });
}

// din[ci] = sum over the col rows of channel ci (overwrite); col's rows are ld apart.
template <typename T>
void col2im(const ConvDims& d, const T* col, int64_t ld, T* din, int stride, int pad) {
  parallel_for(d.Cin, row_grain(d.KH * d.KW * d.P, kGrainStream), [&](int64_t c0, int64_t c1) {
    for (int64_t ci = c0; ci < c1; ++ci) {
      T* plane = din + ci * d.H * d.W;
      std::fill(plane, plane + d.H * d.W, T(0));
      for (int64_t kh = 0; kh < d.KH; ++kh)
        for (int64_t kw = 0; kw < d.KW; ++kw) {
          const T* cr = col + ((ci * d.KH + kh) * d.KW + kw) * ld;
          for (int64_t oy = 0; oy < d.Ho; ++oy) {
            const int64_t y = oy * stride - pad + kh;
            if (y < 0 || y >= d.H) continue;
            for (int64_t ox = 0; ox < d.Wo; ++ox) {
              const int64_t x = ox * stride - pad + kw;
              if (x >= 0 && x < d.W) plane[y * d.W + x] += cr[oy * d.Wo + ox];
            }
          }
        }
    }
  });
}

}  // namespace

void conv2d_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& w,
                    const Tensor& bias, int stride, int pad) {
  const char* op = "conv2d_forward";
  const ConvDims d = conv_dims(in, w, stride, pad);
  if (d.B == 0 || d.Cout == 0 || d.P == 0) return;
  dispatch_float(in.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n_max = chunk_samples(d);
    T* col = thread_scratch<T>(0, (d.K + d.Cout) * n_max * d.P);
    T* g = col + d.K * n_max * d.P;
    const T *pi = in.ptr<T>(), *pw = w.ptr<T>(), *pb = bias.defined() ? bias.ptr<T>() : nullptr;
    T* po = out.ptr<T>();
    for (int64_t b0 = 0; b0 < d.B; b0 += n_max) {
      const int64_t n = std::min(n_max, d.B - b0), ld = n * d.P;
      for (int64_t j = 0; j < n; ++j) im2col(d, pi + (b0 + j) * d.Cin * d.H * d.W, col + j * d.P, ld, stride, pad);
      if (d.K > 0)
        blas_gemm(false, false, d.Cout, ld, d.K, 1.0, pw, col, 0.0, g);
      else
        std::fill(g, g + d.Cout * ld, T(0));
      parallel_for(n * d.Cout, row_grain(d.P, kGrainStream), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {  // r = j * Cout + co
          const int64_t j = r / d.Cout, co = r % d.Cout;
          const T* src = g + co * ld + j * d.P;
          T* dst = po + ((b0 + j) * d.Cout + co) * d.P;
          const T bv = pb ? pb[co] : T(0);
          for (int64_t p = 0; p < d.P; ++p) dst[p] = src[p] + bv;
        }
      });
    }
  });
}

void conv2d_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dbias,
                     const Tensor& dout, const Tensor& in, const Tensor& w, int stride, int pad) {
  const char* op = "conv2d_backward";
  const ConvDims d = conv_dims(in, w, stride, pad);
  if (d.B == 0 || d.Cout == 0 || d.P == 0) return;
  dispatch_float(in.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n_max = chunk_samples(d);
    T* col = thread_scratch<T>(0, (d.K + d.Cout) * n_max * d.P);
    T* g = col + d.K * n_max * d.P;
    const T *pi = in.ptr<T>(), *pw = w.ptr<T>(), *pg = dout.ptr<T>();
    for (int64_t b0 = 0; b0 < d.B; b0 += n_max) {
      const int64_t n = std::min(n_max, d.B - b0), ld = n * d.P;
      parallel_for(d.Cout, row_grain(n * d.P, kGrainStream), [&](int64_t c0, int64_t c1) {
        for (int64_t co = c0; co < c1; ++co)  // g[co, j*P + p] = dout[b0 + j, co, p]
          for (int64_t j = 0; j < n; ++j)
            std::copy_n(pg + ((b0 + j) * d.Cout + co) * d.P, d.P, g + co * ld + j * d.P);
      });
      if (dbias.defined()) {
        T* db = dbias.ptr<T>();
        parallel_for(d.Cout, row_grain(ld, kGrainStream), [&](int64_t c0, int64_t c1) {
          for (int64_t co = c0; co < c1; ++co) {
            double acc = 0;
            for (int64_t q = 0; q < ld; ++q) acc += double(g[co * ld + q]);
            db[co] += T(acc);
          }
        });
      }
      if (d.K == 0) continue;
      if (dw.defined()) {
        for (int64_t j = 0; j < n; ++j) im2col(d, pi + (b0 + j) * d.Cin * d.H * d.W, col + j * d.P, ld, stride, pad);
        blas_gemm(false, true, d.Cout, d.K, ld, 1.0, g, col, 1.0, dw.ptr<T>());
      }
      if (din.defined()) {
        blas_gemm(true, false, d.K, ld, d.Cout, 1.0, pw, g, 0.0, col);
        for (int64_t j = 0; j < n; ++j) col2im(d, col + j * d.P, ld, din.ptr<T>() + (b0 + j) * d.Cin * d.H * d.W, stride, pad);
      }
    }
  });
}

void avgpool2d_forward(Stream& s, const Tensor& out, const Tensor& in, int k, int stride) {
  const char* op = "avgpool2d_forward";
  const int64_t BC = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = (H - k) / stride + 1, Wo = (W - k) / stride + 1;
  dispatch_float(in.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pi = in.ptr<T>();
    T* po = out.ptr<T>();
    const double inv = 1.0 / double(k * k);
    parallel_for(BC, row_grain(H * W, kGrainStream), [&](int64_t p0, int64_t p1) {
      for (int64_t pc = p0; pc < p1; ++pc)
        for (int64_t oy = 0; oy < Ho; ++oy)
          for (int64_t ox = 0; ox < Wo; ++ox) {
            double acc = 0;
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) acc += double(pi[(pc * H + oy * stride + i) * W + ox * stride + j]);
            po[(pc * Ho + oy) * Wo + ox] = T(acc * inv);
          }
    });
  });
}

void avgpool2d_backward(Stream& s, const Tensor& din, const Tensor& dout, int k, int stride) {
  const char* op = "avgpool2d_backward";
  const int64_t BC = din.size(0) * din.size(1), H = din.size(2), W = din.size(3);
  const int64_t Ho = (H - k) / stride + 1, Wo = (W - k) / stride + 1;
  dispatch_float(din.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pg = dout.ptr<T>();
    T* pd = din.ptr<T>();
    const T inv = T(1.0 / double(k * k));
    parallel_for(BC, row_grain(H * W, kGrainStream), [&](int64_t p0, int64_t p1) {
      for (int64_t pc = p0; pc < p1; ++pc) {
        T* plane = pd + pc * H * W;
        std::fill(plane, plane + H * W, T(0));
        for (int64_t oy = 0; oy < Ho; ++oy)
          for (int64_t ox = 0; ox < Wo; ++ox) {
            const T g = pg[(pc * Ho + oy) * Wo + ox] * inv;
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) plane[(oy * stride + i) * W + ox * stride + j] += g;
          }
      }
    });
  });
}

namespace {

// to_rows: rows[b*HW + p, c] = maps[(b*C + c)*HW + p]; else the reverse assignment.
template <typename T>
void permute_maps(const Tensor& rows, const Tensor& maps, bool to_rows) {
  const int64_t B = maps.size(0), C = maps.size(1), HW = maps.size(2) * maps.size(3);
  T* pr = rows.ptr<T>();
  T* pm = maps.ptr<T>();
  parallel_for(B, row_grain(C * HW, kGrainStream), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t p = 0; p < HW; ++p) {
          T& r = pr[(b * HW + p) * C + c];
          T& m = pm[(b * C + c) * HW + p];
          if (to_rows)
            r = m;
          else
            m = r;
        }
  });
}

}  // namespace

void maps_to_rows(Stream& s, const Tensor& rows, const Tensor& maps) {
  dispatch_float(maps.dtype(), "maps_to_rows", [&](auto tag) { permute_maps<decltype(tag)>(rows, maps, true); });
}

void rows_to_maps(Stream& s, const Tensor& maps, const Tensor& rows) {
  dispatch_float(maps.dtype(), "rows_to_maps", [&](auto tag) { permute_maps<decltype(tag)>(rows, maps, false); });
}

}  // namespace vlm::cpu
