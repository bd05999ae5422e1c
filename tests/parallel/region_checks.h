// The checks of every tensor-parallel region operator, forward and backward, against
// the math it claims (parallel/regions.h), with the f32 and the bf16 wire, on tensors of
// any backend (made on the host, copied to the backend, read back). Values are small
// integers (or quarters, for bf16), exact in f32: rank r holds f(r, n, k) at row n,
// column k. Used by test_regions.cpp (MPI, host tensors) and test_nccl_cuda.cpp (NCCL,
// device tensors).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/communicator.h"
#include "parallel/regions.h"

namespace vlm::test {

using Fill = std::function<float(int64_t n, int64_t k)>;

// rows x cols values f(n, k) on backend b.
inline Tensor make(Backend& b, int64_t rows, int64_t cols, const Fill& f) {
  std::vector<float> v(size_t(rows * cols));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) v[size_t(n * cols + k)] = f(n, k);
  return to_backend(b, Tensor::from_vector(v, Shape{rows, cols}));
}

// t (on any device) holds f(n, k) exactly.
inline void expect_values(const Tensor& t, const Fill& f, const char* what) {
  const Tensor h = to_host(t);
  const float* p = h.ptr<float>();
  for (int64_t n = 0; n < t.rows(); ++n)
    for (int64_t k = 0; k < t.cols(); ++k)
      ASSERT_EQ(p[n * t.cols() + k], f(n, k)) << what << " at [" << n << "," << k << "]";
}

// N = 2 rows, c = 3 columns per rank (last-dim split).
inline void check_regions(Communicator& comm, Backend& b) {
  SCOPED_TRACE(comm.name());
  Stream& s = b.default_stream();
  const int64_t N = 2, c = 3;
  const int64_t p = comm.size(), r = comm.rank(), C = c * p;
  const float tri = float(p * (p - 1) / 2);  // sum of ranks
  comm.reset_counters();

  // copy_to_region: fwd y = x; bwd dx = sum_ranks dy.
  const Fill per_rank = [&](int64_t n, int64_t k) { return float(100 * r + 10 * n + k); };
  const Fill summed = [&](int64_t n, int64_t k) { return 100 * tri + float(p * (10 * n + k)); };
  Tensor x = make(b, N, C, per_rank), y = make(b, N, C, [](int64_t, int64_t) { return -1.f; });
  copy_to_region_forward(s, comm, y, x);
  expect_values(y, per_rank, "copy_to fwd");
  copy_to_region_forward(s, comm, x, x);  // aliasing: nothing to do
  expect_values(x, per_rank, "copy_to fwd in place");
  copy_to_region_backward(s, comm, y, x);
  expect_values(y, summed, "copy_to bwd");

  // reduce_from_region: fwd y = sum_ranks x; bwd dx = dy.
  reduce_from_region_forward(s, comm, y, x);
  expect_values(y, summed, "reduce_from fwd");
  reduce_from_region_backward(s, comm, y, x);
  expect_values(y, per_rank, "reduce_from bwd");
  reduce_from_region_forward(s, comm, x, x);  // in place
  expect_values(x, summed, "reduce_from fwd in place");

  // scatter_to_region: fwd y[N,c] = x[N,C][:, r c:(r+1) c] (x replicated);
  // bwd dx[N,C][:, q c + j] = dy_q[N,c][:, j].
  const Fill replicated = [](int64_t n, int64_t k) { return float(10 * n + k); };
  Tensor xr = make(b, N, C, replicated), part = make(b, N, c, [](int64_t, int64_t) { return -1.f; });
  scatter_to_region_forward(s, comm, part, xr);
  expect_values(part, [&](int64_t n, int64_t j) { return float(10 * n + r * c + j); }, "scatter_to fwd");
  Tensor dpart = make(b, N, c, per_rank), work = make(b, p * N, c, [](int64_t, int64_t) { return 0.f; });
  Tensor whole = make(b, N, C, [](int64_t, int64_t) { return -1.f; });
  const Fill concat = [&](int64_t n, int64_t k) { return float(100 * (k / c) + 10 * n + k % c); };
  scatter_to_region_backward(s, comm, whole, dpart, work);
  expect_values(whole, concat, "scatter_to bwd");

  // gather_from_region: fwd y[N,C] = concat_cols(x_q); bwd dx[N,c] = dy[:, r c:(r+1) c].
  whole = make(b, N, C, [](int64_t, int64_t) { return -1.f; });
  gather_from_region_forward(s, comm, whole, dpart, work);
  expect_values(whole, concat, "gather_from fwd");
  gather_from_region_backward(s, comm, part, xr);
  expect_values(part, [&](int64_t n, int64_t j) { return float(10 * n + r * c + j); }, "gather_from bwd");

  // Sequence parallel, t = 2 rows per rank, T = p t, 3 columns.
  const int64_t t = 2, T = p * t, D = 3;
  const Fill seq_rank = [&](int64_t i, int64_t k) { return float(100 * r + 10 * i + k); };
  const Fill seq_concat = [&](int64_t m, int64_t k) { return float(100 * (m / t) + 10 * (m % t) + k); };
  // dy on rank r: 1000 r + 10 m + k; block r of the sum: 1000 tri + p (10 (r t + i) + k).
  const Fill big_rank = [&](int64_t m, int64_t k) { return float(1000 * r + 10 * m + k); };
  const Fill seq_summed = [&](int64_t i, int64_t k) { return 1000 * tri + float(p * (10 * (r * t + i) + k)); };
  Tensor xs = make(b, t, D, seq_rank), ys = make(b, T, D, [](int64_t, int64_t) { return -1.f; });
  gather_from_sequence_region_forward(s, comm, ys, xs);
  expect_values(ys, seq_concat, "gather_from_sequence fwd");
  Tensor dys = make(b, T, D, big_rank), dxs = make(b, t, D, [](int64_t, int64_t) { return -1.f; });
  gather_from_sequence_region_backward(s, comm, dxs, dys);
  expect_values(dxs, seq_summed, "gather_from_sequence bwd");
  reduce_scatter_to_sequence_region_forward(s, comm, dxs, dys);
  expect_values(dxs, seq_summed, "reduce_scatter_to_sequence fwd");
  reduce_scatter_to_sequence_region_backward(s, comm, ys, xs);
  expect_values(ys, seq_concat, "reduce_scatter_to_sequence bwd");

  // Communication volume (bytes of local inputs, communicator.h): all-reduces of
  // copy_to bwd + 2 x reduce_from fwd ([N,C] f32 each); all-gathers of scatter bwd,
  // gather fwd ([N,c]) and 2 sequence gathers ([t,D]); reduce-scatters of [T,D] x 2.
  // A group of one rank communicates nothing.
  const CommCounters& k = comm.counters();
  const uint64_t q = p > 1 ? 1 : 0;
  EXPECT_EQ(k.bytes_of(CollKind::AllReduce), q * 3 * N * C * 4);
  EXPECT_EQ(k.calls_of(CollKind::AllReduce), q * 3);
  EXPECT_EQ(k.bytes_of(CollKind::AllGather), q * (2 * N * c * 4 + 2 * t * D * 4));
  EXPECT_EQ(k.bytes_of(CollKind::ReduceScatter), q * 2 * T * D * 4);
  EXPECT_EQ(k.total_bytes(), q * (3 * N * C * 4 + 2 * N * c * 4 + 2 * t * D * 4 + 2 * T * D * 4));
}

// The bf16 wire (regions.h `wire`): every communicating op with values that bf16 holds
// exactly (sums of quarters below 64: 8 significant bits) gives the f32 result bitwise,
// in half the bytes; a gathered value that bf16 does not hold arrives rounded once.
inline void check_bf16_wire(Communicator& comm, Backend& b) {
  SCOPED_TRACE(comm.name());
  Stream& s = b.default_stream();
  const int64_t N = 2, c = 3;
  const int64_t p = comm.size(), r = comm.rank(), C = c * p, t = 2, T = p * t;
  const DType bf = DType::BF16;
  comm.reset_counters();
  const Fill per_rank = [&](int64_t n, int64_t k) { return float(r % 4) + 0.5f * float(n) + 0.25f * float(k % 2); };
  float tot = 0;
  for (int64_t q = 0; q < p; ++q) tot += float(q % 4);
  const Fill summed = [&](int64_t n, int64_t k) { return tot + float(p) * (0.5f * float(n) + 0.25f * float(k % 2)); };
  const Fill junk = [](int64_t, int64_t) { return -1.f; };
  Tensor x = make(b, N, C, per_rank), y = make(b, N, C, junk);
  copy_to_region_backward(s, comm, y, x, bf);
  expect_values(y, summed, "copy_to bwd bf16");
  y = make(b, N, C, junk);
  reduce_from_region_forward(s, comm, y, x, bf);
  expect_values(y, summed, "reduce_from fwd bf16");
  // Last-dim gathers: rank q's block holds q's values.
  Tensor part = make(b, N, c, per_rank), whole = make(b, N, C, junk), work = make(b, p * N, c, junk);
  const Fill concat = [&](int64_t n, int64_t k) {
    return float((k / c) % 4) + 0.5f * float(n) + 0.25f * float((k % c) % 2);
  };
  gather_from_region_forward(s, comm, whole, part, work, bf);
  expect_values(whole, concat, "gather_from fwd bf16");
  whole = make(b, N, C, junk);
  scatter_to_region_backward(s, comm, whole, part, work, bf);
  expect_values(whole, concat, "scatter_to bwd bf16");
  // Sequence parallel: rows of rank q are q's.
  Tensor xs = make(b, t, c, per_rank), ys = make(b, T, c, junk), dxs = make(b, t, c, junk);
  const Fill seq_concat = [&](int64_t m, int64_t k) {
    return float((m / t) % 4) + 0.5f * float(m % t) + 0.25f * float(k % 2);
  };
  gather_from_sequence_region_forward(s, comm, ys, xs, bf);
  expect_values(ys, seq_concat, "gather_from_sequence fwd bf16");
  ys = make(b, T, c, junk);
  reduce_scatter_to_sequence_region_backward(s, comm, ys, xs, bf);
  expect_values(ys, seq_concat, "reduce_scatter_to_sequence bwd bf16");
  const Fill big = [&](int64_t m, int64_t k) { return float(r % 4) + 0.5f * float(m % 2) + 0.25f * float(k % 2); };
  const Fill big_sum = [&](int64_t i, int64_t k) { return tot + float(p) * (0.5f * float(i % 2) + 0.25f * float(k % 2)); };
  Tensor dys = make(b, T, c, big);
  reduce_scatter_to_sequence_region_forward(s, comm, dxs, dys, bf);
  expect_values(dxs, big_sum, "reduce_scatter_to_sequence fwd bf16");
  dxs = make(b, t, c, junk);
  gather_from_sequence_region_backward(s, comm, dxs, dys, bf);
  expect_values(dxs, big_sum, "gather_from_sequence bwd bf16");
  // A value bf16 does not hold: gathered as bf16(1 + 2^-10) = 1 (rounded once, to even).
  Tensor odd = make(b, t, c, [](int64_t, int64_t) { return 1.f + 0x1p-10f; });
  ys = make(b, T, c, junk);
  gather_from_sequence_region_forward(s, comm, ys, odd, bf);
  expect_values(ys, [&](int64_t, int64_t) { return p > 1 ? 1.f : 1.f + 0x1p-10f; }, "rounded on the wire");

  // Bytes: the f32 formula of check_regions at 2 bytes per element (2 all-reduces of
  // [N,C]; all-gathers of 2 x [N,c] and 3 x [t,c]; reduce-scatters of 2 x [T,c]).
  const CommCounters& k = comm.counters();
  const uint64_t q = p > 1 ? 1 : 0;
  EXPECT_EQ(k.bytes_of(CollKind::AllReduce), q * 2 * N * C * 2);
  EXPECT_EQ(k.bytes_of(CollKind::AllGather), q * (2 * N * c * 2 + 3 * t * c * 2));
  EXPECT_EQ(k.bytes_of(CollKind::ReduceScatter), q * 2 * T * c * 2);
}

}  // namespace vlm::test
