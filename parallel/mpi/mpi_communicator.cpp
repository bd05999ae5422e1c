// MpiCommunicator: non-blocking MPI collectives with a deadline (see the header).
#include "parallel/mpi/mpi_communicator.h"

#include <chrono>
#include <climits>
#include <thread>
#include <utility>

#include "base/error.h"
#include "parallel/mpi/mpi_check.h"
#include "parallel/mpi/mpi_session.h"

namespace vlm {

namespace {

using Clock = std::chrono::steady_clock;

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT;
    case DType::BF16: return MPI_UINT16_T;  // with the bf16 operations below
    default: break;
  }
  VLM_ASSERT(false, "no MPI reduction type for ", dtype_name(d));
  return MPI_DATATYPE_NULL;
}

// bf16 reductions (MPI has no bf16 type): each pairwise step adds (or compares) in f32
// and rounds the result to bf16, as NCCL's bf16 reductions do.
template <bool kMax>
void bf16_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
    b[i] = f32_to_bf16(kMax ? (x > y ? x : y) : x + y);
  }
}

MPI_Op mpi_op(ReduceOp op, DType d) {
  if (d == DType::BF16) {  // created once, after MPI_Init (a communicator exists)
    static const MPI_Op sum = [] {
      MPI_Op o;
      MPI_CHECK(MPI_Op_create(&bf16_reduce<false>, 1, &o));
      return o;
    }();
    static const MPI_Op max = [] {
      MPI_Op o;
      MPI_CHECK(MPI_Op_create(&bf16_reduce<true>, 1, &o));
      return o;
    }();
    return op == ReduceOp::Sum ? sum : max;
  }
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

int count_of(int64_t n) {
  VLM_ASSERT(n >= 0 && n <= INT_MAX, "MPI count ", n, " does not fit in an int");
  return int(n);
}

int mpi_world_rank() {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

// One posted request; wait() polls it against the deadline.
class MpiWork final : public CommHandle {
 public:
  MpiWork(const Communicator& comm, CollKind kind, MPI_Request req, double timeout_s)
      : comm_(comm), kind_(kind), req_(req),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {}
  ~MpiWork() override { wait(); }

  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    int backoff_us = 10;
    for (;;) {
      int flag = 0;
      MPI_CHECK(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
      if (flag) break;
      if (Clock::now() >= deadline_) abort_all_ranks(comm_.timeout_message(kind_).c_str());
      std::this_thread::sleep_for(std::chrono::microseconds(backoff_us));
      backoff_us = backoff_us < 1000 ? backoff_us * 2 : 1000;
    }
    req_ = MPI_REQUEST_NULL;
  }

 private:
  const Communicator& comm_;
  CollKind kind_;
  MPI_Request req_;
  Clock::time_point deadline_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, double timeout_s)
    : Communicator(std::move(name), mpi_world_rank(), timeout_s) {
  MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

CommWork MpiCommunicator::track(CollKind kind, MPI_Request req) const {
  return std::make_unique<MpiWork>(*this, kind, req, timeout_s());
}

CommWork MpiCommunicator::post_all_reduce(Stream&, const Tensor& x, ReduceOp op) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, x.data(), count_of(x.numel()), mpi_type(x.dtype()), mpi_op(op, x.dtype()), comm_,
                           &req));
  return track(CollKind::AllReduce, req);
}

CommWork MpiCommunicator::post_all_gather(Stream&, const Tensor& out, const Tensor& in) {
  MPI_Request req = MPI_REQUEST_NULL;
  const int n = count_of(int64_t(in.nbytes()));
  MPI_CHECK(MPI_Iallgather(in.data(), n, MPI_BYTE, out.data(), n, MPI_BYTE, comm_, &req));
  return track(CollKind::AllGather, req);
}

CommWork MpiCommunicator::post_reduce_scatter(Stream&, const Tensor& out, const Tensor& in, ReduceOp op) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ireduce_scatter_block(in.data(), out.data(), count_of(out.numel()), mpi_type(out.dtype()),
                                      mpi_op(op, out.dtype()), comm_, &req));
  return track(CollKind::ReduceScatter, req);
}

CommWork MpiCommunicator::post_broadcast(Stream&, const Tensor& x, int root) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibcast(x.data(), count_of(int64_t(x.nbytes())), MPI_BYTE, root, comm_, &req));
  return track(CollKind::Broadcast, req);
}

CommWork MpiCommunicator::post_send(Stream&, const Tensor& x, int peer) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Isend(x.data(), count_of(int64_t(x.nbytes())), MPI_BYTE, peer, 0, comm_, &req));
  return track(CollKind::Send, req);
}

CommWork MpiCommunicator::post_recv(Stream&, const Tensor& x, int peer) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Irecv(x.data(), count_of(int64_t(x.nbytes())), MPI_BYTE, peer, 0, comm_, &req));
  return track(CollKind::Recv, req);
}

CommWork MpiCommunicator::post_barrier(Stream&) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm_, &req));
  return track(CollKind::Barrier, req);
}

}  // namespace vlm
