// CUDA layernorm and rmsnorm over the last dimension C of in[N,C] (core/ops/norm.inc), f32.
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

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

// kLayer: layernorm (mean subtracted, bias b when not null) or rmsnorm.
template <bool kLayer>
__global__ void norm_forward_kernel(float* out, float* mean, float* rstd, const float* in, const float* w,
                                    const float* b, float eps, int64_t C) {
  const int64_t row = blockIdx.x;
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

template <bool kLayer>
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
    dx[i] = rs * (g - mg - xh * mgx);
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

}  // namespace

void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& w, const Tensor& b, float eps) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  const float* bias = b.defined() ? f32p(b) : nullptr;
  norm_forward_kernel<true><<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(out), f32p(mean), f32p(rstd),
                                                                          f32p(in), f32p(w), bias, eps, C);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  cudaStream_t st = stream_of(s);
  if (dw.defined())
    launch_params(st, f32p(dw), db.defined() ? f32p(db) : nullptr, f32p(dout), f32p(in), f32p(mean), f32p(rstd), N, C);
  norm_backward_din_kernel<true><<<unsigned(N), kRowThreads, 0, st>>>(f32p(din), f32p(dout), f32p(in), f32p(w),
                                                                     f32p(mean), f32p(rstd), C);
  CUDA_CHECK_LAUNCH();
}

void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w,
                     float eps) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  norm_forward_kernel<false><<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(out), nullptr, f32p(rstd),
                                                                           f32p(in), f32p(w), nullptr, eps, C);
  CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in,
                      const Tensor& w, const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  cudaStream_t st = stream_of(s);
  if (dw.defined()) launch_params(st, f32p(dw), nullptr, f32p(dout), f32p(in), nullptr, f32p(rstd), N, C);
  norm_backward_din_kernel<false><<<unsigned(N), kRowThreads, 0, st>>>(f32p(din), f32p(dout), f32p(in), f32p(w),
                                                                      nullptr, f32p(rstd), C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda
