// Every collective of the MPI communicator against hand-computed results on host
// tensors (f32, f64, i32), on the world group and on the TP and DP groups of a TP=2
// layout (at 2 ranks the DP group has size 1); the asynchronous handles; and the byte
// counters against the formula of communicator.h. Values: group rank r holds
// 10*r + i at index i (closed forms below use p = group size).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "parallel/runtime.h"

namespace vlm {
namespace {

Stream& host() { return cpu_backend().default_stream(); }

// The host groups of a TP=2 layout (nodes detected), started once per binary.
RuntimeOptions tp2() {
  RuntimeOptions o;  // device cpu
  o.parallel.tp = 2;
  o.parallel.timeout_s = 60;
  return o;
}
ProcessGroups& groups() {
  static Runtime rt = start_runtime(tp2());
  return rt.groups();
}

template <typename T>
Tensor iota(int64_t n, T start, T step) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + T(i) * step;
  return Tensor::from_vector(v, Shape{n});
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.ptr<T>();
  return {p, p + t.numel()};
}

template <typename T>
void check_all_reduce(Communicator& c) {
  const int p = c.size(), r = c.rank();
  Tensor x = iota<T>(4, T(10 * r), T(1));
  c.all_reduce(host(), x, ReduceOp::Sum);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(values<T>(x)[size_t(i)], T(10 * p * (p - 1) / 2 + p * i)) << c.name();
  Tensor y = iota<T>(4, T(10 * r), T(1));
  c.all_reduce(host(), y, ReduceOp::Max);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(values<T>(y)[size_t(i)], T(10 * (p - 1) + i)) << c.name();
}

template <typename T>
void check_all_gather(Communicator& c) {
  const int p = c.size(), r = c.rank();
  Tensor in = iota<T>(3, T(10 * r), T(1));
  Tensor out = iota<T>(3 * p, T(-1), T(0));
  c.all_gather(host(), out, in);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(values<T>(out)[size_t(3 * q + i)], T(10 * q + i)) << c.name();
}

template <typename T>
void check_reduce_scatter(Communicator& c) {
  const int p = c.size(), r = c.rank();
  // in[j] = 100*r + j over p blocks of 2; block `rank` summed: 100 p(p-1)/2 + p (2 rank + i).
  Tensor in = iota<T>(2 * p, T(100 * r), T(1));
  Tensor out = iota<T>(2, T(-1), T(0));
  c.reduce_scatter(host(), out, in, ReduceOp::Sum);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(values<T>(out)[size_t(i)], T(100 * p * (p - 1) / 2 + p * (2 * r + i)));
  c.reduce_scatter(host(), out, in, ReduceOp::Max);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(values<T>(out)[size_t(i)], T(100 * (p - 1) + 2 * r + i));
}

template <typename T>
void check_broadcast(Communicator& c) {
  const int p = c.size(), r = c.rank();
  Tensor x = iota<T>(5, T(10 * r), T(1));
  c.broadcast(host(), x, p - 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(values<T>(x)[size_t(i)], T(10 * (p - 1) + i)) << c.name();
}

// Ring: every rank sends to r+1 and receives from r-1 (async, then wait).
void check_send_recv(Communicator& c) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  Tensor out = iota<float>(3, float(10 * r), 1.f);
  Tensor in = iota<float>(3, -1.f, 0.f);
  CommWork rx = c.recv_async(host(), in, (r + p - 1) % p);
  CommWork tx = c.send_async(host(), out, (r + 1) % p);
  tx->wait();
  rx->wait();
  const int from = (r + p - 1) % p;
  EXPECT_EQ(values<float>(in), (std::vector<float>{10.f * from, 10.f * from + 1, 10.f * from + 2}));
  // Blocking pairs: even ranks send first, odd ranks receive first (p is even here).
  Tensor pair = iota<float>(2, float(r), 0.f);
  if (r % 2 == 0) {
    c.send(host(), pair, r + 1);
    c.recv(host(), pair, r + 1);
    EXPECT_EQ(values<float>(pair), (std::vector<float>{float(r + 1), float(r + 1)}));
  } else {
    Tensor got = iota<float>(2, -1.f, 0.f);
    c.recv(host(), got, r - 1);
    c.send(host(), pair, r - 1);
    EXPECT_EQ(values<float>(got), (std::vector<float>{float(r - 1), float(r - 1)}));
  }
}

void check_everything(Communicator& c) {
  SCOPED_TRACE(c.name());
  check_all_reduce<float>(c);
  check_all_reduce<double>(c);
  check_all_reduce<int32_t>(c);
  check_all_gather<float>(c);
  check_all_gather<int32_t>(c);
  check_reduce_scatter<float>(c);
  check_reduce_scatter<double>(c);
  check_reduce_scatter<int32_t>(c);
  check_broadcast<float>(c);
  check_broadcast<double>(c);
  check_send_recv(c);
  c.barrier(host());
}

TEST(Collectives, World) { check_everything(groups().world()); }
TEST(Collectives, TensorParallelGroup) { check_everything(groups().tp()); }
TEST(Collectives, DataParallelGroup) { check_everything(groups().dp()); }

TEST(Collectives, AsyncHandlesCompleteInAnyWaitOrder) {
  Communicator& c = groups().world();
  const int p = c.size(), r = c.rank();
  std::vector<Tensor> xs;
  std::vector<CommWork> works;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(iota<float>(8, float(r + k), 0.f));
    works.push_back(c.all_reduce_async(host(), xs.back()));
  }
  Tensor b = iota<float>(2, float(r), 0.f);
  works.push_back(c.broadcast_async(host(), b, 0));
  works.push_back(c.barrier_async(host()));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (int k = 0; k < 4; ++k)  // sum over r of (r + k) = p(p-1)/2 + p k
    for (float v : values<float>(xs[size_t(k)])) EXPECT_EQ(v, float(p * (p - 1) / 2 + p * k));
  EXPECT_EQ(values<float>(b), (std::vector<float>{0.f, 0.f}));
  { CommWork dropped = c.all_reduce_async(host(), b); }  // a dropped handle waits
  EXPECT_EQ(values<float>(b), (std::vector<float>{0.f, 0.f}));
}

TEST(Collectives, ByteCountersFollowTheFormula) {
  for (Communicator* c : {&groups().world(), &groups().tp(), &groups().dp()}) {
    SCOPED_TRACE(c->name());
    const int p = c->size(), r = c->rank();
    c->reset_counters();
    Tensor f5 = iota<float>(5, 1.f, 0.f);
    c->all_reduce(host(), f5);  // 5 * 4 = 20 B
    c->all_reduce(host(), f5, ReduceOp::Max);  // 20 B
    Tensor in3 = iota<float>(3, 0.f, 1.f), out3 = iota<float>(3 * p, 0.f, 0.f);
    c->all_gather(host(), out3, in3);  // 3 * 4 = 12 B
    Tensor rs_in = iota<double>(2 * p, 0.0, 1.0), rs_out = iota<double>(2, 0.0, 0.0);
    c->reduce_scatter(host(), rs_out, rs_in);  // 2p * 8 = 16p B
    Tensor i4 = iota<int32_t>(4, 0, 1);
    c->broadcast(host(), i4, 0);  // 4 * 4 = 16 B
    Tensor f6 = iota<float>(6, 0.f, 0.f);
    if (p > 1) {
      if (r % 2 == 0) c->send(host(), f6, r + 1);  // 24 B
      else c->recv(host(), f6, r - 1);            // 24 B
    }
    c->barrier(host());  // 0 B
    const CommCounters& k = c->counters();
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
    if (groups().topology().world_rank() == 0)
      std::printf("bytes on %s (p=%d, rank 0): %s\n", c->name().c_str(), p, k.str().c_str());
  }
}

}  // namespace
}  // namespace vlm
