// The CUDA backend's concrete classes, visible to core/cuda/ and parallel/nccl/ only
// (the rest of the project sees core/backend.h). The ops and NCCL need them to reach the cudaStream_t, the
// cuBLASLt handle, the cuDNN handle and the workspace of the Stream they are given.
// Invariants:
//  - One device per process: the device current when the backend is first used
//    (cudaSetDevice(local_rank) beforehand picks another). Every allocation, stream and
//    event of the backend lives on it.
//  - Each CudaStream owns a cuBLASLt handle and a 32 MiB device workspace shared by
//    cuBLASLt and cuDNN; work on one stream is ordered, so they never overlap. The
//    cuDNN handle is created on first use (cuDNN's initialisation is slow and most
//    streams never run a convolution).
//  - Each CudaStream also owns a scratch buffer (scratch()): the ops' own device scratch
//    (cuDNN attention's workspace, the bf16 chunks of a mixed-precision matmul's f32
//    operand, the keys and partial sums of the deterministic reductions), used by one op
//    at a time. It is allocated at its first use at the size planned when the model was
//    built (Backend::reserve_scratch), at least kScratchMinBytes, so a run allocates it
//    once per stream; a need beyond it (an unplanned shape) grows it, waiting for the
//    stream first (docs/gpu.md, "Memory inside a step").
//  - Each CudaStream keeps the plans its ops built (the cuBLASLt matmul plans, the cuDNN
//    attention graphs: core/plan_cache.h) in its state slots, destroyed before its
//    handles.
//  - Streams are blocking streams (cudaStreamDefault): synchronous copies through the
//    legacy default stream (Backend::copy) wait for the work already enqueued on them.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"

namespace vlm::cuda {

inline constexpr size_t kWorkspaceBytes = size_t(32) << 20;
inline constexpr size_t kScratchMinBytes = size_t(16) << 20;

// What an op file keeps per stream (its plan caches); see CudaStream::state.
struct StreamState {
  virtual ~StreamState() = default;
};
enum class StreamSlot { Gemm, Attention, Count };

// How often an op's plan cache built a plan (ran a heuristic) and reused one.
struct PlanCounts {
  uint64_t builds = 0, hits = 0, plans = 0;
};

// A cudaEvent_t on the current device, created with timing only when asked (timing
// events are slower to record). Also the completion event NCCL operations share, by
// shared_ptr, between a handle and the watchdog (parallel/nccl/): destroying it while
// recorded work is pending is allowed (CUDA releases it on completion).
class CudaEvent final : public Event {
 public:
  explicit CudaEvent(bool timing = false);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t handle() const { return event_; }
  bool timing() const { return timing_; }

  bool query() override;  // cudaEventQuery: not ready -> false, any other error aborts
  void synchronize() override;
  float elapsed_ms(const Event& start) override;

 private:
  cudaEvent_t event_ = nullptr;
  bool timing_ = false;
};

class CudaStream final : public Stream {
 public:
  // high_priority: created at the device's greatest priority (the scheduler's `comm`).
  explicit CudaStream(std::string name, bool high_priority = false);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  DeviceKind device() const override { return DeviceKind::CUDA; }
  const std::string& name() const override { return name_; }
  void synchronize() override;
  void record(Event& e) override;
  void wait(Event& e) override;

  cudaStream_t handle() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  cudnnHandle_t cudnn();  // created on first call, bound to this stream
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return kWorkspaceBytes; }
  // At least `bytes` of device scratch for the op running on this stream (see the
  // header comment); growing it first waits for the stream's work (the old buffer may
  // still be read).
  void* scratch(size_t bytes);
  size_t scratch_bytes() const { return scratch_bytes_; }
  // The state an op file keeps on this stream (created by it on first use).
  std::unique_ptr<StreamState>& state(StreamSlot s) { return states_[size_t(s)]; }

 private:
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::unique_ptr<StreamState> states_[size_t(StreamSlot::Count)];
};

// The CudaStream behind a Stream of the CUDA backend (internal error otherwise).
CudaStream& cuda_stream(Stream& s);
inline cudaStream_t stream_of(Stream& s) { return cuda_stream(s).handle(); }

// Number of visible GPUs; 0 with the driver's reason when none (never throws, never
// aborts: a machine without a driver must still run on CPU).
int device_count(std::string* reason);
// The process-wide CUDA backend (created on first call; needs device_count() > 0).
Backend& backend();
// cudaMalloc calls of the backend so far (vlm::device_allocations, core/backend.h).
uint64_t allocations();
// The scratch size planned so far (the largest Backend::reserve_scratch).
size_t planned_scratch();
// The plan caches of a stream (core/cuda/gemm_plan.cpp, core/cuda/attention_cudnn.cpp).
PlanCounts gemm_plan_counts(CudaStream& s);

}  // namespace vlm::cuda
