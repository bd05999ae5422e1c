// DpGrads (optim/dp_grads.h).
#include "optim/dp_grads.h"

#include <algorithm>

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

namespace {

DType compute_dtype(const ShardRun& r) { return r.bf16 ? DType::BF16 : DType::F32; }

// The room a run's all-gather input may take in a lane's staging buffer: its block in
// f32 (the larger compute dtype), rounded up to 256 bytes.
int64_t staged_bytes(const ShardRun& r) { return (r.block() * 4 + 255) / 256 * 256; }

// Whether `a` lies in the memory of `b`.
bool inside(const Tensor& a, const Tensor& b) {
  const char *pa = static_cast<const char*>(a.data()), *pb = static_cast<const char*>(b.data());
  return pa >= pb && pa < pb + b.nbytes();
}

}  // namespace

DpGrads::DpGrads(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, Communicator& dp,
                 int zero, double bucket_mb, Backend& backend, DType wire)
    : modules_(modules), trainable_(trainable), dp_(dp), zero_(dp.size() > 1 ? zero : 0), bucket_mb_(bucket_mb),
      wire_(wire) {
  VLM_ASSERT(wire == DType::F32 || wire == DType::BF16, "DP gradient wire dtype ", dtype_name(wire));
  VLM_ASSERT(trainable.size() == modules.size(), "one trainable flag per module");
  for (size_t i = 0; i < modules_.size(); ++i)
    if (modules_[i].id == ModuleId::Vision) vision_ = i;
  if (vision_ != SIZE_MAX && !layout(vision_).pooled_units().empty()) {
    front_comm_ = dp.duplicate(dp.name() + ".vision");  // collective over the group
    fresh_.assign(size_t(layout(vision_).units()), 1);
  }
  main_.comm = &dp_, front_.comm = front_comm_.get();
  const bool bf = wire_ == DType::BF16 && dp.size() > 1;
  struct Sizes {
    int64_t wire = 0, acc = 0, stage = 0;
  } main_n, front_n;
  for (size_t i = 0; i < modules_.size(); ++i) {
    const ParamTable& t = *modules_[i].table;
    const ParamLayout& L = t.layout();
    VLM_ASSERT(L.stage() == zero_, module_name(modules_[i].id), ": table sharded for zero ", L.stage(),
               ", the DP reduction runs zero ", zero_);
    VLM_ASSERT(t.trains() || !trainable[i], module_name(modules_[i].id), ": trained without gradients");
    VLM_ASSERT(t.dtype() == DType::F32 || dp.size() == 1, "DP reduction of f32 tables");
    for (const ShardRun& r : L.runs()) {
      const bool front = &lane(i, r) == &front_;
      Sizes& n = front ? front_n : main_n;
      if (front) {  // a unit's runs are gathered together (prefetch): their inputs apart
        const auto [k0, k1] = L.group_runs(r.group);
        int64_t unit = 0;
        for (int k = k0; k < k1; ++k) unit += staged_bytes(L.runs()[size_t(k)]) / 4;
        n.stage = std::max(n.stage, unit);
      } else if (zero_ >= 1) {
        n.stage = std::max(n.stage, r.block());
      }
      if (!trainable[i]) continue;
      if (zero_ >= 1) n.wire = std::max(n.wire, r.size() + r.block());
      if (r.pooled) n.acc = std::max(n.acc, r.owned());
    }
    if (trainable[i] && zero_ == 0) main_n.wire = std::max(main_n.wire, L.numel());
    shard_.push_back(!trainable[i] ? Tensor{}
                     : zero_ == 0  ? t.grads()
                                   : Tensor::zeros(backend, Shape{std::max<int64_t>(1, L.owned())}));
  }
  for (auto [l, n] : {std::pair<Lane*, Sizes>{&main_, main_n}, {&front_, front_n}}) {
    if (bf && n.wire > 0) l->wire_buf = Tensor::zeros(backend, Shape{n.wire}, DType::BF16);
    if (n.acc > 0) l->acc = Tensor::zeros(backend, Shape{n.acc});
    if (n.stage > 0) l->stage = Tensor::zeros(backend, Shape{n.stage});
  }
}

int64_t DpGrads::bucket_elems() const {
  return std::max<int64_t>(1, int64_t(bucket_mb_ * 1024 * 1024 / double(dtype_size(wire_))));
}

void DpGrads::reduce_range(Stream& s, size_t i, int64_t begin, int64_t end) {
  VLM_ASSERT(zero_ == 0, "reduce_range under ZeRO");
  const Tensor& grads = shard_[i];
  VLM_ASSERT(trainable_[i] && 0 <= begin && begin <= end && end <= grads.numel(), "reduce_range [", begin, ", ", end,
             ") of ", grads.numel());
  if (dp_.size() == 1 || begin == end) return;
  const int64_t n = end - begin;
  // What goes on the wire: the f32 gradients, or their bf16 copy.
  const bool bf = wire_ == DType::BF16;
  const Tensor g = grads.sub(begin, Shape{n});
  const Tensor w = bf ? main_.wire_buf.sub(begin, Shape{n}) : g;
  if (bf) convert(s, w, g);
  const int64_t chunk = bucket_elems();
  std::vector<CommWork> work;
  for (int64_t at = 0; at < n; at += chunk)
    work.push_back(dp_.all_reduce_async(s, w.sub(at, Shape{std::min(chunk, n - at)})));
  for (CommWork& c : work) c->wait();
  if (bf) convert(s, g, w);  // the sums, back in the f32 gradients
}

void DpGrads::reduce_run(Stream& s, size_t i, int k, const Tensor& g, bool accumulate) {
  const ShardRun& r = layout(i).runs()[size_t(k)];
  Lane& ln = lane(i, r);
  Communicator& c = *ln.comm;
  const Tensor shard = shard_[i].sub(r.shard_at, Shape{r.owned()});
  const int64_t blk = r.block(), tail = r.tail();
  const bool bf = wire_ == DType::BF16;
  // What goes on the wire: the f32 gradients, or their bf16 copy.
  const Tensor in = bf ? ln.wire_buf.sub(0, Shape{r.size()}) : g;
  if (bf) convert(s, in, g);
  // The f32 sums land in the shard, or (accumulating) in the lane's acc and are added to it.
  const Tensor sums = accumulate ? ln.acc.sub(0, Shape{r.owned()}) : shard;
  if (blk > 0) {
    const Tensor all = in.sub(0, Shape{r.tail_begin - r.begin});
    if (bf) {
      const Tensor out = ln.wire_buf.sub(r.size(), Shape{blk});
      c.reduce_scatter(s, out, all);
      convert(s, sums.sub(0, Shape{blk}), out);
    } else {
      c.reduce_scatter(s, sums.sub(0, Shape{blk}), all);
    }
  }
  if (tail > 0) {
    const Tensor t = in.sub(r.tail_begin - r.begin, Shape{tail});
    c.all_reduce(s, t);
    if (bf)
      convert(s, sums.sub(blk, Shape{tail}), t);
    else
      copy(s, sums.sub(blk, Shape{tail}), t);
  }
  if (accumulate) add(s, shard, shard, sums);
}

void DpGrads::reduce(Stream& s, size_t i) {
  if (!trainable_[i] || dp_.size() == 1) return;
  if (zero_ == 0) return reduce_range(s, i, 0, shard_[i].numel());
  const ParamTable& t = *modules_[i].table;
  for (size_t k = 0; k < layout(i).runs().size(); ++k)
    if (!layout(i).runs()[k].pooled) reduce_run(s, i, int(k), t.run(int(k)).grad, false);
}

void DpGrads::reduce_unit(Stream& s, size_t i, int u, bool first) {
  VLM_ASSERT(zero_ >= 2 && trainable_[i] && layout(i).pooled(u), "reduce_unit of unit ", u, " at zero ", zero_);
  const auto [k0, k1] = layout(i).group_runs(layout(i).unit_group(u));
  for (int k = k0; k < k1; ++k) reduce_run(s, i, k, modules_[i].table->run(k).grad, !first);
}

CommWork DpGrads::post_gather_run(Stream& s, size_t i, int k, const Tensor& out, int64_t stage_at) {
  const ShardRun& r = layout(i).runs()[size_t(k)];
  const RunStorage& st = modules_[i].table->run(k);
  Lane& ln = lane(i, r);
  const int64_t blk = r.block(), tail = r.tail();
  // This rank's elements: the resident f32 values, or the shard (masters, or a frozen
  // pooled run's compute values).
  const Tensor& own = st.values.defined() ? st.values : st.shard;
  const int64_t tail_at = st.values.defined() ? r.tail_begin - r.begin : blk;
  const DType dt = compute_dtype(r);
  VLM_ASSERT(out.defined() && out.dtype() == dt && out.numel() == r.size(), "gather of run ", k, " into ", out.str());
  if (tail > 0) {
    const Tensor src = own.sub(tail_at, Shape{tail}), dst = out.sub(r.tail_begin - r.begin, Shape{tail});
    if (src.data() != dst.data()) {  // else the resident values are their own compute copy
      if (src.dtype() != dt)
        convert(s, dst, src);
      else
        copy(s, dst, src);
    }
  }
  if (blk == 0) return nullptr;
  const Tensor src = own.sub(st.values.defined() ? r.block_begin - r.begin : 0, Shape{blk});
  Tensor in = src;  // the all-gather's input: never inside its output, in the compute dtype
  if (src.dtype() != dt || inside(src, out)) {
    const int64_t e = int64_t(dtype_size(dt));
    in = ln.stage.reinterpret(dt, Shape{ln.stage.numel() * 4 / e}).sub(stage_at / e, Shape{blk});
    if (src.dtype() != dt)
      convert(s, in, src);
    else
      copy(s, in, src);
  }
  return ln.comm->all_gather_async(s, out.sub(0, Shape{r.tail_begin - r.begin}), in);
}

void DpGrads::gather_run(Stream& s, size_t i, int k, const Tensor& out) {
  if (CommWork w = post_gather_run(s, i, k, out, 0)) w->wait();
}

std::vector<CommWork> DpGrads::post_gather_unit(Stream& s, size_t i, int u) {
  VLM_ASSERT(zero_ >= 3 && layout(i).pooled(u), "gather_unit of unit ", u, " at zero ", zero_);
  const auto [k0, k1] = layout(i).group_runs(layout(i).unit_group(u));
  std::vector<CommWork> work;
  int64_t at = 0;  // bytes: each run's staged input apart, so that they may be in flight together
  for (int k = k0; k < k1; ++k) {
    if (CommWork w = post_gather_run(s, i, k, modules_[i].table->run(k).compute, at)) work.push_back(std::move(w));
    at += staged_bytes(layout(i).runs()[size_t(k)]);
  }
  return work;
}

void DpGrads::gather_unit(Stream& s, size_t i, int u) {
  for (CommWork& w : post_gather_unit(s, i, u)) w->wait();
}

void DpGrads::gather_values(Stream& s, size_t i) {
  if (zero_ == 0 || !trainable_[i]) return;
  for (size_t k = 0; k < layout(i).runs().size(); ++k) {
    const ShardRun& r = layout(i).runs()[k];
    if (zero_ >= 3 && r.pooled) continue;  // gathered before each use instead
    gather_run(s, i, int(k), modules_[i].table->run(int(k)).compute);
  }
  modules_[i].table->refresh_working(s);  // the bf16 copies of the f32-form runs (ParamSpec::f32_reads)
}

std::vector<float> DpGrads::owned_values(size_t i) const {
  const ParamTable& t = *modules_[i].table;
  std::vector<float> out;
  auto put = [&](const Tensor& x) {
    const std::vector<float> v = to_vector_f32(x);
    out.insert(out.end(), v.begin(), v.end());
  };
  for (size_t k = 0; k < t.layout().runs().size(); ++k) {
    const ShardRun& r = t.layout().runs()[k];
    put(t.owned_view(int(k), r.block_begin, r.block_end, r.shard_at));
    put(t.owned_view(int(k), r.tail_begin, r.tail_end, r.shard_at + r.block()));
  }
  return out;
}

std::vector<float> DpGrads::gather_flat(Stream& s, size_t i, const std::vector<float>& owned) const {
  const ParamLayout& L = layout(i);
  VLM_ASSERT(int64_t(owned.size()) == L.owned(), "owned elements of a module: ", owned.size(), ", expected ", L.owned());
  std::vector<float> flat(size_t(L.numel()), 0.f);
  Backend& b = backend_for(dp_.device());
  for (const ShardRun& r : L.runs()) {
    const auto at = owned.begin() + r.shard_at;
    if (r.block() > 0 && L.stage() > 0) {
      const Tensor in = to_backend(b, Tensor::from_vector(std::vector<float>(at, at + r.block()), Shape{r.block()}));
      const Tensor all = Tensor::empty(b, Shape{r.tail_begin - r.begin});
      dp_.all_gather(s, all, in);
      const std::vector<float> g = to_vector_f32(all);
      std::copy(g.begin(), g.end(), flat.begin() + r.begin);
    } else {
      std::copy(at, at + r.block(), flat.begin() + r.block_begin);
    }
    std::copy(at + r.block(), at + r.owned(), flat.begin() + r.tail_begin);
  }
  return flat;
}

void DpGrads::attach(VlmModel& model) {
  attached_ = true;
  if (zero_ >= 3) {
    const size_t i = size_t(ModuleId::Llm);
    VLM_ASSERT(modules_[i].table == &model.llm().params(), "DpGrads::attach to another model");
    model.set_layer_fetch([this, i, &model](Stream& s, int l, int) { gather_unit(s, i, model.llm().layer_unit(l)); });
  }
  if (!front_comm_) return;
  const size_t v = vision_;
  VLM_ASSERT(modules_[v].table == &model.vision().params(), "DpGrads::attach to another model");
  const VisionEncoder& enc = model.vision();
  LayerFetch fetch;
  if (zero_ >= 3)
    fetch = [this, v, &enc](Stream& s, int l, int next) {
      // Block l's weights: prefetched by the previous block's fetch, or gathered now; then
      // the next block's all-gather is posted, to run during block l's compute.
      const int u = enc.layer_unit(l);
      const bool ready = prefetched_ == u;
      for (CommWork& w : prefetch_) w->wait();
      prefetch_.clear(), prefetched_ = -1;
      if (!ready) gather_unit(s, v, u);
      if (next >= 0) prefetch_ = post_gather_unit(s, v, prefetched_ = enc.layer_unit(next));
    };
  LayerGrads grads;
  if (trainable_[v])
    grads = [this, v, &enc](Stream& s, int l, bool done) {
      const int u = enc.layer_unit(l);
      if (!done) return modules_[v].table->zero_unit_grads(s, u);
      reduce_unit(s, v, u, fresh_[size_t(u)] != 0);
      fresh_[size_t(u)] = 0;
    };
  model.set_vision_hooks(fetch, grads);
}

void DpGrads::begin_step() { std::fill(fresh_.begin(), fresh_.end(), char(1)); }

CommCounters DpGrads::counters() const {
  CommCounters c = dp_.counters();
  if (front_comm_) c += front_comm_->counters();
  return c;
}

namespace {
// Bytes of one run's reduction (reduce-scatter input + tail) at `wire` bytes an element.
size_t reduce_bytes(const ShardRun& r, size_t wire) {
  return size_t((r.block() > 0 ? r.tail_begin - r.begin : 0) + r.tail()) * wire;
}
size_t gather_bytes(const ShardRun& r) { return size_t(r.block()) * dtype_size(compute_dtype(r)); }
}  // namespace

size_t DpGrads::bytes(size_t i) const {
  if (!trainable_[i] || dp_.size() == 1) return 0;
  const size_t e = dtype_size(wire_);
  if (zero_ == 0) return size_t(layout(i).numel()) * e;
  size_t n = 0;
  for (const ShardRun& r : layout(i).runs())
    if (!r.pooled) n += reduce_bytes(r, e);
  return n;
}

size_t DpGrads::unit_bytes(size_t i, int u) const {
  size_t n = 0;
  const auto [k0, k1] = layout(i).group_runs(layout(i).unit_group(u));
  for (int k = k0; k < k1; ++k) n += reduce_bytes(layout(i).runs()[size_t(k)], dtype_size(wire_));
  return n;
}

size_t DpGrads::unit_gather_bytes(size_t i, int u) const {
  size_t n = 0;
  const auto [k0, k1] = layout(i).group_runs(layout(i).unit_group(u));
  for (int k = k0; k < k1; ++k) n += gather_bytes(layout(i).runs()[size_t(k)]);
  return n;
}

size_t DpGrads::gather_values_bytes(size_t i) const {
  if (zero_ == 0 || !trainable_[i]) return 0;
  size_t n = 0;
  for (const ShardRun& r : layout(i).runs())
    if (!(zero_ >= 3 && r.pooled)) n += gather_bytes(r);
  return n;
}

size_t DpGrads::shard_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < shard_.size(); ++i)
    if (zero_ >= 1 && shard_[i].defined()) n += shard_[i].nbytes();
  return n;
}

size_t DpGrads::wire_bytes() const {
  size_t n = 0;
  for (const Lane* l : {&main_, &front_})
    n += (l->wire_buf.defined() ? l->wire_buf.nbytes() : 0) + (l->acc.defined() ? l->acc.nbytes() : 0);
  return n;
}

size_t DpGrads::staging_bytes() const {
  return (main_.stage.defined() ? main_.stage.nbytes() : 0) + (front_.stage.defined() ? front_.stage.nbytes() : 0);
}

}  // namespace vlm
