// VlmModel (model/vlm_model.h).
#include "model/vlm_model.h"

#include <algorithm>

#include "base/error.h"
#include "core/ops.h"
#include "core/texture_channels.h"
#include "llm/param_specs.h"
#include "nn/context.h"
#include "nn/init.h"

namespace vlm {

const char* module_name(ModuleId m) {
  switch (m) {
    case ModuleId::Llm: return "llm";
    case ModuleId::Projector: return "projector";
    case ModuleId::Scorers: return "scorers";
    case ModuleId::Vision: return "vision";
  }
  return "?";
}

int64_t VlmConfig::max_backbone_tokens(int tp) const {
  const int64_t n = max_images * (scorers.lod.max_tokens + max_text) + tp;
  return (n + tp - 1) / tp * tp;  // a multiple of tp, as sequence parallelism requires
}

int64_t MicroBatch::counted() const {
  int64_t n = 0;
  for (const auto& c : caption) n += int64_t(c.size());
  return n;
}

VlmModel::VlmModel(const VlmConfig& cfg, Backend& backend, Communicator& tp, Communicator& self)
    : cfg_(cfg), backend_(backend), tp_(tp) {
  const int64_t Bm = cfg.max_images, dv = cfg.vision.d_model, C = cfg.llm.d_model;
  const int64_t Pm = Bm * cfg.max_text, Tv = Bm * cfg.scorers.lod.max_tokens;
  VLM_ASSERT(cfg.front_slots == 1 || cfg.front_slots == 2, "front_slots is 1 or 2, got ", cfg.front_slots);
  auto trains = [&](ModuleId m) { return !cfg.frozen[size_t(m)]; };
  for (int k = 0; k < cfg.front_slots; ++k)
    slots_.push_back(std::make_unique<FrontSlot>(cfg, backend, tp, self, k > 0 ? &slots_[0]->vision() : nullptr));
  const RelevanceStage& stage0 = slots_[0]->stage();
  stage_params_ = std::make_unique<ParamTable>(stage0.param_specs(), stage0.table_tp(), stage0.table_rank());
  stage_params_->allocate(backend, trains(ModuleId::Scorers), cfg.sharding);
  for (auto& f : slots_) {
    f->stage().bind(*stage_params_);
    f->stage().reserve(cfg_.max_images);
  }
  projector_ = std::make_unique<Projector>(dv, C, cfg.projector_std, backend, Tv, DType::F32, trains(ModuleId::Projector),
                                           cfg.precision, cfg.sharding);
  llm_ = std::make_unique<Backbone>(cfg.llm, backend, tp, cfg.max_backbone_tokens(tp.size()), trains(ModuleId::Llm),
                                    cfg.precision, cfg.sharding);
  const Param& table = llm_->params().get(kEmbedTokens);
  prompt_emb_.table = table.value, prompt_emb_.dtable = table.grad, prompt_emb_.vocab_offset = table.offset;
  prompt_rows_ = Tensor::zeros(backend, Shape{Pm, C});
  dprompt_rows_ = Tensor::zeros(backend, Shape{Pm, C});
  // The projector's output and its gradient: activations of the backbone's dtype.
  visual_ = Tensor::zeros(backend, Shape{Tv, C}, llm_->activation_dtype());
  dvisual_ = Tensor::zeros(backend, Shape{Tv, C}, llm_->activation_dtype());
}

VlmModel::~VlmModel() = default;

void VlmModel::init(uint64_t seed) {
  vision().init(seed);
  init_params(*stage_params_, seed);
  projector_->init(seed);
  llm_->init(seed);
}

std::vector<ModuleParams> VlmModel::modules() {
  return {{ModuleId::Llm, &llm_->params(), true},
          {ModuleId::Projector, &projector_->params(), false},
          {ModuleId::Scorers, stage_params_.get(), slots_[0]->stage().table_tp() > 1},  // tp2: split over the pair = TP
          {ModuleId::Vision, &vision().params(), false}};
}

void VlmModel::zero_grads() {
  for (const ModuleParams& m : modules()) m.table->zero_grads();  // the second slot's encoder shares slot 0's
}

void VlmModel::set_vision_hooks(const LayerFetch& fetch, const LayerGrads& grads) {
  for (auto& f : slots_) f->vision().set_zero_hooks(fetch, grads);
}

void VlmModel::refresh_working_weights() {
  for (const ModuleParams& m : modules()) m.table->refresh_working(backend_.default_stream());
}

size_t VlmModel::working_weight_bytes() {
  size_t n = 0;
  for (const ModuleParams& m : modules()) n += m.table->working_bytes();
  return n;
}

int64_t VlmModel::activation_bytes() const {
  size_t n = projector_->activation_bytes() + llm_->activation_bytes();
  for (const auto& f : slots_) n += f->vision().activation_bytes();
  return int64_t(n);
}

void VlmModel::load(Stream& s, const MicroBatch& mb, int slot) {
  const VisionConfig& v = cfg_.vision;
  const int64_t B = mb.images;
  VLM_REQUIRE(B >= 1 && B <= cfg_.max_images, "micro-batch of ", B, " images; the model is planned for 1..",
              cfg_.max_images);
  VLM_ASSERT(int64_t(mb.prompt.size()) == B && int64_t(mb.caption.size()) == B, "one prompt and caption per image");
  VLM_ASSERT(mb.texture, "the relevance stage needs the texture array");
  for (int64_t b = 0; b < B; ++b)
    VLM_REQUIRE(int64_t(mb.prompt[size_t(b)].size() + mb.caption[size_t(b)].size()) <= cfg_.max_text, "sample ", b,
                ": ", mb.prompt[size_t(b)].size() + mb.caption[size_t(b)].size(), " text tokens exceed train.max_text=",
                cfg_.max_text);
  FrontSlot& f = *slots_[size_t(slot)];
  cur_ = slot;
  f.B = B, f.seed = mb.seed, f.lod = mb.lod, f.loss_norm = mb.loss_norm;
  const int64_t S = v.image_size, G = v.grid();
  // In s's order: after the slot's last readers, which the caller orders before s
  // (train/step.h), or earlier work on s itself.
  const auto host = [](const void* p, Shape shape, DType dt) {
    return Tensor(const_cast<void*>(p), shape, dt, DeviceKind::CPU);
  };
  copy_from_host(s, f.pixels.slice(0, B), host(mb.pixels, Shape{B, S, S, 3}, DType::U8));
  copy_from_host(s, f.texture.slice(0, B), host(mb.texture, Shape{B, kTextureChannels, G, G}, DType::F32));
  f.ids_host.clear();
  f.has_prompt.assign(size_t(B), false);
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = mb.prompt[size_t(b)];
    f.ids_host.insert(f.ids_host.end(), p.begin(), p.end());
    f.has_prompt[size_t(b)] = !p.empty();
    f.samples[size_t(b)].prompt = p;
    f.samples[size_t(b)].caption = mb.caption[size_t(b)];
  }
  f.P = int64_t(f.ids_host.size());
  if (f.P > 0) {
    f.avg_host.assign(size_t(B * f.P), 0.f);
    int64_t at = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = int64_t(mb.prompt[size_t(b)].size());
      for (int64_t j = 0; j < n; ++j) f.avg_host[size_t(b * f.P + at + j)] = 1.f / float(n);
      at += n;
    }
    copy_from_host(s, f.prompt_ids.slice(0, f.P), host(f.ids_host.data(), Shape{f.P}, DType::I32));
    copy_from_host(s, f.avg.slice(0, B * f.P), host(f.avg_host.data(), Shape{B * f.P}, DType::F32));
  }
}

void VlmModel::vision_forward(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  f.vision().forward(s, f.pixels.slice(0, f.B), cfg_.vision.texture ? f.texture.slice(0, f.B) : Tensor{});
}

void VlmModel::query_forward(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  const Tensor q = f.query.slice(0, f.B);
  if (f.P == 0) return fill(s, q, 0.f);
  TpContext ctx{s, tp_, false};  // prompt rows are not sequence-sharded
  const Tensor rows = prompt_rows_.slice(0, f.P);
  prompt_emb_.forward(ctx, rows, rows, f.prompt_ids.slice(0, f.P));
  matmul(s, q, f.avg.sub(0, Shape{f.B, f.P}), rows, GemmOpts{});
}

void VlmModel::scorers_prepare(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  const int64_t G = cfg_.vision.grid();
  const Tensor tex = f.texture.slice(0, f.B).view(Shape{f.B, kTextureChannels, G * G});
  f.stage().set_lod_step(f.lod);
  f.stage().forward_prepare(s, f.features(), tex, f.query.slice(0, f.B), f.has_prompt, f.seed);
}

void VlmModel::scorers_finish(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  f.stage().forward_finish(s);
  pack_input(s, f);
}

void VlmModel::scorers_forward(Stream& s, int slot) {
  scorers_prepare(s, slot);
  for (int k = 0; k < kNumScorers; ++k) scorer_forward(s, slot, k);
  scorers_finish(s, slot);
}

void VlmModel::front_forward(Stream& s, const MicroBatch& mb) {
  load(s, mb, 0);
  vision_forward(s, 0);
  query_forward(s, 0);
  scorers_forward(s, 0);
}

void VlmModel::pack_input(Stream& s, FrontSlot& f) {
  const std::vector<int64_t>& cu = f.stage().offsets();
  int64_t T = 0;
  for (int64_t b = 0; b < f.B; ++b) {
    VlmSample& x = f.samples[size_t(b)];
    x.n_visual = int32_t(cu[size_t(b + 1)] - cu[size_t(b)]);
    T += x.n_visual + int64_t(x.prompt.size() + x.caption.size());
  }
  const int tp = tp_.size();
  // Sequence parallelism: T padded to a multiple of tp with a text-only sample.
  const int64_t pad = cfg_.llm.sequence_parallel && tp > 1 ? (tp - T % tp) % tp : 0;
  const int64_t Tv = cu[size_t(f.B)];
  f.input = f.input_buffers.pack(s, std::span<const VlmSample>(f.samples.data(), size_t(f.B)), visual_.slice(0, Tv), pad);
  f.input.loss_norm = f.loss_norm;
}

void VlmModel::projector_forward(Stream& s, FrontSlot& f) {
  const int64_t Tv = f.stage().offsets()[size_t(f.B)];
  projector_->forward(s, visual_.slice(0, Tv), f.stage().tokens());
}

void VlmModel::llm_forward_backward(Stream& s, int slot, const Tensor& loss) {
  llm_forward(s, slot, loss);
  llm_backward(s, slot, 0, llm_->n_layers());
}

void VlmModel::llm_forward(Stream& s, int slot, const Tensor& loss) {
  llm_forward_begin(s, slot);
  llm_forward_layers(s, slot, 0, llm_->n_layers());
  llm_forward_end(s, slot, loss);
}

void VlmModel::llm_forward_begin(Stream& s, int slot) {
  projector_forward(s, *slots_[size_t(slot)]);
  llm_->forward_begin(s, slots_[size_t(slot)]->input);
}

void VlmModel::llm_forward_layers(Stream& s, int slot, int l0, int l1) {
  llm_->forward_layers(s, slots_[size_t(slot)]->input, l0, l1);
}

void VlmModel::llm_forward_end(Stream& s, int slot, const Tensor& loss) {
  llm_->forward_end(s, slots_[size_t(slot)]->input, loss, true);
}

void VlmModel::llm_backward(Stream& s, int slot, int l0, int l1) {
  FrontSlot& f = *slots_[size_t(slot)];
  const int64_t Tv = f.stage().offsets()[size_t(f.B)];
  if (l1 == llm_->n_layers()) llm_->backward_head(s, f.input);
  llm_->backward_layers(s, f.input, l0, l1);
  if (l0 > 0) return;
  llm_->backward_embedding(s, f.input, dvisual_.slice(0, Tv));
  projector_->backward(s, f.dtokens.slice(0, Tv), dvisual_.slice(0, Tv), f.stage().tokens());
}

std::pair<int64_t, int64_t> VlmModel::llm_grad_range(int l0, int l1) const {
  const int64_t end = l1 == llm_->n_layers() ? llm_->params().layout().numel() : llm_->layer_grad_begin(l1);
  return {llm_->layer_grad_begin(l0), end};
}

float VlmModel::llm_forward_backward(Stream& s, bool backward) {
  FrontSlot& f = *slots_[size_t(cur_)];
  projector_forward(s, f);
  const float loss = llm_->forward(s, f.input, backward);
  if (backward) llm_backward(s, cur_, 0, llm_->n_layers());
  return loss;
}

std::vector<int32_t> VlmModel::greedy_next(Stream& s, const std::vector<std::vector<int32_t>>& generated) {
  FrontSlot& f = *slots_[size_t(cur_)];
  VLM_ASSERT(int64_t(generated.size()) == f.B, "one generated sequence per image");
  for (int64_t b = 0; b < f.B; ++b) f.samples[size_t(b)].caption = generated[size_t(b)];
  pack_input(s, f);
  llm_forward_backward(s, false);
  const Tensor logits = llm_->gather_logits(s);  // host [T, V]
  const int64_t V = logits.size(1);
  const float* L = logits.ptr<float>();
  std::vector<int32_t> next(static_cast<size_t>(f.B));
  int64_t end = 0;
  for (int64_t b = 0; b < f.B; ++b) {
    const VlmSample& x = f.samples[size_t(b)];
    end += x.n_visual + int64_t(x.prompt.size() + x.caption.size());
    const float* row = L + (end - 1) * V;
    next[size_t(b)] = int32_t(std::max_element(row, row + V) - row);
  }
  return next;
}

void VlmModel::scorers_backward(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  const int64_t Tv = f.stage().offsets()[size_t(f.B)], rows = f.B * cfg_.vision.tokens();
  fill(s, f.dF.slice(0, rows), 0.f);
  f.stage().backward(s, f.features(), f.dquery.slice(0, f.B), f.dtokens.slice(0, Tv));
  // The replicated encoder needs every image's feature gradients (batch-split's stage
  // writes those of this rank's images: ScorerPlacement::reduce_feature_grads).
  if (!cfg_.frozen[size_t(ModuleId::Vision)]) f.stage().reduce_feature_grads(s, f.dF.slice(0, rows));
}

void VlmModel::query_backward(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  if (f.P == 0) return;
  TpContext ctx{s, tp_, false};
  const Tensor drows = dprompt_rows_.slice(0, f.P);
  GemmOpts o;
  o.trans_a = true;
  matmul(s, drows, f.avg.sub(0, Shape{f.B, f.P}), f.dquery.slice(0, f.B), o);
  prompt_emb_.backward(ctx, drows, drows, f.prompt_ids.slice(0, f.P));
}

void VlmModel::vision_backward(Stream& s, int slot) {
  FrontSlot& f = *slots_[size_t(slot)];
  f.vision().backward(s, f.dF.slice(0, f.B * cfg_.vision.tokens()),
                      cfg_.vision.texture ? f.texture.slice(0, f.B) : Tensor{});
}

void VlmModel::finish_grads(Stream& s, int64_t done_begin, int64_t done_end) {
  llm_->finalize_grads(s, 0, done_begin);
  llm_->finalize_grads(s, done_end, INT64_MAX);
  slots_[0]->stage().finalize_grads(s);  // the one table every slot's stage accumulates into
}

}  // namespace vlm
