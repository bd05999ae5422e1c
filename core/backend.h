// Backend interface: a device that allocates memory, copies, and runs work in order on
// streams; events order work across streams. CPU and CUDA implement it; the model
// code sees only this interface and the ops (core/ops.h), which dispatch on the
// device of the stream they are given.
//
// Selection: select_backend("auto"|"cpu"|"cuda"): auto = CUDA when the CUDA backend
// was compiled in and a GPU is present, else CPU; the choice is logged in one line.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"

namespace vlm {

// A marker in a stream's work (Stream::record). CPU: a completion flag with the host
// time (steady clock) at which the work before it completed; on a synchronous stream
// that is the time of the record itself. CUDA: a cudaEvent_t (core/cuda/cuda_backend.h),
// with timing only when created with it. As on CUDA, a wait or query refers to the
// latest record made before it; recording again re-arms the event.
class Event {
 public:
  virtual ~Event() = default;
  // True when the work recorded before the event has completed (an event never
  // recorded counts as complete). Never blocks.
  virtual bool query() = 0;
  // Blocks the host until the event has completed.
  virtual void synchronize() = 0;
  // Milliseconds from `start` to this event. Both must have been recorded, on the same
  // backend, and (CUDA) created with timing; waits for both to complete.
  virtual float elapsed_ms(const Event& start) = 0;
};

// An in-order queue of work on one device. Two CPU kinds: the synchronous stream
// (default_stream, create_stream) runs work when enqueued, so record stamps the host time,
// wait blocks the caller only on an event of an asynchronous stream, and synchronize
// returns at once; the asynchronous stream (create_async_stream) owns one worker thread
// that runs its queue in order, so record, wait and launch return at once and the work
// runs on the worker. On CUDA every stream is asynchronous.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual DeviceKind device() const = 0;
  virtual const std::string& name() const = 0;
  virtual void synchronize() = 0;
  virtual void record(Event& e) = 0;  // e completes when the work enqueued so far does
  virtual void wait(Event& e) = 0;    // later work on this stream waits for e
  // Runs host code as the stream's next piece of work: the ops it calls with this
  // stream are enqueued (CUDA) or run (CPU) in the stream's order. Synchronous CPU and
  // CUDA streams call fn at once on the calling thread; the asynchronous CPU stream
  // queues it for its worker. An exception fn throws on a worker is kept and rethrown
  // by the next synchronize(); the work after it still runs (events still complete).
  virtual void launch(std::function<void()> fn) { fn(); }
};

// Options of Backend::create_async_stream.
struct AsyncStreamOptions {
  bool high_priority = false;  // CUDA: the greatest stream priority (communication)
  int threads = 0;             // CPU: the worker's thread budget (set_thread_budget); 0 = keep
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind device() const = 0;
  // One line for logs: "cpu (OpenBLAS, 2 threads)" / "cuda:0 NVIDIA H100 (sm_90, 79.1 GiB)".
  virtual std::string description() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // 256-byte aligned; throws on OOM
  virtual void deallocate(void* p) = 0;
  // Copies `bytes` between host and this backend's device (either side may be host).
  virtual void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) = 0;
  virtual void memset_zero(void* p, size_t bytes) = 0;
  // The backend's default stream (the one set-up code and tests use).
  virtual Stream& default_stream() = 0;
  virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
  // A stream whose work runs concurrently with the caller and with other such streams
  // (CPU: its own worker thread; CUDA: a cudaStream, at high priority when asked).
  virtual std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& opt) = 0;
  // timing: the event can measure elapsed_ms (CUDA events without it are cheaper).
  virtual std::unique_ptr<Event> create_event(bool timing = false) = 0;
  virtual void synchronize() = 0;  // waits for all streams of the device
  // False for a backend that only reserves address space and never backs it with memory
  // (the planner's, core/reserving_backend.h): checks of available memory do not apply to it.
  virtual bool commits_memory() const { return true; }
};

Backend& cpu_backend();
// The calling thread's budget of threads for the CPU ops it runs (its own pool, the
// caller included; BLAS calls run on those threads: core/cpu_threads.h). A worker of an
// asynchronous CPU stream calls it once at start with AsyncStreamOptions::threads;
// n <= 0 keeps the current value. The policy that picks n lives with the scheduler
// (scheduler/streams.h).
void set_thread_budget(int n);
// The number of threads a parallel loop of the calling thread may use.
int thread_budget();
// True when the CUDA backend was compiled in and at least one GPU is visible.
bool cuda_available();
// Why CUDA is not available ("not compiled in", "no CUDA device: <driver message>").
std::string cuda_unavailable_reason();
// Device allocations (cudaMalloc calls) the CUDA backend has made in this process: its
// tensors, each stream's workspace and the growth of its cast buffer; 0 without it. A
// step that allocates nothing leaves it unchanged (tests/train/test_step_cuda.cpp).
uint64_t cuda_allocations();
// The CUDA backend on the current device; throws UserError when not available.
Backend& cuda_backend();
Backend& backend_for(DeviceKind d);
// which: "auto" | "cpu" | "cuda". Logs "vlm: backend <description>" once when log is set.
Backend& select_backend(const std::string& which, bool log = true);

}  // namespace vlm
