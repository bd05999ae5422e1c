// The checks of every Communicator collective and point-to-point operation, on tensors of
// any backend (made on the host, copied to the backend, read back): hand-computed
// results, asynchronous handles, and the byte counters against the formula of
// parallel/communicator.h. Values: group rank r holds 10*r + i at index i (closed forms
// below use p = group size). Used by test_collectives.cpp (MPI, host tensors) and
// test_nccl_cuda.cpp (NCCL, device tensors).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace vlm::test {

// start + i * step at index i, on backend b.
template <typename T>
Tensor iota(Backend& b, int64_t n, T start, T step) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + T(i) * step;
  return to_backend(b, Tensor::from_vector(v, Shape{n}));
}

// The values of t (on any device), read on the host.
template <typename T>
std::vector<T> values(const Tensor& t) {
  const Tensor h = to_host(t);
  const T* p = h.ptr<T>();
  return {p, p + h.numel()};
}

template <typename T>
inline void check_all_reduce(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  Stream& s = b.default_stream();
  Tensor x = iota<T>(b, 4, T(10 * r), T(1)), y = iota<T>(b, 4, T(10 * r), T(1));
  c.all_reduce(s, x, ReduceOp::Sum);
  c.all_reduce(s, y, ReduceOp::Max);
  const std::vector<T> vx = values<T>(x), vy = values<T>(y);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(vx[size_t(i)], T(10 * p * (p - 1) / 2 + p * i)) << c.name();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(vy[size_t(i)], T(10 * (p - 1) + i)) << c.name();
}

template <typename T>
inline void check_all_gather(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  Tensor in = iota<T>(b, 3, T(10 * r), T(1)), out = iota<T>(b, 3 * p, T(-1), T(0));
  c.all_gather(b.default_stream(), out, in);
  const std::vector<T> v = values<T>(out);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(v[size_t(3 * q + i)], T(10 * q + i)) << c.name();
}

template <typename T>
inline void check_reduce_scatter(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  Stream& s = b.default_stream();
  // in[j] = 100*r + j over p blocks of 2; block `rank` summed: 100 p(p-1)/2 + p (2 rank + i).
  Tensor in = iota<T>(b, 2 * p, T(100 * r), T(1)), out = iota<T>(b, 2, T(-1), T(0));
  c.reduce_scatter(s, out, in, ReduceOp::Sum);
  std::vector<T> v = values<T>(out);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(v[size_t(i)], T(100 * p * (p - 1) / 2 + p * (2 * r + i)));
  c.reduce_scatter(s, out, in, ReduceOp::Max);
  v = values<T>(out);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(v[size_t(i)], T(100 * (p - 1) + 2 * r + i));
}

template <typename T>
inline void check_broadcast(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  Tensor x = iota<T>(b, 5, T(10 * r), T(1));
  c.broadcast(b.default_stream(), x, p - 1);
  const std::vector<T> v = values<T>(x);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(v[size_t(i)], T(10 * (p - 1) + i)) << c.name();
}

// Ring: every rank sends to r+1 and receives from r-1 (async, then wait).
inline void check_send_recv(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  Stream& s = b.default_stream();
  Tensor out = iota<float>(b, 3, float(10 * r), 1.f), in = iota<float>(b, 3, -1.f, 0.f);
  CommWork rx = c.recv_async(s, in, (r + p - 1) % p);
  CommWork tx = c.send_async(s, out, (r + 1) % p);
  tx->wait();
  rx->wait();
  const int from = (r + p - 1) % p;
  EXPECT_EQ(values<float>(in), (std::vector<float>{10.f * from, 10.f * from + 1, 10.f * from + 2}));
  // Blocking pairs: even ranks send first, odd ranks receive first (p is even here).
  Tensor pair = iota<float>(b, 2, float(r), 0.f);
  if (r % 2 == 0) {
    c.send(s, pair, r + 1);
    c.recv(s, pair, r + 1);
    EXPECT_EQ(values<float>(pair), (std::vector<float>{float(r + 1), float(r + 1)}));
  } else {
    Tensor got = iota<float>(b, 2, -1.f, 0.f);
    c.recv(s, got, r - 1);
    c.send(s, pair, r - 1);
    EXPECT_EQ(values<float>(got), (std::vector<float>{float(r - 1), float(r - 1)}));
  }
}

inline void check_everything(Communicator& c, Backend& b) {
  SCOPED_TRACE(c.name());
  check_all_reduce<float>(c, b);
  check_all_reduce<double>(c, b);
  check_all_reduce<int32_t>(c, b);
  check_all_gather<float>(c, b);
  check_all_gather<int32_t>(c, b);
  check_reduce_scatter<float>(c, b);
  check_reduce_scatter<double>(c, b);
  check_reduce_scatter<int32_t>(c, b);
  check_broadcast<float>(c, b);
  check_broadcast<double>(c, b);
  check_send_recv(c, b);
  c.barrier(b.default_stream());
}

// Handles waited in reverse order complete; a dropped handle waits.
inline void check_async_handles(Communicator& c, Backend& b) {
  const int p = c.size(), r = c.rank();
  Stream& s = b.default_stream();
  std::vector<Tensor> xs;
  std::vector<CommWork> works;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(iota<float>(b, 8, float(r + k), 0.f));
    works.push_back(c.all_reduce_async(s, xs.back()));
  }
  Tensor x = iota<float>(b, 2, float(r), 0.f);
  works.push_back(c.broadcast_async(s, x, 0));
  works.push_back(c.barrier_async(s));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (int k = 0; k < 4; ++k)  // sum over r of (r + k) = p(p-1)/2 + p k
    for (float v : values<float>(xs[size_t(k)])) EXPECT_EQ(v, float(p * (p - 1) / 2 + p * k));
  EXPECT_EQ(values<float>(x), (std::vector<float>{0.f, 0.f}));
  { CommWork dropped = c.all_reduce_async(s, x); }  // a dropped handle waits
  EXPECT_EQ(values<float>(x), (std::vector<float>{0.f, 0.f}));
}

// The byte counters of one call of each kind against the formula of communicator.h;
// `print`: the counters of this rank are printed.
inline void check_byte_counters(Communicator& c, Backend& b, bool print) {
  SCOPED_TRACE(c.name());
  const int p = c.size(), r = c.rank();
  Stream& s = b.default_stream();
  c.reset_counters();
  Tensor f5 = iota<float>(b, 5, 1.f, 0.f);
  c.all_reduce(s, f5);  // 5 * 4 = 20 B
  c.all_reduce(s, f5, ReduceOp::Max);  // 20 B
  Tensor in3 = iota<float>(b, 3, 0.f, 1.f), out3 = iota<float>(b, 3 * p, 0.f, 0.f);
  c.all_gather(s, out3, in3);  // 3 * 4 = 12 B
  Tensor rs_in = iota<double>(b, 2 * p, 0.0, 1.0), rs_out = iota<double>(b, 2, 0.0, 0.0);
  c.reduce_scatter(s, rs_out, rs_in);  // 2p * 8 = 16p B
  Tensor i4 = iota<int32_t>(b, 4, 0, 1);
  c.broadcast(s, i4, 0);  // 4 * 4 = 16 B
  Tensor f6 = iota<float>(b, 6, 0.f, 0.f);
  if (p > 1) {
    if (r % 2 == 0) c.send(s, f6, r + 1);  // 24 B
    else c.recv(s, f6, r - 1);            // 24 B
  }
  c.barrier(s);  // 0 B
  const CommCounters& k = c.counters();
  EXPECT_EQ(k.bytes_of(CollKind::AllReduce), 40u);
  EXPECT_EQ(k.calls_of(CollKind::AllReduce), 2u);
  EXPECT_EQ(k.bytes_of(CollKind::AllGather), 12u);
  EXPECT_EQ(k.bytes_of(CollKind::ReduceScatter), uint64_t(16 * p));
  EXPECT_EQ(k.bytes_of(CollKind::Broadcast), 16u);
  EXPECT_EQ(k.bytes_of(CollKind::Send), (p > 1 && r % 2 == 0) ? 24u : 0u);
  EXPECT_EQ(k.bytes_of(CollKind::Recv), (p > 1 && r % 2 == 1) ? 24u : 0u);
  EXPECT_EQ(k.bytes_of(CollKind::Barrier), 0u);
  EXPECT_EQ(k.calls_of(CollKind::Barrier), 1u);
  EXPECT_EQ(k.total_bytes(), uint64_t(40 + 12 + 16 * p + 16 + (p > 1 ? 24 : 0)));
  if (print) std::printf("bytes on %s (p=%d, rank 0): %s\n", c.name().c_str(), p, k.str().c_str());
}

}  // namespace vlm::test
