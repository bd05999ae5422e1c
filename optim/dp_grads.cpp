// DpGrads (optim/dp_grads.h).
#include "optim/dp_grads.h"

#include <algorithm>

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

Tensor flat_f32(const Arena& a) {
  VLM_ASSERT(a.bytes() % 4 == 0, "arena ", a.name(), " of f32 elements");
  return a.storage().reinterpret(DType::F32, Shape{int64_t(a.bytes() / 4)});
}

DpGrads::DpGrads(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, Communicator& dp,
                 int zero, double bucket_mb, Backend& backend, DType wire)
    : modules_(modules), dp_(dp), zero_(effective_zero(zero, dp.size())), bucket_mb_(bucket_mb), wire_(wire) {
  VLM_ASSERT(wire == DType::F32 || wire == DType::BF16, "DP gradient wire dtype ", dtype_name(wire));
  const int64_t p = dp.size(), r = dp.rank();
  VLM_ASSERT(trainable.size() == modules.size(), "one trainable flag per module");
  for (size_t i = 0; i < modules_.size(); ++i) {
    const ModuleParams& m = modules_[i];
    if (!trainable[i]) {
      owned_.push_back({}), gather_tmp_.push_back({}), wire_buf_.push_back({});
      continue;
    }
    VLM_ASSERT(m.table->dtype() == DType::F32, "DP reduction of f32 tables");
    const int64_t n = int64_t(m.table->grad_arena().bytes() / 4);
    Owned o;
    if (zero_ == 0) {
      o.begin = 0, o.end = n, o.grad = flat_f32(m.table->grad_arena());
    } else {
      const DpShare d = dp_share(n, int(p), int(r));
      o.begin = d.block.begin, o.end = d.block.end, o.tail_begin = d.tail.begin, o.tail_end = d.tail.end;
      o.grad = Tensor::zeros(backend, Shape{d.block.size() + d.tail.size()});
    }
    // BF16: the gradients' bf16 copy, then (zero = 1) room for the reduced shard.
    const bool bf = wire_ == DType::BF16 && p > 1;
    wire_buf_.push_back(bf ? Tensor::zeros(backend, Shape{n + (o.end - o.begin)}, DType::BF16) : Tensor{});
    owned_.push_back(o);
    gather_tmp_.push_back(zero_ ? Tensor::zeros(backend, Shape{std::max<int64_t>(1, o.end - o.begin)}) : Tensor{});
  }
}

size_t DpGrads::bytes(size_t i) const {
  const int64_t n = int64_t(modules_[i].table->grad_arena().bytes() / 4);
  if (dp_.size() == 1) return 0;
  const size_t e = dtype_size(wire_);
  if (zero_ == 0) return size_t(n) * e;
  const Owned& o = owned_[i];
  return size_t(o.tail_begin + (o.tail_end - o.tail_begin)) * e;  // reduce-scatter input + tail
}

size_t DpGrads::wire_bytes() const {
  size_t n = 0;
  for (const Tensor& t : wire_buf_)
    if (t.defined()) n += t.nbytes();
  return n;
}

int64_t DpGrads::bucket_elems() const {
  return std::max<int64_t>(1, int64_t(bucket_mb_ * 1024 * 1024 / double(dtype_size(wire_))));
}

void DpGrads::reduce_range(Stream& s, size_t i, int64_t begin, int64_t end) {
  const Tensor grads = flat_f32(modules_[i].table->grad_arena());
  VLM_ASSERT(zero_ == 0, "reduce_range under ZeRO-1");
  VLM_ASSERT(0 <= begin && begin <= end && end <= grads.numel(), "reduce_range [", begin, ", ", end, ") of ",
             grads.numel());
  if (dp_.size() == 1 || begin == end) return;
  const int64_t n = end - begin;
  // What goes on the wire: the f32 gradients, or their bf16 copy.
  const bool bf = wire_ == DType::BF16;
  const Tensor g = grads.sub(begin, Shape{n});
  const Tensor w = bf ? wire_buf_[i].sub(begin, Shape{n}) : g;
  if (bf) convert(s, w, g);
  const int64_t chunk = bucket_elems();
  std::vector<CommWork> work;
  for (int64_t at = 0; at < n; at += chunk)
    work.push_back(dp_.all_reduce_async(s, w.sub(at, Shape{std::min(chunk, n - at)})));
  for (CommWork& c : work) c->wait();
  if (bf) convert(s, g, w);  // the sums, back in the f32 gradients
}

void DpGrads::reduce(Stream& s, size_t i) {
  const Tensor grads = flat_f32(modules_[i].table->grad_arena());
  const int64_t n = grads.numel();
  const Owned& o = owned_[i];
  if (dp_.size() == 1) return;
  if (zero_ == 0) return reduce_range(s, i, 0, n);
  // What goes on the wire: the f32 gradients, or their bf16 copy.
  const bool bf = wire_ == DType::BF16;
  const Tensor all = bf ? wire_buf_[i].sub(0, Shape{n}) : grads;
  if (bf) convert(s, all, grads);
  const int64_t blk = o.end - o.begin, tail = o.tail_end - o.tail_begin;
  if (blk > 0) {
    const Tensor shard = bf ? wire_buf_[i].sub(n, Shape{blk}) : o.grad.sub(0, Shape{blk});
    dp_.reduce_scatter(s, shard, all.sub(0, Shape{o.tail_begin}));
    if (bf) convert(s, o.grad.sub(0, Shape{blk}), shard);
  }
  if (tail > 0) {
    const Tensor t = all.sub(o.tail_begin, Shape{tail});
    dp_.all_reduce(s, t);
    if (bf)
      convert(s, o.grad.sub(blk, Shape{tail}), t);
    else
      copy(s, o.grad.sub(blk, Shape{tail}), t);
  }
}

void DpGrads::gather_values(Stream& s, size_t i) {
  if (zero_ == 0) return;
  const Owned& o = owned_[i];
  const int64_t blk = o.end - o.begin;
  if (blk == 0) return;
  const Tensor all = flat_f32(modules_[i].table->value_arena());
  copy(s, gather_tmp_[i].sub(0, Shape{blk}), all.sub(o.begin, Shape{blk}));
  dp_.all_gather(s, all.sub(0, Shape{o.tail_begin}), gather_tmp_[i].sub(0, Shape{blk}));
}

}  // namespace vlm
