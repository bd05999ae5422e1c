// CUDA 2-D convolution, NCHW, f32 (core/ops/conv.inc), through cuDNN's convolution API:
// cudnnConvolutionForward / BackwardData / BackwardFilter, cross-correlation, dilation 1.
//  - Exact f32: the descriptor asks for CUDNN_FMA_MATH (no TF32), so results match the
//    CPU reference to f32 rounding.
//  - Algorithms: cudnnGet*Algorithm_v7's ranked list, taking the first that succeeds,
//    uses FMA math, fits the stream's workspace (32 MiB) and, for the backward passes,
//    is deterministic; if none qualifies, a fixed algorithm (IMPLICIT_GEMM forward,
//    ALGO_1 backward, both deterministic) whose workspace must fit.
//  - Bias: our own kernels (out += bias[c]; dbias[c] += sum over B,H,W, one block per
//    channel, fixed order). dw and dbias accumulate (cuDNN beta = 1); din is overwritten
//    and skipped when undefined; bias/dbias may be undefined.
//  - maps_to_rows / rows_to_maps: one thread per element (a permutation, f32).
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

struct TensorDesc {
  cudnnTensorDescriptor_t h = nullptr;
  TensorDesc(int64_t n, int64_t c, int64_t hh, int64_t w) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&h));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(h, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n), int(c), int(hh), int(w)));
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(h); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t h = nullptr;
  FilterDesc(int64_t k, int64_t c, int64_t hh, int64_t w) {
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&h));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(h, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(k), int(c), int(hh), int(w)));
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(h); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t h = nullptr;
  ConvDesc(int stride, int pad) {
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&h));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(h, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(h, CUDNN_FMA_MATH));
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(h); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// The descriptors of one convolution, built from in[B,Cin,H,W], w[Cout,Cin,KH,KW].
struct Conv {
  int64_t B, Cin, H, W, Cout, KH, KW, Ho, Wo;
  TensorDesc x, y;
  FilterDesc f;
  ConvDesc c;
  Conv(int64_t B_, int64_t Cin_, int64_t H_, int64_t W_, int64_t Cout_, int64_t KH_, int64_t KW_, int stride, int pad)
      : B(B_), Cin(Cin_), H(H_), W(W_), Cout(Cout_), KH(KH_), KW(KW_), Ho((H_ + 2 * pad - KH_) / stride + 1),
        Wo((W_ + 2 * pad - KW_) / stride + 1), x(B_, Cin_, H_, W_), y(B_, Cout_, Ho, Wo), f(Cout_, Cin_, KH_, KW_),
        c(stride, pad) {}
};

// The convolution of in/w (out shape given by the formula of conv.inc; the op's contract
// is checked before: core/ops/contract_conv.cpp), within cuDNN's int dimensions.
Conv make_conv(const char* op, const Tensor& in, const Tensor& w, int stride, int pad) {
  VLM_ASSERT(in.numel() < (int64_t(1) << 31), op, ": cuDNN descriptors take int dimensions");
  return Conv(in.size(0), in.size(1), in.size(2), in.size(3), w.size(0), w.size(2), w.size(3), stride, pad);
}

// The first ranked algorithm that succeeded, uses FMA math, fits `ws` and (if asked) is
// deterministic; `fallback` otherwise.
template <typename Perf, typename Algo>
Algo pick(const Perf* perf, int n, size_t ws, bool need_deterministic, Algo fallback) {
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws && perf[i].mathType == CUDNN_FMA_MATH &&
        (!need_deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
      return perf[i].algo;
  return fallback;
}

__global__ void conv_bias_kernel(float* out, const float* bias, int64_t n, int64_t plane, int64_t C) {
  VLM_GRID_STRIDE(i, n) out[i] += bias[(i / plane) % C];
}

// dbias[c] += sum over b and the plane of dout[b, c, :]; one block per channel.
__global__ void conv_dbias_kernel(float* dbias, const float* dout, int64_t B, int64_t plane, int64_t C) {
  const int64_t c = blockIdx.x;
  float acc = 0.f;
  for (int64_t b = 0; b < B; ++b) {
    const float* p = dout + (b * C + c) * plane;
    for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) acc += p[i];
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) dbias[c] += acc;
}

}  // namespace

void conv2d_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& w, const Tensor& bias, int stride,
                    int pad) {
  const char* op = "conv2d_forward";
  Conv cv = make_conv(op, in, w, stride, pad);
  if (out.numel() == 0) return;
  CudaStream& cs = cuda_stream(s);
  cudnnHandle_t h = cs.cudnn();
  const size_t ws = cs.workspace_bytes();

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, cv.x.h, cv.f.h, cv.c.h, cv.y.h,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
  const auto algo = pick(perf, n, ws, false, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
  size_t need = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, cv.x.h, cv.f.h, cv.c.h, cv.y.h, algo, &need));
  VLM_ASSERT(need <= ws, op, ": cuDNN algorithm needs ", need, " bytes of workspace");
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, cv.x.h, in.data(), cv.f.h, w.data(), cv.c.h, algo, cs.workspace(),
                                      ws, &zero, cv.y.h, out.data()));
  if (bias.defined()) {
    conv_bias_kernel<<<grid_1d(out.numel()), kThreads, 0, cs.handle()>>>(f32p(out), f32p(bias), out.numel(),
                                                                         cv.Ho * cv.Wo, cv.Cout);
    CUDA_CHECK_LAUNCH();
  }
}

void conv2d_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& w, int stride, int pad) {
  const char* op = "conv2d_backward";
  Conv cv = make_conv(op, in, w, stride, pad);
  if (din.defined() && in.numel() > 0 && dout.numel() == 0)  // nothing flows back: din = 0
    CUDA_CHECK(cudaMemsetAsync(din.data(), 0, din.nbytes(), stream_of(s)));
  if (dout.numel() == 0) return;
  CudaStream& cs = cuda_stream(s);
  cudnnHandle_t h = cs.cudnn();
  const size_t ws = cs.workspace_bytes();
  const float one = 1.f, zero = 0.f;

  if (dbias.defined()) {
    conv_dbias_kernel<<<unsigned(cv.Cout), kThreads, 0, cs.handle()>>>(f32p(dbias), f32p(dout), cv.B,
                                                                       cv.Ho * cv.Wo, cv.Cout);
    CUDA_CHECK_LAUNCH();
  }
  if (dw.defined()) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, cv.x.h, cv.y.h, cv.c.h, cv.f.h,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
    const auto algo = pick(perf, n, ws, true, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    size_t need = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, cv.x.h, cv.y.h, cv.c.h, cv.f.h, algo, &need));
    VLM_ASSERT(need <= ws, op, ": cuDNN filter algorithm needs ", need, " bytes of workspace");
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, cv.x.h, in.data(), cv.y.h, dout.data(), cv.c.h, algo,
                                               cs.workspace(), ws, &one, cv.f.h, dw.data()));
  }
  if (din.defined()) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, cv.f.h, cv.y.h, cv.c.h, cv.x.h,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
    const auto algo = pick(perf, n, ws, true, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
    size_t need = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, cv.f.h, cv.y.h, cv.c.h, cv.x.h, algo, &need));
    VLM_ASSERT(need <= ws, op, ": cuDNN data algorithm needs ", need, " bytes of workspace");
    CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, cv.f.h, w.data(), cv.y.h, dout.data(), cv.c.h, algo,
                                             cs.workspace(), ws, &zero, cv.x.h, din.data()));
  }
}

namespace {

// i runs over the rows' elements: rows[i = (b*HW + p)*C + c] <-> maps[(b*C + c)*HW + p].
__global__ void permute_maps_kernel(float* rows, float* maps, int64_t n, int64_t C, int64_t HW, bool to_rows) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t c = i % C, p = (i / C) % HW, b = i / (C * HW);
    float& m = maps[(b * C + c) * HW + p];
    if (to_rows)
      rows[i] = m;
    else
      m = rows[i];
  }
}

void permute_maps(Stream& s, const Tensor& rows, const Tensor& maps, bool to_rows) {
  const int64_t n = rows.numel();
  if (n == 0) return;
  permute_maps_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(rows), f32p(maps), n, maps.size(1),
                                                                   maps.size(2) * maps.size(3), to_rows);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void maps_to_rows(Stream& s, const Tensor& rows, const Tensor& maps) { permute_maps(s, rows, maps, true); }
void rows_to_maps(Stream& s, const Tensor& maps, const Tensor& rows) { permute_maps(s, rows, maps, false); }

}  // namespace vlm::cuda
