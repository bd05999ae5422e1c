// CUDA layernorm and rmsnorm over the last dimension C of in[N,C] (core/ops/norm.inc), on
// f32 or bf16 activations (cuda_util.cuh Act; weights, statistics and parameter gradients
// f32, arithmetic f32), and their fused forms with the residual add (add_*norm_*:
// docs/ops.md, "Fused ops").
//  - forward: one block per row (four elements per access where C and the operands
//    allow); block reductions in f32; mean/rstd [N] saved; the layernorm bias may be
//    undefined (none added); the layernorm variance is two-pass (sum of (x - mean)^2),
//    so it never goes negative.
//  - backward, per row:  xhat = (x - mean) * rstd (mean = 0 for rmsnorm), g = dout * w,
//      layernorm: din = rstd * (g - mean(g) - xhat * mean(g * xhat))
//      rmsnorm:   din = rstd * (g - xhat * mean(g * xhat))
//    dw (+= sum_n dout * xhat) and db (+= sum_n dout) come from two column kernels with
//    a fixed summation order (deterministic, no atomics; partial sums in the stream's
//    scratch). They run before the din kernel, so even a din aliasing dout would be
//    correct.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

// The row kernels: one block per row; thread t owns elements W t + k (k < W) of each
// stretch of W x blockDim.x (W = 4 when C and the operands allow 16-byte accesses).
// kLayer: layernorm (mean subtracted, bias b when not null) or rmsnorm.
// ra, rb (not null): the fused residual add, in[row] = ra[row] + rb[row] first (in may
// be ra or rb: each thread reads and writes its own elements).
// A thread reads back only the elements it wrote (the same stride), so a bf16 sum is
// read as rounded, as the CPU reads it.
template <bool kLayer, int W>
__global__ void norm_forward_kernel(Act out, float* mean, float* rstd, Act in, const float* w, const float* b,
                                    float eps, int64_t C, Act ra, Act rb) {
  const int64_t row = blockIdx.x, at = row * C, first = int64_t(W) * threadIdx.x, stride = int64_t(W) * blockDim.x;
  if (ra)
    for (int64_t i = first; i < C; i += stride) {
      Lanes<W> x = load<W>(ra, at + i);
      const Lanes<W> y = load<W>(rb, at + i);
#pragma unroll
      for (int k = 0; k < W; ++k) x.v[k] += y.v[k];
      store<W>(in, at + i, x);
    }
  float mu = 0.f;
  if (kLayer) {
    float s = 0.f;
    for (int64_t i = first; i < C; i += stride) {
      const Lanes<W> x = load<W>(in, at + i);
#pragma unroll
      for (int k = 0; k < W; ++k) s += x.v[k];
    }
    mu = block_sum(s) / float(C);
  }
  float ss = 0.f;
  for (int64_t i = first; i < C; i += stride) {
    const Lanes<W> x = load<W>(in, at + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float d = x.v[k] - mu;
      ss += d * d;
    }
  }
  const float rs = 1.f / sqrtf(block_sum(ss) / float(C) + eps);
  for (int64_t i = first; i < C; i += stride) {
    Lanes<W> x = load<W>(in, at + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float v = (x.v[k] - mu) * rs * w[i + k];
      x.v[k] = b ? v + b[i + k] : v;  // b: layernorm's bias, null for rmsnorm or no bias
    }
    store<W>(out, at + i, x);
  }
  if (threadIdx.x == 0) {
    if (kLayer) mean[row] = mu;
    rstd[row] = rs;
  }
}

// kAdd: din += the input gradient (the fused residual form), else din =.
template <bool kLayer, bool kAdd, int W>
__global__ void norm_backward_din_kernel(Act din, Act dout, Act in, const float* w, const float* mean,
                                         const float* rstd, int64_t C) {
  const int64_t row = blockIdx.x, at = row * C, first = int64_t(W) * threadIdx.x, stride = int64_t(W) * blockDim.x;
  const float mu = kLayer ? mean[row] : 0.f, rs = rstd[row];
  float sg = 0.f, sgx = 0.f;
  for (int64_t i = first; i < C; i += stride) {
    const Lanes<W> d = load<W>(dout, at + i), x = load<W>(in, at + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float g = d.v[k] * w[i + k], xh = (x.v[k] - mu) * rs;
      sg += g;
      sgx += g * xh;
    }
  }
  const float mg = kLayer ? block_sum(sg) / float(C) : 0.f;
  const float mgx = block_sum(sgx) / float(C);
  for (int64_t i = first; i < C; i += stride) {
    const Lanes<W> d = load<W>(dout, at + i), x = load<W>(in, at + i);
    Lanes<W> r;
    if (kAdd) r = load<W>(din, at + i);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float g = d.v[k] * w[i + k], xh = (x.v[k] - mu) * rs;
      const float v = rs * (g - mg - xh * mgx);
      r.v[k] = kAdd ? r.v[k] + v : v;
    }
    store<W>(din, at + i, r);
  }
}

// dw[c] += sum_n dout[n,c] * xhat[n,c]; db[c] += sum_n dout[n,c] (db may be null), in
// two passes whose order depends only on the shape (deterministic, no atomics):
//  1. block (x, y): 32 columns, the rows of chunk y (16 row lanes, each in row order,
//     then the lanes in order) -> part[y][c] (dw's) and part[chunks + y][c] (db's);
//  2. one thread per column: the chunks' parts in order, added to dw[c] and db[c].
// Chunks of at least kParamRows rows, at most kParamChunks of them: the columns alone
// (C / 32 blocks, 64 at C = 2048) would leave most of a GPU idle.
constexpr int64_t kParamRows = 128, kParamChunks = 64;

__global__ void norm_params_part_kernel(float* part, Act dout, Act in, const float* mean, const float* rstd,
                                        int64_t rows, int64_t C, int64_t chunk_rows) {
  __shared__ float pw[16][33], pb[16][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x, chunks = gridDim.y;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows, r1 = std::min(rows, r0 + chunk_rows);
  float aw = 0.f, ab = 0.f;
  if (col < C) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 16) {
      const float g = dout.ld(r * C + col);
      const float xh = (in.ld(r * C + col) - (mean ? mean[r] : 0.f)) * rstd[r];
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
    part[int64_t(blockIdx.y) * C + col] = sw;
    part[(chunks + blockIdx.y) * C + col] = sb;
  }
}

__global__ void norm_params_sum_kernel(float* dw, float* db, const float* part, int64_t C, int64_t chunks) {
  VLM_GRID_STRIDE(col, C) {
    float sw = 0.f, sb = 0.f;
    for (int64_t y = 0; y < chunks; ++y) {
      sw += part[y * C + col];
      sb += part[(chunks + y) * C + col];
    }
    dw[col] += sw;
    if (db) db[col] += sb;
  }
}

void launch_params(CudaStream& cs, float* dw, float* db, Act dout, Act in, const float* mean, const float* rstd,
                   int64_t rows, int64_t C) {
  const int64_t chunk_rows = std::max(kParamRows, (rows + kParamChunks - 1) / kParamChunks);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  VLM_ASSERT((C + 31) / 32 < (int64_t(1) << 31), "norm backward: ", C, " columns are beyond one launch");
  auto* part = static_cast<float*>(cs.scratch(size_t(2 * chunks * C) * sizeof(float)));
  norm_params_part_kernel<<<dim3(unsigned((C + 31) / 32), unsigned(chunks)), dim3(32, 16), 0, cs.handle()>>>(
      part, dout, in, mean, rstd, rows, C, chunk_rows);
  CUDA_CHECK_LAUNCH();
  norm_params_sum_kernel<<<grid_1d(C), kThreads, 0, cs.handle()>>>(dw, db, part, C, chunks);
  CUDA_CHECK_LAUNCH();
}

template <bool kLayer>
void launch_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                    const Tensor& w, const Tensor& b, float eps, const Tensor& ra, const Tensor& rb) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  auto kernel = rows_by_four(C, {act(out), act(in), act(ra), act(rb)}) ? norm_forward_kernel<kLayer, 4>
                                                                      : norm_forward_kernel<kLayer, 1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(act(out), kLayer ? f32p(mean) : nullptr, f32p(rstd), act(in),
                                                        f32p(w), b.defined() ? f32p(b) : nullptr, eps, C, act(ra),
                                                        act(rb));
  CUDA_CHECK_LAUNCH();
}

template <bool kLayer, bool kAdd>
void launch_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                     const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  CudaStream& cs = cuda_stream(s);
  const float* mu = kLayer ? f32p(mean) : nullptr;
  if (dw.defined())
    launch_params(cs, f32p(dw), db.defined() ? f32p(db) : nullptr, act(dout), act(in), mu, f32p(rstd), N, C);
  auto kernel = rows_by_four(C, {act(din), act(dout), act(in)}) ? norm_backward_din_kernel<kLayer, kAdd, 4>
                                                                : norm_backward_din_kernel<kLayer, kAdd, 1>;
  kernel<<<unsigned(N), kRowThreads, 0, cs.handle()>>>(act(din), act(dout), act(in), f32p(w), mu, f32p(rstd), C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& w, const Tensor& b, float eps) {
  launch_forward<true>(s, out, mean, rstd, in, w, b, eps, Tensor{}, Tensor{});
}

void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  launch_backward<true, false>(s, din, dw, db, dout, in, w, mean, rstd);
}

void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w,
                     float eps) {
  launch_forward<false>(s, out, Tensor{}, rstd, in, w, Tensor{}, eps, Tensor{}, Tensor{});
}

void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in,
                      const Tensor& w, const Tensor& rstd) {
  launch_backward<false, false>(s, din, dw, Tensor{}, dout, in, w, Tensor{}, rstd);
}

// The fused forms: the norm reads the sum as stored (rounded, in bf16), as on the CPU.
void add_layernorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                           const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias, float eps) {
  launch_forward<true>(s, out, mean, rstd, sum, w, bias, eps, a, b);
}

void add_rmsnorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a,
                         const Tensor& b, const Tensor& w, float eps) {
  launch_forward<false>(s, out, Tensor{}, rstd, sum, w, Tensor{}, eps, a, b);
}

void add_layernorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& db, const Tensor& dout,
                            const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  launch_backward<true, true>(s, dsum, dw, db, dout, in, w, mean, rstd);
}

void add_rmsnorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& dout, const Tensor& in,
                          const Tensor& w, const Tensor& rstd) {
  launch_backward<false, true>(s, dsum, dw, Tensor{}, dout, in, w, Tensor{}, rstd);
}

}  // namespace vlm::cuda
