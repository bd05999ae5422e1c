// CUDA layernorm and rmsnorm over the last dimension C of in[N,C] (core/ops/norm.inc), f32
// kernels (bf16 activations through f32 staging: core/cuda/stage.h), and their fused
// forms with the residual add (add_*norm_*: docs/ops.md, "Fused ops").
//  - forward: one block per row; block reductions in f32; mean/rstd [N] saved; the
//    layernorm bias may be undefined (none added).
//    layernorm variance is two-pass (sum of (x - mean)^2), so it never goes negative.
//  - backward, per row:  xhat = (x - mean) * rstd (mean = 0 for rmsnorm), g = dout * w,
//      layernorm: din = rstd * (g - mean(g) - xhat * mean(g * xhat))
//      rmsnorm:   din = rstd * (g - xhat * mean(g * xhat))
//    dw (+= sum_n dout * xhat) and db (+= sum_n dout) come from a column kernel with a
//    fixed summation order (deterministic, no atomics). It runs before the din kernel,
//    so even a din aliasing dout would be correct.
#include "core/cuda/cuda_util.cuh"
#include "core/cuda/stage.h"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

// kLayer: layernorm (mean subtracted, bias b when not null) or rmsnorm.
// ra, rb (not null): the fused residual add, in[row] = ra[row] + rb[row] first (in may
// be ra or rb: each thread reads and writes its own elements).
template <bool kLayer>
__global__ void norm_forward_kernel(float* out, float* mean, float* rstd, float* in, const float* w,
                                    const float* b, float eps, int64_t C, const float* ra, const float* rb) {
  const int64_t row = blockIdx.x;
  if (ra)
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) in[row * C + i] = ra[row * C + i] + rb[row * C + i];
  const float* x = in + row * C;
  float* y = out + row * C;
  float mu = 0.f;
  if (kLayer) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += x[i];
    mu = block_sum(s) / float(C);
  }
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float d = x[i] - mu;
    ss += d * d;
  }
  const float rs = 1.f / sqrtf(block_sum(ss) / float(C) + eps);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float v = (x[i] - mu) * rs * w[i];
    y[i] = b ? v + b[i] : v;  // b: layernorm's bias, null for rmsnorm or no bias
  }
  if (threadIdx.x == 0) {
    if (kLayer) mean[row] = mu;
    rstd[row] = rs;
  }
}

// kAdd: din += the input gradient (the fused residual form), else din =.
template <bool kLayer, bool kAdd>
__global__ void norm_backward_din_kernel(float* din, const float* dout, const float* in, const float* w,
                                         const float* mean, const float* rstd, int64_t C) {
  const int64_t row = blockIdx.x;
  const float* x = in + row * C;
  const float* dy = dout + row * C;
  const float mu = kLayer ? mean[row] : 0.f, rs = rstd[row];
  float sg = 0.f, sgx = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float g = dy[i] * w[i], xh = (x[i] - mu) * rs;
    sg += g;
    sgx += g * xh;
  }
  const float mg = kLayer ? block_sum(sg) / float(C) : 0.f;
  const float mgx = block_sum(sgx) / float(C);
  float* dx = din + row * C;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float g = dy[i] * w[i], xh = (x[i] - mu) * rs;
    const float v = rs * (g - mg - xh * mgx);
    dx[i] = kAdd ? dx[i] + v : v;
  }
}

// dw[c] += sum_n dout[n,c] * xhat[n,c]; db[c] += sum_n dout[n,c] (db may be null).
// One block per 32 columns, 16 row lanes.
__global__ void norm_backward_params_kernel(float* dw, float* db, const float* dout, const float* in,
                                            const float* mean, const float* rstd, int64_t rows, int64_t C) {
  __shared__ float pw[16][33], pb[16][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float aw = 0.f, ab = 0.f;
  if (col < C) {
    for (int64_t r = threadIdx.y; r < rows; r += 16) {
      const float g = dout[r * C + col];
      const float xh = (in[r * C + col] - (mean ? mean[r] : 0.f)) * rstd[r];
      aw += g * xh;
      ab += g;
    }
  }
  pw[threadIdx.y][threadIdx.x] = aw;
  pb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < C) {
    float sw = 0.f, sb = 0.f;
    for (int k = 0; k < 16; ++k) {
      sw += pw[k][threadIdx.x];
      sb += pb[k][threadIdx.x];
    }
    dw[col] += sw;
    if (db) db[col] += sb;
  }
}

void launch_params(cudaStream_t st, float* dw, float* db, const float* dout, const float* in, const float* mean,
                   const float* rstd, int64_t rows, int64_t C) {
  norm_backward_params_kernel<<<unsigned((C + 31) / 32), dim3(32, 16), 0, st>>>(dw, db, dout, in, mean, rstd,
                                                                                rows, C);
  CUDA_CHECK_LAUNCH();
}

template <bool kLayer>
void launch_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                    const Tensor& w, const Tensor& b, float eps, const Tensor& ra, const Tensor& rb) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  norm_forward_kernel<kLayer><<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(
      f32p(out), kLayer ? f32p(mean) : nullptr, f32p(rstd), f32p(in), f32p(w), b.defined() ? f32p(b) : nullptr, eps,
      C, ra.defined() ? f32p(ra) : nullptr, rb.defined() ? f32p(rb) : nullptr);
  CUDA_CHECK_LAUNCH();
}

template <bool kLayer, bool kAdd>
void launch_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                     const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  cudaStream_t st = stream_of(s);
  const float* mu = kLayer ? f32p(mean) : nullptr;
  if (dw.defined())
    launch_params(st, f32p(dw), db.defined() ? f32p(db) : nullptr, f32p(dout), f32p(in), mu, f32p(rstd), N, C);
  norm_backward_din_kernel<kLayer, kAdd><<<unsigned(N), kRowThreads, 0, st>>>(f32p(din), f32p(dout), f32p(in),
                                                                             f32p(w), mu, f32p(rstd), C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& w, const Tensor& b, float eps) {
  if (any_bf16({&out, &in}))
    return run_staged(s, {{&out, true}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_forward<true>(s, v[0], mean, rstd, v[1], w, b, eps, Tensor{}, Tensor{});
    });
  launch_forward<true>(s, out, mean, rstd, in, w, b, eps, Tensor{}, Tensor{});
}

void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  if (any_bf16({&din, &dout, &in}))
    return run_staged(s, {{&din, true}, {&dout, false}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_backward<true, false>(s, v[0], dw, db, v[1], v[2], w, mean, rstd);
    });
  launch_backward<true, false>(s, din, dw, db, dout, in, w, mean, rstd);
}

void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w,
                     float eps) {
  if (any_bf16({&out, &in}))
    return run_staged(s, {{&out, true}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_forward<false>(s, v[0], Tensor{}, rstd, v[1], w, Tensor{}, eps, Tensor{}, Tensor{});
    });
  launch_forward<false>(s, out, Tensor{}, rstd, in, w, Tensor{}, eps, Tensor{}, Tensor{});
}

void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in,
                      const Tensor& w, const Tensor& rstd) {
  if (any_bf16({&din, &dout, &in}))
    return run_staged(s, {{&din, true}, {&dout, false}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_backward<false, false>(s, v[0], dw, Tensor{}, v[1], v[2], w, Tensor{}, rstd);
    });
  launch_backward<false, false>(s, din, dw, Tensor{}, dout, in, w, Tensor{}, rstd);
}

// The fused forms. Staged, the sum is rounded back into its bf16 tensor after the norm
// has read the f32 sum: on the CPU the norm reads the rounded sum, so the two may differ
// by a bf16 rounding of the sum in the norm's output (within the conformance tolerance).
void add_layernorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                           const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias, float eps) {
  if (any_bf16({&sum, &out, &a, &b}))
    return run_staged(s, {{&sum, true}, {&out, true}, {&a, false}, {&b, false}}, [&](const std::vector<Tensor>& v) {
      launch_forward<true>(s, v[1], mean, rstd, v[0], w, bias, eps, v[2], v[3]);
    });
  launch_forward<true>(s, out, mean, rstd, sum, w, bias, eps, a, b);
}

void add_rmsnorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a,
                         const Tensor& b, const Tensor& w, float eps) {
  if (any_bf16({&sum, &out, &a, &b}))
    return run_staged(s, {{&sum, true}, {&out, true}, {&a, false}, {&b, false}}, [&](const std::vector<Tensor>& v) {
      launch_forward<false>(s, v[1], Tensor{}, rstd, v[0], w, Tensor{}, eps, v[2], v[3]);
    });
  launch_forward<false>(s, out, Tensor{}, rstd, sum, w, Tensor{}, eps, a, b);
}

void add_layernorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& db, const Tensor& dout,
                            const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  if (any_bf16({&dsum, &dout, &in}))
    return run_staged(s, {{&dsum, true}, {&dout, false}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_backward<true, true>(s, v[0], dw, db, v[1], v[2], w, mean, rstd);
    });
  launch_backward<true, true>(s, dsum, dw, db, dout, in, w, mean, rstd);
}

void add_rmsnorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& dout, const Tensor& in,
                          const Tensor& w, const Tensor& rstd) {
  if (any_bf16({&dsum, &dout, &in}))
    return run_staged(s, {{&dsum, true}, {&dout, false}, {&in, false}}, [&](const std::vector<Tensor>& v) {
      launch_backward<false, true>(s, v[0], dw, Tensor{}, v[1], v[2], w, Tensor{}, rstd);
    });
  launch_backward<false, true>(s, dsum, dw, Tensor{}, dout, in, w, Tensor{}, rstd);
}

}  // namespace vlm::cuda
