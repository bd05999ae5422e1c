// Communicator base: argument validation and the byte counters (rule in
// communicator.h), shared by every implementation so they count alike.
#include "parallel/communicator.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace vlm {

namespace {
// True when the byte ranges of a and b intersect (MPI and NCCL forbid aliasing there).
bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data());
  const auto* pb = static_cast<const char*>(b.data());
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}
}  // namespace

const char* coll_name(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "all_reduce";
    case CollKind::AllGather: return "all_gather";
    case CollKind::ReduceScatter: return "reduce_scatter";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Send: return "send";
    case CollKind::Recv: return "recv";
    case CollKind::Barrier: return "barrier";
  }
  return "?";
}

uint64_t CommCounters::total_bytes() const {
  uint64_t t = 0;
  for (uint64_t b : bytes) t += b;
  return t;
}

CommCounters& CommCounters::operator+=(const CommCounters& o) {
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] += o.bytes[k], calls[k] += o.calls[k];
  return *this;
}

std::string CommCounters::str() const {
  std::string s;
  for (int k = 0; k < kNumCollKinds; ++k) {
    if (calls[size_t(k)] == 0) continue;
    if (!s.empty()) s += ", ";
    s += cat(coll_name(CollKind(k)), " ", bytes[size_t(k)], " B / ", calls[size_t(k)], " calls");
  }
  return s.empty() ? "no calls" : s;
}

Communicator::Communicator(std::string name, int world_rank, double timeout_s)
    : name_(std::move(name)), world_rank_(world_rank), timeout_s_(timeout_s) {
  VLM_ASSERT(timeout_s_ > 0, "timeout_s=", timeout_s_);
}

std::string Communicator::timeout_message(CollKind kind) const {
  return cat("collective ", coll_name(kind), " on group ", name_, " (group rank ", rank(), " of ", size(),
             ", world rank ", world_rank_, ") did not complete within ", timeout_s_,
             " s (parallel.timeout_s): a rank is missing, dead or stuck; aborting all ranks");
}

void Communicator::check_tensor(CollKind k, Stream& s, const Tensor& t, bool reduction) const {
  VLM_ASSERT(s.device() == device(), coll_name(k), " on group ", name_, ": stream '", s.name(), "' is on ",
             device_name(s.device()), ", the communicator on ", device_name(device()));
  VLM_ASSERT(t.device() == device(), coll_name(k), " on group ", name_, ": tensor ", t.str(), " is not on ",
             device_name(device()));
  VLM_ASSERT(t.data() != nullptr || t.numel() == 0, coll_name(k), " on group ", name_, ": undefined tensor");
  if (reduction) {
    const DType d = t.dtype();
    const bool ok = d == DType::F32 || d == DType::F64 || d == DType::I32 || d == DType::BF16;
    VLM_ASSERT(ok, coll_name(k), " on group ", name_, ": no reduction for dtype ", dtype_name(d), " on ",
               device_name(device()));
  }
}

Tensor Communicator::staging(int slot, int64_t n, DType dt) {
  VLM_ASSERT(slot == 0 || slot == 1, "staging slot ", slot);
  Tensor& t = staging_[size_t(slot)];
  if (!t.defined() || t.dtype() != dt || t.numel() < n) t = Tensor::empty(backend_for(device()), Shape{n}, dt);
  return t.sub(0, Shape{n});
}

void Communicator::count(CollKind k, size_t bytes) {
  counters_.bytes[size_t(k)] += bytes;
  counters_.calls[size_t(k)] += 1;
}

CommWork Communicator::all_reduce_async(Stream& s, const Tensor& x, ReduceOp op) {
  check_tensor(CollKind::AllReduce, s, x, true);
  count(CollKind::AllReduce, x.nbytes());
  return post_all_reduce(s, x, op);
}

CommWork Communicator::all_gather_async(Stream& s, const Tensor& out, const Tensor& in) {
  check_tensor(CollKind::AllGather, s, out, false);
  check_tensor(CollKind::AllGather, s, in, false);
  VLM_ASSERT(out.dtype() == in.dtype() && out.numel() == in.numel() * size(), "all_gather on group ", name(),
             ": out ", out.str(), " must hold ", size(), " x in ", in.str());
  VLM_ASSERT(!overlaps(out, in), "all_gather on group ", name(), ": out and in overlap");
  count(CollKind::AllGather, in.nbytes());
  return post_all_gather(s, out, in);
}

CommWork Communicator::reduce_scatter_async(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor(CollKind::ReduceScatter, s, out, true);
  check_tensor(CollKind::ReduceScatter, s, in, true);
  VLM_ASSERT(out.dtype() == in.dtype() && in.numel() == out.numel() * size(), "reduce_scatter on group ",
             name(), ": in ", in.str(), " must hold ", size(), " x out ", out.str());
  VLM_ASSERT(!overlaps(out, in), "reduce_scatter on group ", name(), ": out and in overlap");
  count(CollKind::ReduceScatter, in.nbytes());
  return post_reduce_scatter(s, out, in, op);
}

CommWork Communicator::broadcast_async(Stream& s, const Tensor& x, int root) {
  check_tensor(CollKind::Broadcast, s, x, false);
  VLM_ASSERT(root >= 0 && root < size(), "broadcast on group ", name(), ": root ", root, " of ", size());
  count(CollKind::Broadcast, x.nbytes());
  return post_broadcast(s, x, root);
}

CommWork Communicator::send_async(Stream& s, const Tensor& x, int peer) {
  check_tensor(CollKind::Send, s, x, false);
  VLM_ASSERT(peer >= 0 && peer < size() && peer != rank(), "send on group ", name(), ": peer ", peer);
  count(CollKind::Send, x.nbytes());
  return post_send(s, x, peer);
}

CommWork Communicator::recv_async(Stream& s, const Tensor& x, int peer) {
  check_tensor(CollKind::Recv, s, x, false);
  VLM_ASSERT(peer >= 0 && peer < size() && peer != rank(), "recv on group ", name(), ": peer ", peer);
  count(CollKind::Recv, x.nbytes());
  return post_recv(s, x, peer);
}

CommWork Communicator::barrier_async(Stream& s) {
  VLM_ASSERT(s.device() == device(), "barrier on group ", name(), ": stream on the wrong device");
  count(CollKind::Barrier, 0);
  return post_barrier(s);
}

std::vector<std::string> all_gather_strings(Communicator& c, Stream& s, const std::string& mine) {
  Backend& b = backend_for(c.device());
  const std::vector<double> lens = all_reduce_values(c, s, std::vector<double>(1, double(mine.size())), ReduceOp::Max);
  const int64_t n = int64_t(lens[0]) + 1, p = c.size();
  std::vector<uint8_t> buf(size_t(n), 0);
  std::copy(mine.begin(), mine.end(), buf.begin());
  const Tensor in = Tensor::empty(b, Shape{n}, DType::U8), out = Tensor::empty(b, Shape{p * n}, DType::U8);
  b.copy(in.data(), b.device(), buf.data(), DeviceKind::CPU, size_t(n));
  c.all_gather(s, out, in);
  s.synchronize();
  std::vector<uint8_t> all(size_t(p * n));
  b.copy(all.data(), DeviceKind::CPU, out.data(), b.device(), all.size());
  std::vector<std::string> r;
  for (int64_t i = 0; i < p; ++i) r.emplace_back(reinterpret_cast<const char*>(all.data() + i * n));
  return r;
}

std::vector<double> all_reduce_values(Communicator& c, Stream& s, const std::vector<double>& v, ReduceOp op) {
  if (v.empty()) return v;
  Backend& b = backend_for(c.device());
  const Tensor t = Tensor::empty(b, Shape{int64_t(v.size())}, DType::F64);
  b.copy(t.data(), b.device(), v.data(), DeviceKind::CPU, v.size() * sizeof(double));
  c.all_reduce(s, t, op);
  s.synchronize();
  return to_vector_f64(t);
}

}  // namespace vlm
