// Tensor-parallel region operators (math and conventions in regions.h). Column
// rearrangements use the ops slice_cols / unslice_cols and plain copies the op copy
// (a no-op when y and x are the same memory), so the same code runs on both backends;
// collectives go through the Communicator on the caller's stream.
#include "parallel/regions.h"

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

namespace {

// t viewed as [rows, last dim].
Tensor as2d(const Tensor& t) { return t.view(Shape{t.rows(), t.cols()}); }

// Whether f32 x travels as bf16 (regions.h `wire`).
bool bf16_wire(const Communicator& comm, const Tensor& x, DType wire) {
  VLM_ASSERT(wire == DType::F32 || wire == DType::BF16, "region wire dtype ", dtype_name(wire));
  return wire == DType::BF16 && x.dtype() == DType::F32 && comm.size() > 1;
}

// x converted into staging slot `slot` of comm (bf16, x.numel() elements).
Tensor to_wire(Stream& s, Communicator& comm, int slot, const Tensor& x) {
  const Tensor w = comm.staging(slot, x.numel(), DType::BF16);
  convert(s, w, x);
  return w;
}

// Checks that `whole` [N, C] and `part` [N, C/p] are a last-dim split over p ranks.
void check_col_split(const char* op, const Communicator& comm, const Tensor& whole, const Tensor& part) {
  const int64_t p = comm.size();
  VLM_ASSERT(whole.rows() == part.rows() && whole.cols() == part.cols() * p && whole.dtype() == part.dtype(), op,
             " on group ", comm.name(), ": ", whole.str(), " is not ", p, " x ", part.str(), " along the last dim");
}

// Checks that `whole` [T, ..] and `part` [T/p, ..] are a dimension-0 split over p ranks.
void check_row_split(const char* op, const Communicator& comm, const Tensor& whole, const Tensor& part) {
  const int64_t p = comm.size();
  VLM_ASSERT(whole.ndim() >= 1 && part.ndim() == whole.ndim() && whole.size(0) == part.size(0) * p &&
                 whole.numel() == part.numel() * p && whole.dtype() == part.dtype(),
             op, " on group ", comm.name(), ": ", whole.str(), " is not ", p, " x ", part.str(), " along dim 0");
}

// y[N, p*c] = concat_cols over ranks of x[N, c], through `work` ([p*N, c] blocks).
void gather_cols(const char* op, Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                 const Tensor& work, DType wire) {
  check_col_split(op, comm, y, x);
  if (comm.size() == 1) return copy(s, y, x);
  const int64_t p = comm.size(), n = x.rows(), c = x.cols();
  VLM_ASSERT(work.dtype() == x.dtype() && work.numel() >= p * n * c, op, " on group ", comm.name(),
             ": work ", work.str(), " must hold ", p * n * c, " elements of ", dtype_name(x.dtype()));
  const Tensor blocks = work.sub(0, Shape{p * n, c});
  if (bf16_wire(comm, x, wire)) {
    const Tensor in = to_wire(s, comm, 0, x), out = comm.staging(1, p * n * c, DType::BF16);
    comm.all_gather(s, out, in);
    convert(s, blocks, out);
  } else {
    comm.all_gather(s, blocks, as2d(x));
  }
  const Tensor y2 = as2d(y);
  for (int64_t r = 0; r < p; ++r) unslice_cols(s, y2, blocks.slice(r * n, (r + 1) * n), r * c);
}

// y[N, c] = x[N, p*c][:, r*c:(r+1)*c].
void take_cols(const char* op, Stream& s, Communicator& comm, const Tensor& y, const Tensor& x) {
  check_col_split(op, comm, x, y);
  if (comm.size() == 1) return copy(s, y, x);
  slice_cols(s, as2d(y), as2d(x), int64_t(comm.rank()) * y.cols());
}

// y = sum over ranks of x (y may alias x).
void sum_over_ranks(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x, DType wire) {
  VLM_ASSERT(y.shape() == x.shape() && y.dtype() == x.dtype(), "all-reduce region: ", x.str(), " -> ", y.str());
  if (bf16_wire(comm, x, wire)) {
    const Tensor w = to_wire(s, comm, 0, x);
    comm.all_reduce(s, w, ReduceOp::Sum);
    return convert(s, y, w);
  }
  copy(s, y, x);
  if (comm.size() > 1) comm.all_reduce(s, y, ReduceOp::Sum);
}

// y = x (y may alias x).
void identity(Stream& s, const Tensor& y, const Tensor& x) {
  VLM_ASSERT(y.shape() == x.shape() && y.dtype() == x.dtype(), "identity region: ", x.str(), " -> ", y.str());
  copy(s, y, x);
}

// y[T,..] = concat_rows over ranks of x[T/p,..].
void gather_rows(const char* op, Stream& s, Communicator& comm, const Tensor& y, const Tensor& x, DType wire) {
  check_row_split(op, comm, y, x);
  if (comm.size() == 1) return copy(s, y, x);
  if (bf16_wire(comm, x, wire)) {
    const Tensor in = to_wire(s, comm, 0, x), out = comm.staging(1, y.numel(), DType::BF16);
    comm.all_gather(s, out, in);
    return convert(s, y, out);
  }
  comm.all_gather(s, y, x);
}

// y[T/p,..] = rows of block r of sum over ranks of x[T,..].
void reduce_scatter_rows(const char* op, Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                         DType wire) {
  check_row_split(op, comm, x, y);
  if (comm.size() == 1) return copy(s, y, x);
  if (bf16_wire(comm, x, wire)) {
    const Tensor in = to_wire(s, comm, 0, x), out = comm.staging(1, y.numel(), DType::BF16);
    comm.reduce_scatter(s, out, in, ReduceOp::Sum);
    return convert(s, y, out);
  }
  comm.reduce_scatter(s, y, x, ReduceOp::Sum);
}

}  // namespace

void copy_to_region_forward(Stream& s, Communicator&, const Tensor& y, const Tensor& x) { identity(s, y, x); }
void copy_to_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy, DType wire) {
  sum_over_ranks(s, comm, dx, dy, wire);
}

void reduce_from_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x, DType wire) {
  sum_over_ranks(s, comm, y, x, wire);
}
void reduce_from_region_backward(Stream& s, Communicator&, const Tensor& dx, const Tensor& dy) {
  identity(s, dx, dy);
}

void scatter_to_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x) {
  take_cols("scatter_to_region_forward", s, comm, y, x);
}
void scatter_to_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy,
                                const Tensor& work, DType wire) {
  gather_cols("scatter_to_region_backward", s, comm, dx, dy, work, wire);
}

void gather_from_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                const Tensor& work, DType wire) {
  gather_cols("gather_from_region_forward", s, comm, y, x, work, wire);
}
void gather_from_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy) {
  take_cols("gather_from_region_backward", s, comm, dx, dy);
}

void gather_from_sequence_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                         DType wire) {
  gather_rows("gather_from_sequence_region_forward", s, comm, y, x, wire);
}
void gather_from_sequence_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy,
                                          DType wire) {
  reduce_scatter_rows("gather_from_sequence_region_backward", s, comm, dx, dy, wire);
}

void reduce_scatter_to_sequence_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                               DType wire) {
  reduce_scatter_rows("reduce_scatter_to_sequence_region_forward", s, comm, y, x, wire);
}
void reduce_scatter_to_sequence_region_backward(Stream& s, Communicator& comm, const Tensor& dx,
                                                const Tensor& dy, DType wire) {
  gather_rows("reduce_scatter_to_sequence_region_backward", s, comm, dx, dy, wire);
}

}  // namespace vlm
