// CUDA cross-entropy (core/ops/loss.inc): the full-vocabulary loss and the four
// vocab-parallel pieces. logits[N,V] (and dlogits) as the contract allows: f32, or bf16
// for the vocab-parallel pieces, read and written natively (cuda_util.cuh Act; every
// sum in f32); per-row vectors f32, targets[N] i32.
// One block per row for everything that scans a row (max and sum of exp as f32 block
// reductions; four elements per access where V and the operands allow, rows_by_four);
// vocab_ce_loss is one thread per row. Rows whose target == ignore_index
// give loss 0 and gradient 0. A target outside [0,V) in the full-vocabulary ops cannot
// abort from a kernel: it yields a NaN loss and a NaN gradient row, which the training
// loop reports (the CPU backend asserts instead). dlogits is overwritten.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

// Block reductions over the row of V elements of x starting at element r0; thread t
// takes elements W t + k (k < W) of each stretch of W x blockDim.x (W = 4: V and r0
// multiples of 4, x 16-byte aligned).
template <int W>
__device__ float row_max(const Act& x, int64_t r0, int64_t V) {
  float m = -INFINITY;
  for (int64_t c = W * int64_t(threadIdx.x); c < V; c += W * int64_t(blockDim.x)) {
    const Lanes<W> l = load<W>(x, r0 + c);
#pragma unroll
    for (int k = 0; k < W; ++k) m = fmaxf(m, l.v[k]);
  }
  return block_max(m);
}

template <int W>
__device__ float row_sumexp(const Act& x, int64_t r0, int64_t V, float mx) {
  float s = 0.f;
  for (int64_t c = W * int64_t(threadIdx.x); c < V; c += W * int64_t(blockDim.x)) {
    const Lanes<W> l = load<W>(x, r0 + c);
#pragma unroll
    for (int k = 0; k < W; ++k) s += expf(l.v[k] - mx);
  }
  return block_sum(s);
}

template <int W>
__global__ void ce_forward_kernel(float* losses, Act logits, const int32_t* targets, int64_t V,
                                  int ignore_index) {
  const int64_t n = blockIdx.x;
  const int t = targets[n];
  if (t == ignore_index) {  // uniform over the block
    if (threadIdx.x == 0) losses[n] = 0.f;
    return;
  }
  const int64_t r0 = n * V;
  const float mx = row_max<W>(logits, r0, V);
  const float se = row_sumexp<W>(logits, r0, V, mx);
  if (threadIdx.x == 0) losses[n] = (t >= 0 && t < V) ? logf(se) + mx - logits.ld(r0 + t) : NAN;
}

// dlogits[n,c] = (exp(x - mx) / se - [c == tc]) * g, or 0 for an ignored row. mx/se come
// from the row itself (full vocabulary) or from the caller (vocab-parallel).
// Row r0.. of V elements, W at a time as row_max; each thread reads x[c] before it writes
// dx[c], so dx may be x.
template <int W>
__device__ void ce_grad_row(Act dx, Act x, int64_t r0, int64_t V, float mx, float inv_se, int64_t tc, float g) {
  for (int64_t c = W * int64_t(threadIdx.x); c < V; c += W * int64_t(blockDim.x)) {
    Lanes<W> l = load<W>(x, r0 + c);
#pragma unroll
    for (int k = 0; k < W; ++k) l.v[k] = (expf(l.v[k] - mx) * inv_se - (c + k == tc ? 1.f : 0.f)) * g;
    store<W>(dx, r0 + c, l);
  }
}

// dx's row r0.. of V elements set to 0.
template <int W>
__device__ void zero_row(Act dx, int64_t r0, int64_t V) {
  Lanes<W> z{};
  for (int64_t c = W * int64_t(threadIdx.x); c < V; c += W * int64_t(blockDim.x)) store<W>(dx, r0 + c, z);
}

template <int W>
__global__ void ce_backward_kernel(Act dlogits, Act logits, const int32_t* targets, const float* dlosses, int64_t V,
                                   int ignore_index) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const int t = targets[n];
  if (t == ignore_index) return zero_row<W>(dlogits, r0, V);
  const float mx = row_max<W>(logits, r0, V);
  const float se = row_sumexp<W>(logits, r0, V, mx);  // the block's reductions end before any write
  const float g = (t >= 0 && t < V) ? dlosses[n] : NAN;
  ce_grad_row<W>(dlogits, logits, r0, V, mx, 1.f / se, t, g);
}

template <int W>
__global__ void rowmax_kernel(float* rowmax, Act logits, int64_t V) {
  const float m = row_max<W>(logits, int64_t(blockIdx.x) * V, V);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

template <int W>
__global__ void sumexp_kernel(float* sumexp, float* target_logit, Act logits, const float* rowmax,
                              const int32_t* targets, int64_t V, int64_t offset) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const float se = row_sumexp<W>(logits, r0, V, rowmax[n]);
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

template <int W>
__global__ void vocab_backward_kernel(Act dlogits, Act logits, const float* rowmax, const float* sumexp,
                                      const int32_t* targets, const float* dlosses, int64_t V, int64_t offset,
                                      int ignore_index) {
  const int64_t n = blockIdx.x, r0 = n * V;
  const int t = targets[n];
  if (t == ignore_index) return zero_row<W>(dlogits, r0, V);
  ce_grad_row<W>(dlogits, logits, r0, V, rowmax[n], 1.f / sumexp[n], int64_t(t) - offset, dlosses[n]);
}

}  // namespace

void cross_entropy_forward(Stream& s, const Tensor& losses, const Tensor& logits, const Tensor& targets,
                           int ignore_index) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  auto kernel = rows_by_four(V, {act(logits)}) ? ce_forward_kernel<4> : ce_forward_kernel<1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(losses), act(logits), i32p(targets), V, ignore_index);
  CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(Stream& s, const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                            const Tensor& dlosses, int ignore_index) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0 || V == 0) return;
  auto kernel = rows_by_four(V, {act(dlogits), act(logits)}) ? ce_backward_kernel<4> : ce_backward_kernel<1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(act(dlogits), act(logits), i32p(targets), f32p(dlosses), V,
                                                        ignore_index);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_rowmax(Stream& s, const Tensor& rowmax, const Tensor& logits) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  auto kernel = rows_by_four(V, {act(logits)}) ? rowmax_kernel<4> : rowmax_kernel<1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(rowmax), act(logits), V);
  CUDA_CHECK_LAUNCH();
}

void vocab_ce_sumexp(Stream& s, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                     const Tensor& rowmax, const Tensor& targets, int64_t vocab_offset) {
  const int64_t N = logits.rows(), V = logits.cols();
  if (N == 0) return;
  auto kernel = rows_by_four(V, {act(logits)}) ? sumexp_kernel<4> : sumexp_kernel<1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(sumexp), f32p(target_logit), act(logits), f32p(rowmax),
                                                        i32p(targets), V, vocab_offset);
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
  auto kernel = rows_by_four(V, {act(dlogits), act(logits)}) ? vocab_backward_kernel<4> : vocab_backward_kernel<1>;
  kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(act(dlogits), act(logits), f32p(rowmax), f32p(sumexp),
                                                        i32p(targets), f32p(dlosses), V, vocab_offset, ignore_index);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda
