// The CUDA backend (core/backend.h, core/cuda/cuda_backend.h): device memory through
// cudaMalloc (256-byte aligned, freed with cudaFree), synchronous copies in every
// direction through cudaMemcpy with unified addressing, CudaStream (stream + cuBLASLt
// handle + workspace + lazy cuDNN handle) and CudaEvent (timing when asked).
// device_count() is the one entry that must work without a driver: it turns any error
// of cudaGetDeviceCount into 0 and a reason, and clears the sticky error state.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>

#include "base/memory_check.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/out_of_memory.h"

namespace vlm::cuda {

namespace {

std::atomic<uint64_t> g_allocations{0};
std::atomic<size_t> g_planned_scratch{0};

}  // namespace

uint64_t allocations() { return g_allocations.load(std::memory_order_relaxed); }
size_t planned_scratch() { return g_planned_scratch.load(std::memory_order_relaxed); }

// ---- events and streams ---------------------------------------------------------------

CudaEvent::CudaEvent(bool timing) : timing_(timing) {
  CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);  // no check: may run during process exit
}

bool CudaEvent::query() {
  const cudaError_t st = cudaEventQuery(event_);
  if (st == cudaErrorNotReady) return false;
  CUDA_CHECK(st);
  return true;
}

void CudaEvent::synchronize() { CUDA_CHECK(cudaEventSynchronize(event_)); }

float CudaEvent::elapsed_ms(const Event& start) {
  const auto* s = dynamic_cast<const CudaEvent*>(&start);
  VLM_ASSERT(s, "CudaEvent::elapsed_ms: start is an event of another backend");
  VLM_ASSERT(timing_ && s->timing_, "CudaEvent::elapsed_ms: both events must be created with timing");
  CUDA_CHECK(cudaEventSynchronize(s->event_));
  CUDA_CHECK(cudaEventSynchronize(event_));
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, s->event_, event_));
  return ms;
}

// cudaMalloc of `bytes` on the current device; when the device has no room, OutOfMemory
// (core/out_of_memory.h) with `what` it was for and the device's free and total memory,
// never a bare CUDA error code.
// Every cudaMalloc of the backend goes through here, so allocations() counts them all.
static void* cuda_malloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const cudaError_t st = cudaMalloc(&p, bytes);
  if (st == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear, so later checks do not report this failure again
    int device = -1;
    size_t free = 0, total = 0;
    const bool known = cudaGetDevice(&device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess;
    cudaGetLastError();
    throw OutOfMemory(DeviceKind::CUDA, bytes, what,
                      known ? cat("cudaMalloc on cuda:", device, ": ", format_bytes(double(free)), " free of ",
                                  format_bytes(double(total)))
                            : std::string("cudaMalloc failed"));
  }
  CUDA_CHECK(st);
  return p;
}

CudaStream::CudaStream(std::string name, bool high_priority) : name_(std::move(name)) {
  int least = 0, greatest = 0;
  if (high_priority) CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamDefault, high_priority ? greatest : least));
  CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
  workspace_ = cuda_malloc(kWorkspaceBytes, cat("the cuBLASLt workspace of stream '", name_, "'"));
}

CudaStream::~CudaStream() {
  // No checks: destructors may run after the driver began shutting down. The ops' plans
  // (cuBLASLt descriptors, cuDNN graphs) go before the handles they were built with.
  for (auto& st : states_) st.reset();
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (workspace_) cudaFree(workspace_);
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(stream_);
}

// A stream's buffer `buf` of `have` bytes replaced by one of `want`: the old buffer may
// still be read by enqueued work, so the stream is waited for first.
static void* regrow(cudaStream_t st, void*& buf, size_t& have, size_t want, const std::string& what) {
  if (buf) {
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFree(buf));
  }
  buf = nullptr;
  have = 0;
  buf = cuda_malloc(want, what);
  have = want;
  return buf;
}

void* CudaStream::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  // Beyond the planned size only for an unplanned need.
  const size_t want = std::max({bytes, kScratchMinBytes, planned_scratch()});
  return regrow(stream_, scratch_, scratch_bytes_, want, cat("the scratch of stream '", name_, "'"));
}


void CudaStream::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaStream::record(Event& e) {
  auto* ce = dynamic_cast<CudaEvent*>(&e);
  VLM_ASSERT(ce, "CudaStream::record: event of another backend");
  CUDA_CHECK(cudaEventRecord(ce->handle(), stream_));
}

void CudaStream::wait(Event& e) {
  auto* ce = dynamic_cast<CudaEvent*>(&e);
  VLM_ASSERT(ce, "CudaStream::wait: event of another backend");
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ce->handle(), 0));
}

cudnnHandle_t CudaStream::cudnn() {
  if (!cudnn_) {
    CUDNN_CHECK(cudnnCreate(&cudnn_));
    CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  }
  return cudnn_;
}

CudaStream& cuda_stream(Stream& s) {
  VLM_ASSERT(s.device() == DeviceKind::CUDA, "CUDA op on a ", device_name(s.device()), " stream '", s.name(), "'");
  auto* cs = dynamic_cast<CudaStream*>(&s);
  VLM_ASSERT(cs, "stream '", s.name(), "' claims CUDA but is not a CudaStream");
  return *cs;
}

// ---- backend --------------------------------------------------------------------------

namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    CUDA_CHECK(cudaGetDevice(&device_));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f", double(prop.totalGlobalMem) / double(1ull << 30));
    description_ = cat("cuda:", device_, " ", prop.name, " (sm_", prop.major, prop.minor, ", ", mem, " GiB)");
    default_ = std::make_unique<CudaStream>("default");
  }

  DeviceKind device() const override { return DeviceKind::CUDA; }
  std::string description() const override { return description_; }

  void* allocate(size_t bytes) override {
    return cuda_malloc(bytes ? bytes : 256, "");  // cudaMalloc aligns to 256 bytes
  }

  void deallocate(void* p) override {
    if (!p) return;
    cudaError_t st = cudaFree(p);
    // Tensors held in statics may be freed after the runtime unloaded: harmless.
    if (st == cudaErrorCudartUnloading) return;
    CUDA_CHECK(st);
  }

  void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) override {
    if (!bytes) return;
    // Unified addressing tells the runtime where each pointer lives; the legacy default
    // stream waits for the (blocking) streams' earlier work, and cudaMemcpy returns when
    // the copy is done, so the copy is synchronous and ordered after enqueued ops.
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    if (dst_dev == DeviceKind::CUDA && src_dev == DeviceKind::CUDA) CUDA_CHECK(cudaDeviceSynchronize());
  }

  void memset_zero(void* p, size_t bytes) override {
    if (!bytes) return;
    CUDA_CHECK(cudaMemset(p, 0, bytes));  // legacy stream: ordered before later stream work
  }

  Stream& default_stream() override { return *default_; }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CudaStream>(name);
  }
  std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& opt) override {
    return std::make_unique<CudaStream>(name, opt.high_priority);
  }
  std::unique_ptr<Event> create_event(bool timing = false) override { return std::make_unique<CudaEvent>(timing); }
  void synchronize() override { CUDA_CHECK(cudaDeviceSynchronize()); }
  void reserve_scratch(size_t bytes) override {
    size_t cur = g_planned_scratch.load();
    while (bytes > cur && !g_planned_scratch.compare_exchange_weak(cur, bytes)) {
    }
  }

 private:
  int device_ = 0;
  std::string description_;
  std::unique_ptr<CudaStream> default_;
};

}  // namespace

int device_count(std::string* reason) {
  // Asked once: the answer cannot change during a run, and a missing driver is slow to
  // report on some systems.
  static std::once_flag once;
  static int count = 0;
  static std::string why;
  std::call_once(once, [] {
    int n = 0;
    cudaError_t st = cudaGetDeviceCount(&n);
    if (st != cudaSuccess) {
      why = cat("no CUDA device: ", cudaGetErrorName(st), ": ", cudaGetErrorString(st));
      cudaGetLastError();  // clear the error state
      n = 0;
    } else if (n == 0) {
      why = "no CUDA device: the driver reports 0 GPUs";
    }
    count = n;
  });
  if (reason) *reason = why;
  return count;
}

Backend& backend() {
  std::string reason;
  VLM_ASSERT(device_count(&reason) > 0, "cuda::backend() without a GPU: ", reason);
  // Never destroyed: tensors freed during static destruction must still find it.
  static CudaBackend* b = new CudaBackend();
  return *b;
}

}  // namespace vlm::cuda
