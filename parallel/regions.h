// Tensor-parallel region operators (Megatron-core `mappings`), as conjugate
// forward/backward pairs over the TP group's Communicator. Column/row-parallel layers
// are built only from these (docs/architecture.md, "Parallel layout"). Each op is given the stream it runs
// on; collectives are ordered on it (no host sync on CUDA).
//
// Let p = comm.size(), r = comm.rank(). Shapes: [N, C] means any tensor viewed as
// rows x last dim; c = C / p (C must divide by p).
//   copy_to_region          fwd: y = x                          bwd: dx = sum_ranks dy
//   reduce_from_region      fwd: y = sum_ranks x                bwd: dx = dy
//   scatter_to_region       fwd: y[N,c] = x[N,C][:, r*c:(r+1)*c] bwd: dx[N,C] = concat_cols(dy_0..dy_{p-1})
//   gather_from_region      fwd: y[N,C] = concat_cols(x_0..x_{p-1}) bwd: dx[N,c] = dy[:, r*c:(r+1)*c]
// Sequence parallel (dimension 0 = the packed token dimension T, t = T / p):
//   gather_from_sequence_region  fwd: y[T,..] = concat_rows(x_0..x_{p-1}) (all-gather)
//                                bwd: dx[t,..] = rows r*t..(r+1)*t of sum_ranks dy (reduce-scatter)
//   reduce_scatter_to_sequence_region  fwd: y[t,..] = rows of sum_ranks x (reduce-scatter)
//                                      bwd: dx[T,..] = concat_rows(dy_0..dy_{p-1}) (all-gather)
// Each pair is conjugate: bwd is the adjoint of fwd. At p = 1 every op is the identity:
// no communication, and a plain copy only when out and in are different memory.
// copy_to and reduce_from run in place when y == x (both directions); gathers and
// scatters need distinct buffers.
// `work` (last-dim gathers only): scratch of at least p * numel(slice) elements of the
// same dtype on the same device, planned by the caller (no allocation in the step).
// Reductions need f32/f64/i32/bf16; dx OVERWRITES (activation gradients).
// `wire` (the ops that communicate): the dtype on the wire. BF16 with f32 tensors
// (train.precision=bf16, docs/training.md, "Numerics"): the f32 values are converted to bf16 into
// the communicator's staging buffers, communicated (half the bytes; a reduction rounds
// each of its steps to bf16) and converted back. Exact for data movement of bf16-valued
// activations; a reduction of f32 partial sums rounds them first. F32: as they are.
// The staging buffers belong to the communicator, so its bf16 region ops must run one
// at a time: issued from one stream, or from a second one ordered by events with it (the
// training step issues its TP collectives from `llm`, and the input-gradient reductions
// from a side stream that `llm` forks and joins: nn/tp_side.h).
#pragma once
#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace vlm {

void copy_to_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x);
void copy_to_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy,
                             DType wire = DType::F32);

void reduce_from_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                DType wire = DType::F32);
void reduce_from_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy);

void scatter_to_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x);
void scatter_to_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy,
                                const Tensor& work, DType wire = DType::F32);

void gather_from_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                const Tensor& work, DType wire = DType::F32);
void gather_from_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy);

void gather_from_sequence_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                         DType wire = DType::F32);
void gather_from_sequence_region_backward(Stream& s, Communicator& comm, const Tensor& dx, const Tensor& dy,
                                          DType wire = DType::F32);

void reduce_scatter_to_sequence_region_forward(Stream& s, Communicator& comm, const Tensor& y, const Tensor& x,
                                               DType wire = DType::F32);
void reduce_scatter_to_sequence_region_backward(Stream& s, Communicator& comm, const Tensor& dx,
                                                const Tensor& dy, DType wire = DType::F32);

}  // namespace vlm
