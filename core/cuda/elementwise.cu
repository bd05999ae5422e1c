// CUDA elementwise helpers (core/ops/elementwise.inc, first part): fill, scale, add,
// accumulate, mul, convert, round_bf16, bias_add, slice_cols, unslice_cols, sum_squares.
// Every one but convert, round_bf16 and sum_squares takes f32 or bf16 operands
// (cuda_util.cuh Act: f32 arithmetic, one rounding per bf16 store); convert takes any pair
// of f32, bf16, f64. Grid-stride loops over int64
// element counts; each element is read and written by one thread, so every op whose
// declaration allows aliasing (out == a, out == in) is safe. sum_squares sums in the
// fixed order of its declaration (core/ops/elementwise.inc): one warp per chunk, the
// chunk sums (double) in the stream's scratch, then one warp over them; no atomics, so
// every run and the CPU give the same bits.
#include <type_traits>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void fill_kernel(Act x, float v, int64_t n) {
  VLM_GRID_STRIDE(i, n) x.st(i, v);
}
__global__ void scale_kernel(Act x, float a, int64_t n) {
  VLM_GRID_STRIDE(i, n) x.st(i, x.ld(i) * a);
}
__global__ void add_kernel(Act out, Act a, Act b, int64_t n) {
  VLM_GRID_STRIDE(i, n) out.st(i, a.ld(i) + b.ld(i));
}
__global__ void accumulate_kernel(Act y, Act x, float alpha, int64_t n) {
  VLM_GRID_STRIDE(i, n) y.st(i, y.ld(i) + alpha * x.ld(i));
}
__global__ void mul_kernel(Act out, Act a, Act b, int64_t n) {
  VLM_GRID_STRIDE(i, n) out.st(i, a.ld(i) * b.ld(i));
}
__global__ void bias_add_kernel(Act out, Act in, const float* bias, int64_t n, int64_t c) {
  VLM_GRID_STRIDE(i, n) out.st(i, in.ld(i) + bias[i % c]);
}
// dst[r, j] = src[r, off + j], j < w
__global__ void slice_cols_kernel(Act dst, Act src, int64_t n, int64_t w, int64_t W, int64_t off) {
  VLM_GRID_STRIDE(i, n) dst.st(i, src.ld((i / w) * W + off + i % w));
}
// dst[r, off + j] = src[r, j], j < w
__global__ void unslice_cols_kernel(Act dst, Act src, int64_t n, int64_t w, int64_t W, int64_t off) {
  VLM_GRID_STRIDE(i, n) dst.st((i / w) * W + off + i % w, src.ld(i));
}

__global__ void round_bf16_kernel(float* x, int64_t n) {
  VLM_GRID_STRIDE(i, n) x[i] = __bfloat162float(__float2bfloat16(x[i]));
}

// The xor butterfly of the 32 lanes (every lane ends with the same sum).
__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// part[ch] = the sum of squares of chunk ch: one warp per chunk, lane l adds elements
// l, l+32, ... (an f32 square is exact in double, so a fused multiply-add rounds alike).
__global__ void sum_squares_chunks_kernel(double* part, const float* x, int64_t n, int64_t nchunks) {
  const int64_t ch = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (ch >= nchunks) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const int64_t b = ch * kSumSquaresChunk, e = min(n, b + kSumSquaresChunk);
  double acc = 0;
  for (int64_t i = b + lane; i < e; i += 32) {
    const double v = x[i];
    acc += v * v;
  }
  acc = warp_sum_d(acc);
  if (lane == 0) part[ch] = acc;
}

// out[0] += the chunk sums, combined as the chunks' elements were (one warp).
__global__ void sum_squares_total_kernel(float* out, const double* part, int64_t nchunks) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < nchunks; i += 32) acc += part[i];
  acc = warp_sum_d(acc);
  if (threadIdx.x == 0) out[0] += float(acc);
}

// Conversions: f64 -> f64 is exact, everything else goes through f32 (bf16 rounds to
// nearest even, NaN stays NaN, as dtype.h's f32_to_bf16).
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(double v) { return float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename D, typename S>
__device__ __forceinline__ D convert_one(S v) {
  if constexpr (std::is_same_v<D, double> && std::is_same_v<S, double>) return v;
  else if constexpr (std::is_same_v<D, double>) return double(to_f32(v));
  else if constexpr (std::is_same_v<D, float>) return to_f32(v);
  else return __float2bfloat16(to_f32(v));
}
template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  VLM_GRID_STRIDE(i, n) dst[i] = convert_one<D>(src[i]);
}

template <typename D, typename S>
void launch_convert(cudaStream_t st, void* dst, const void* src, int64_t n) {
  convert_kernel<D, S><<<grid_1d(n), kThreads, 0, st>>>(static_cast<D*>(dst), static_cast<const S*>(src), n);
  CUDA_CHECK_LAUNCH();
}
template <typename D>
void launch_convert_from(cudaStream_t st, DType sd, void* dst, const void* src, int64_t n) {
  switch (sd) {
    case DType::F32: return launch_convert<D, float>(st, dst, src, n);
    case DType::BF16: return launch_convert<D, __nv_bfloat16>(st, dst, src, n);
    case DType::F64: return launch_convert<D, double>(st, dst, src, n);
    default: VLM_ASSERT(false, "convert: unsupported source dtype ", dtype_name(sd));
  }
}

}  // namespace

void fill(Stream& s, const Tensor& x, float value) {
  if (x.numel() == 0) return;
  fill_kernel<<<grid_1d(x.numel()), kThreads, 0, stream_of(s)>>>(act(x), value, x.numel());
  CUDA_CHECK_LAUNCH();
}

void scale(Stream& s, const Tensor& x, float alpha) {
  if (x.numel() == 0) return;
  scale_kernel<<<grid_1d(x.numel()), kThreads, 0, stream_of(s)>>>(act(x), alpha, x.numel());
  CUDA_CHECK_LAUNCH();
}

void add(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  add_kernel<<<grid_1d(out.numel()), kThreads, 0, stream_of(s)>>>(act(out), act(a), act(b), out.numel());
  CUDA_CHECK_LAUNCH();
}

void accumulate(Stream& s, const Tensor& y, const Tensor& x, float alpha) {
  if (y.numel() == 0) return;
  accumulate_kernel<<<grid_1d(y.numel()), kThreads, 0, stream_of(s)>>>(act(y), act(x), alpha, y.numel());
  CUDA_CHECK_LAUNCH();
}

void mul(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  mul_kernel<<<grid_1d(out.numel()), kThreads, 0, stream_of(s)>>>(act(out), act(a), act(b), out.numel());
  CUDA_CHECK_LAUNCH();
}

void convert(Stream& s, const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cudaStream_t st = stream_of(s);
  switch (dst.dtype()) {
    case DType::F32: return launch_convert_from<float>(st, src.dtype(), dst.data(), src.data(), n);
    case DType::BF16: return launch_convert_from<__nv_bfloat16>(st, src.dtype(), dst.data(), src.data(), n);
    case DType::F64: return launch_convert_from<double>(st, src.dtype(), dst.data(), src.data(), n);
    default: VLM_ASSERT(false, "convert: unsupported destination ", dst.str());
  }
}

void round_bf16(Stream& s, const Tensor& x) {
  if (x.numel() == 0) return;
  round_bf16_kernel<<<grid_1d(x.numel()), kThreads, 0, stream_of(s)>>>(f32p(x), x.numel());
  CUDA_CHECK_LAUNCH();
}

void bias_add(Stream& s, const Tensor& out, const Tensor& in, const Tensor& bias) {
  const int64_t c = in.cols();
  if (out.numel() == 0) return;
  bias_add_kernel<<<grid_1d(out.numel()), kThreads, 0, stream_of(s)>>>(act(out), act(in), f32p(bias), out.numel(), c);
  CUDA_CHECK_LAUNCH();
}

void slice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t w = dst.cols(), W = src.cols();
  if (dst.numel() == 0) return;
  slice_cols_kernel<<<grid_1d(dst.numel()), kThreads, 0, stream_of(s)>>>(act(dst), act(src), dst.numel(), w, W,
                                                                          offset);
  CUDA_CHECK_LAUNCH();
}

void unslice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t w = src.cols(), W = dst.cols();
  if (src.numel() == 0) return;
  unslice_cols_kernel<<<grid_1d(src.numel()), kThreads, 0, stream_of(s)>>>(act(dst), act(src), src.numel(), w, W,
                                                                            offset);
  CUDA_CHECK_LAUNCH();
}

void sum_squares(Stream& s, const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return;  // out += 0
  CudaStream& cs = cuda_stream(s);
  const int64_t nchunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
  auto* part = static_cast<double*>(cs.scratch(size_t(nchunks) * sizeof(double)));
  const int64_t warps = kThreads / 32;
  sum_squares_chunks_kernel<<<unsigned((nchunks + warps - 1) / warps), kThreads, 0, cs.handle()>>>(part, f32p(x), n,
                                                                                                   nchunks);
  CUDA_CHECK_LAUNCH();
  sum_squares_total_kernel<<<1, 32, 0, cs.handle()>>>(f32p(out), part, nchunks);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda
