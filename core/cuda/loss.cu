// CUDA cross-entropy (core/ops/loss.inc): the full-vocabulary loss and the four
// vocab-parallel pieces. logits[N,V] (and dlogits) as the contract allows: f32, or bf16
// for the vocab-parallel pieces, read and written natively (cuda_util.cuh Act; every
// sum in f32); per-row vectors f32, targets[N] i32.
// One block per row for everything that scans a row (max and sum of exp as f32 block
// reductions); vocab_ce_loss is one thread per row. Rows whose target == ignore_index
// give loss 0 and gradient 0. A target outside [0,V) in the full-vocabulary ops cannot
// abort from a kernel: it yields a NaN loss and a NaN gradient row, which the training
// loop reports (the CPU backend asserts instead). dlogits is overwritten.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

// Block reductions over the row of V elements of x starting at element r0.
__device__ float row_max(const Act& x, int64_t r0, int64_t V) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) m = fmaxf(m, x.ld(r0 + c));
  return block_max(m);
}

__device__ float row_sumexp(const Act& x, int64_t r0, int64_t V, float mx) {
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) s += expf(x.ld(r0 + c) - mx);
  return block_sum(s);
}

__global__ void ce_forward_kernel(float* losses, Act logits, const int32_t* targets, int64_t V,
                                  int ignore_index) {
  const int64_t n = blockIdx.x;
  const int t = targets[n];
  if (t == ignore_index) {  // uniform over the block
    if (threadIdx.x == 0) losses[n] = 0.f;
    return;
  }
  const int64_t r0 = n * V;
  const float mx = row_max(logits, r0, V);
  const float se = row_sumexp(logits, r0, V, mx);
  if (threadIdx.x == 0) losses[n] = (t >= 0 && t < V) ? logf(se) + mx - logits.ld(r0 + t) : NAN;
}

// dlogits[n,c] = (exp(x - mx) / se - [c == tc]) * g, or 0 for an ignored row. mx/se come
// from the row itself (full vocabulary) or from the caller (vocab-parallel).
// Row r0.. of V elements; each thread reads x[c] before it writes dx[c], so dx may be x.
__device__ void ce_grad_row(Act dx, Act x, int64_t r0, int64_t V, float mx, float inv_se, int64_t tc, float g) {
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
    dx.st(r0 + c, (expf(x.ld(r0 + c) - mx) * inv_se - (c == tc ? 1.f : 0.f)) * g);
}

__global__ void ce_backward_kernel(Act dlogits, Act logits, const int32_t* targets, const float* dlosses, int64_t V,
                                   int ignore_index) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const int t = targets[n];
  if (t == ignore_index) {
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) dlogits.st(r0 + c, 0.f);
    return;
  }
  const float mx = row_max(logits, r0, V);
  const float se = row_sumexp(logits, r0, V, mx);  // the block's reductions end before any write
  const float g = (t >= 0 && t < V) ? dlosses[n] : NAN;
  ce_grad_row(dlogits, logits, r0, V, mx, 1.f / se, t, g);
}

__global__ void rowmax_kernel(float* rowmax, Act logits, int64_t V) {
  const float m = row_max(logits, int64_t(blockIdx.x) * V, V);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

__global__ void sumexp_kernel(float* sumexp, float* target_logit, Act logits, const float* rowmax,
                              const int32_t* targets, int64_t V, int64_t offset) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const float se = row_sumexp(logits, r0, V, rowmax[n]);
  if (threadIdx.x == 0) {
    sumexp[n] = se;
    const int64_t c = int64_t(targets[n]) - offset;
    target_logit[n] = (c >= 0 && c < V) ? logits.ld(r0 + c) : 0.f;
  }
}

__global__ void vocab_loss_kernel(float* losses, const float* rowmax, const float* sumexp,
                                  const float* target_logit, const int32_t* targets, int64_t N, int ignore_index) {
  VLM_GRID_STRIDE(n, N) {
    losses[n] = targets[n] == ignore_index ? 0.f : logf(sumexp[n]) + rowmax[n] - target_logit[n];
  }
}

__global__ void vocab_backward_kernel(Act dlogits, Act logits, const float* rowmax, const float* sumexp,
                                      const int32_t* targets, const float* dlosses, int64_t V, int64_t offset,
                                      int ignore_index) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const int t = targets[n];
  if (t == ignore_index) {
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) dlogits.st(r0 + c, 0.f);
    return;
  }
  ce_grad_row(dlogits, logits, r0, V, rowmax[n], 1.f / sumexp[n], int64_t(t) - offset, dlosses[n]);
}

}  // namespace

void cross_entropy_forward(Stream& s, const Tensor& losses, const Tensor& logits, const Tensor& targets,
                           int ignore_index) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  ce_forward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(losses), act(logits), i32p(targets), V,
                                                                   ignore_index);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(Stream& s, const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                            const Tensor& dlosses, int ignore_index) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0 || V == 0) return;
  ce_backward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(act(dlogits), act(logits), i32p(targets),
                                                                    f32p(dlosses), V, ignore_index);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_rowmax(Stream& s, const Tensor& rowmax, const Tensor& logits) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  rowmax_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(rowmax), act(logits), V);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_sumexp(Stream& s, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                     const Tensor& rowmax, const Tensor& targets, int64_t vocab_offset) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  sumexp_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(sumexp), f32p(target_logit), act(logits),
                                                               f32p(rowmax), i32p(targets), V, vocab_offset);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_loss(Stream& s, const Tensor& losses, const Tensor& rowmax, const Tensor& sumexp,
                   const Tensor& target_logit, const Tensor& targets, int ignore_index) {
  const int64_t N = targets.numel();
  if (N == 0) return;
  vocab_loss_kernel<<<grid_1d(N), kThreads, 0, stream_of(s)>>>(f32p(losses), f32p(rowmax), f32p(sumexp),
                                                                f32p(target_logit), i32p(targets), N, ignore_index);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_backward(Stream& s, const Tensor& dlogits, const Tensor& logits, const Tensor& rowmax,
                       const Tensor& sumexp, const Tensor& targets, const Tensor& dlosses, int64_t vocab_offset,
                       int ignore_index) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0 || V == 0) return;
  vocab_backward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(act(dlogits), act(logits), f32p(rowmax),
                                                                       f32p(sumexp), i32p(targets), f32p(dlosses),
                                                                       V, vocab_offset, ignore_index);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda
