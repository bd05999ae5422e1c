// NcclCommunicator: NCCL collectives on a dedicated communication stream ordered with
// events, make_nccl_communicator and bind_local_device (see nccl_communicator.h,
// parallel/groups.h).
#include "parallel/nccl/nccl_communicator.h"

#include <utility>

#include "base/error.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "parallel/groups.h"
#include "parallel/mpi/mpi_check.h"
#include "parallel/nccl/nccl_check.h"

namespace vlm {

namespace {

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::U8: return ncclUint8;
  }
  VLM_ASSERT(false, "no NCCL type for dtype ", int(d));
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

int mpi_world_rank() {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

// A posted NCCL operation: wait() orders the caller's stream after its completion.
class NcclWork final : public CommHandle {
 public:
  NcclWork(cudaStream_t caller, std::shared_ptr<cuda::CudaEvent> done) : caller_(caller), done_(std::move(done)) {}
  ~NcclWork() override { wait(); }
  void wait() override {
    if (!done_) return;
    CUDA_CHECK(cudaStreamWaitEvent(caller_, done_->handle(), 0));
    done_.reset();
  }

 private:
  cudaStream_t caller_;
  std::shared_ptr<cuda::CudaEvent> done_;
};

// A queued send/recv: wait() issues the queue if it is still pending, then orders the
// caller's stream after the batch's completion.
class NcclP2pWork final : public CommHandle {
 public:
  NcclP2pWork(NcclCommunicator& comm, cudaStream_t caller, std::shared_ptr<NcclCommunicator::P2pBatch> batch)
      : comm_(comm), caller_(caller), batch_(std::move(batch)) {}
  ~NcclP2pWork() override { wait(); }
  void wait() override {
    if (!batch_) return;
    if (!batch_->issued) comm_.flush_p2p();
    CUDA_CHECK(cudaStreamWaitEvent(caller_, batch_->done->handle(), 0));
    batch_.reset();
  }

 private:
  NcclCommunicator& comm_;
  cudaStream_t caller_;
  std::shared_ptr<NcclCommunicator::P2pBatch> batch_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::string name, double timeout_s)
    : Communicator(std::move(name), mpi_world_rank(), timeout_s) {
  MPI_CHECK(MPI_Comm_dup(comm, &boot_));
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  CUDA_CHECK(cudaGetDevice(&device_));
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm));
  NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(int)));
  CUDA_CHECK(cudaMemsetAsync(barrier_word_, 0, sizeof(int), stream_));
  watchdog_ = std::make_unique<NcclWatchdog>(*this, nccl_, device_);
}

NcclCommunicator::~NcclCommunicator() {
  // Teardown only: wait for posted work while the watchdog still guards it.
  flush_p2p();
  cudaStreamSynchronize(stream_);
  watchdog_.reset();
  ncclCommDestroy(nccl_);
  cudaFree(barrier_word_);
  cudaStreamDestroy(stream_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && boot_ != MPI_COMM_NULL) MPI_Comm_free(&boot_);
}

std::unique_ptr<Communicator> NcclCommunicator::duplicate(const std::string& name) const {
  return std::make_unique<NcclCommunicator>(boot_, name, timeout_s());
}

void NcclCommunicator::begin(Stream& caller) {
  flush_p2p();  // queued p2p operations were called first: issue them first
  const cudaStream_t cs = cuda::stream_of(caller);
  cuda::CudaEvent ready;
  CUDA_CHECK(cudaEventRecord(ready.handle(), cs));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.handle(), 0));
}

CommWork NcclCommunicator::finish(Stream& caller, CollKind kind) {
  auto done = std::make_shared<cuda::CudaEvent>();
  CUDA_CHECK(cudaEventRecord(done->handle(), stream_));
  watchdog_->watch(done, kind);
  return std::make_unique<NcclWork>(cuda::stream_of(caller), std::move(done));
}

CommWork NcclCommunicator::post_all_reduce(Stream& s, const Tensor& x, ReduceOp op) {
  begin(s);
  NCCL_CHECK(ncclAllReduce(x.data(), x.data(), size_t(x.numel()), nccl_type(x.dtype()), nccl_op(op), nccl_, stream_));
  return finish(s, CollKind::AllReduce);
}

CommWork NcclCommunicator::post_all_gather(Stream& s, const Tensor& out, const Tensor& in) {
  begin(s);
  NCCL_CHECK(ncclAllGather(in.data(), out.data(), size_t(in.numel()), nccl_type(in.dtype()), nccl_, stream_));
  return finish(s, CollKind::AllGather);
}

CommWork NcclCommunicator::post_reduce_scatter(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op) {
  begin(s);
  NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), size_t(out.numel()), nccl_type(out.dtype()), nccl_op(op),
                               nccl_, stream_));
  return finish(s, CollKind::ReduceScatter);
}

CommWork NcclCommunicator::post_broadcast(Stream& s, const Tensor& x, int root) {
  begin(s);
  NCCL_CHECK(ncclBroadcast(x.data(), x.data(), size_t(x.numel()), nccl_type(x.dtype()), root, nccl_, stream_));
  return finish(s, CollKind::Broadcast);
}

CommWork NcclCommunicator::post_p2p(Stream& caller, const P2pOp& op, CollKind kind) {
  // The communication stream waits for the caller's work now (inputs ready at post
  // time); nothing else is enqueued on it before the queue is issued (begin() of any
  // other operation issues the queue first).
  const cudaStream_t cs = cuda::stream_of(caller);
  cuda::CudaEvent ready;
  CUDA_CHECK(cudaEventRecord(ready.handle(), cs));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.handle(), 0));
  if (!p2p_batch_)
    p2p_batch_ = std::make_shared<P2pBatch>(P2pBatch{std::make_shared<cuda::CudaEvent>(), kind, false});
  p2p_ops_.push_back(op);
  return std::make_unique<NcclP2pWork>(*this, cs, p2p_batch_);
}

void NcclCommunicator::flush_p2p() {
  if (p2p_ops_.empty()) return;
  NCCL_CHECK(ncclGroupStart());
  for (const P2pOp& op : p2p_ops_) {
    if (op.send)
      NCCL_CHECK(ncclSend(op.buf, op.count, op.type, op.peer, nccl_, stream_));
    else
      NCCL_CHECK(ncclRecv(op.buf, op.count, op.type, op.peer, nccl_, stream_));
  }
  NCCL_CHECK(ncclGroupEnd());
  p2p_ops_.clear();
  CUDA_CHECK(cudaEventRecord(p2p_batch_->done->handle(), stream_));
  watchdog_->watch(p2p_batch_->done, p2p_batch_->kind);
  p2p_batch_->issued = true;
  p2p_batch_.reset();
}

CommWork NcclCommunicator::post_send(Stream& s, const Tensor& x, int peer) {
  return post_p2p(s, P2pOp{true, x.data(), size_t(x.numel()), nccl_type(x.dtype()), peer}, CollKind::Send);
}

CommWork NcclCommunicator::post_recv(Stream& s, const Tensor& x, int peer) {
  return post_p2p(s, P2pOp{false, x.data(), size_t(x.numel()), nccl_type(x.dtype()), peer}, CollKind::Recv);
}

CommWork NcclCommunicator::post_barrier(Stream& s) {
  begin(s);
  NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, nccl_, stream_));
  return finish(s, CollKind::Barrier);
}

int bind_local_device() {
  MPI_Comm node = MPI_COMM_NULL;
  int world_rank = 0, local_rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  MPI_CHECK(MPI_Comm_free(&node));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return -1;
  }
  const int device = local_rank % count;
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const std::string& name, double timeout_s) {
  return std::make_unique<NcclCommunicator>(comm, name, timeout_s);
}

}  // namespace vlm
