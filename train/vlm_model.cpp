// VlmModel (train/vlm_model.h).
#include "train/vlm_model.h"

#include <algorithm>

#include "core/error.h"
#include "core/ops.h"
#include "data/image/texture.h"
#include "nn/context.h"
#include "nn/init.h"
#include "llm/param_specs.h"

namespace vlm {

// The texture array is made by data/ and read by vision/ and scorers/, which do not
// include each other: the three counts must agree.
static_assert(kTextureChannels == kVisionTextureChannels && kTextureChannels == kScorerTextureChannels);

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

// The stage reads image i's features as rows [i*N, (i+1)*N) of the encoder's output and
// gives their gradient back into the model's dF (accumulated, zeroed per micro-batch).
class VlmModel::FeatureSource final : public ImageEncoder {
 public:
  FeatureSource(VisionEncoder& enc, Tensor& dF) : enc_(enc), dF_(dF) {}
  void encode(Stream& s, int64_t image, const Tensor& F) override {
    const int64_t N = enc_.config().tokens();
    copy(s, F, enc_.features().slice(image * N, (image + 1) * N).view(F.shape()));
  }
  void encode_backward(Stream& s, int64_t image, const Tensor& dF) override {
    const int64_t N = enc_.config().tokens();
    accumulate(s, dF_.slice(image * N, (image + 1) * N).view(dF.shape()), dF, 1.f);
  }

 private:
  VisionEncoder& enc_;
  Tensor& dF_;
};

VlmModel::VlmModel(const VlmConfig& cfg, Backend& backend, Communicator& tp, Communicator& self)
    : cfg_(cfg), backend_(backend), tp_(tp) {
  const VisionConfig& v = cfg.vision;
  const int64_t Bm = cfg.max_images, N = v.tokens(), dv = v.d_model, C = cfg.llm.d_model;
  const int64_t Pm = Bm * cfg.max_text, Tv = Bm * cfg.scorers.lod.max_tokens;
  auto trains = [&](ModuleId m) { return !cfg.frozen[size_t(m)]; };
  vision_ = std::make_unique<VisionEncoder>(v, backend, self, Bm, VisionReadout{}, DType::F32, trains(ModuleId::Vision),
                                            cfg.precision);
  ScorerDims dims;
  dims.G = v.grid(), dims.d = dv, dims.dq = C;
  // tp2 at parallel.tp = 2: the pair is the TP group (resolve_vlm_config refuses other sizes).
  const bool tp2 = cfg.scorers.scorers.placement == Placement::Tp2;
  VLM_REQUIRE(!tp2 || tp.size() == 2, "scorers.placement=tp2 needs parallel.tp=2 in the VLM, got ", tp.size());
  stage_ = std::make_unique<RelevanceStage>(cfg.scorers, dims, tp, tp2 ? &tp : nullptr);
  stage_params_ = std::make_unique<ParamTable>(stage_->param_specs(), stage_->table_tp(), stage_->table_rank());
  stage_params_->allocate(backend, trains(ModuleId::Scorers));
  stage_->bind(*stage_params_);
  projector_ = std::make_unique<Projector>(dv, C, cfg.projector_std, backend, Tv, DType::F32, trains(ModuleId::Projector),
                                           cfg.precision);
  llm_ = std::make_unique<Backbone>(cfg.llm, backend, tp, cfg.max_backbone_tokens(tp.size()), trains(ModuleId::Llm),
                                    cfg.precision);
  features_ = std::make_unique<FeatureSource>(*vision_, dF_);
  const Param& table = llm_->params().get(kEmbedTokens);
  prompt_emb_.table = table.value, prompt_emb_.dtable = table.grad, prompt_emb_.vocab_offset = table.offset;

  pixels_ = Tensor::zeros(backend, Shape{Bm, v.image_size, v.image_size, 3}, DType::U8);
  texture_ = Tensor::zeros(backend, Shape{Bm, kVisionTextureChannels, v.grid(), v.grid()});
  dF_ = Tensor::zeros(backend, Shape{Bm * N, dv});
  prompt_ids_ = Tensor::zeros(backend, Shape{Pm}, DType::I32);
  avg_ = Tensor::zeros(backend, Shape{Bm * Pm});
  prompt_rows_ = Tensor::zeros(backend, Shape{Pm, C});
  dprompt_rows_ = Tensor::zeros(backend, Shape{Pm, C});
  query_ = Tensor::zeros(backend, Shape{Bm, C});
  dquery_ = Tensor::zeros(backend, Shape{Bm, C});
  visual_ = Tensor::zeros(backend, Shape{Tv, C});
  dvisual_ = Tensor::zeros(backend, Shape{Tv, C});
  dtokens_ = Tensor::zeros(backend, Shape{Tv, dv});
}

VlmModel::~VlmModel() = default;

void VlmModel::init(uint64_t seed) {
  vision_->init(seed);
  init_params(*stage_params_, seed);
  projector_->init(seed);
  llm_->init(seed);
}

std::vector<ModuleParams> VlmModel::modules() {
  return {{ModuleId::Llm, &llm_->params(), true},
          {ModuleId::Projector, &projector_->params(), false},
          {ModuleId::Scorers, stage_params_.get(), stage_->table_tp() > 1},  // tp2: split over the pair = TP
          {ModuleId::Vision, &vision_->params(), false}};
}

void VlmModel::zero_grads() {
  for (const ModuleParams& m : modules()) m.table->zero_grads();
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
  return int64_t(vision_->activation_bytes() + projector_->activation_bytes() + llm_->activation_bytes());
}

void VlmModel::load(Stream& s, const MicroBatch& mb) {
  const VisionConfig& v = cfg_.vision;
  const int64_t B = mb.images;
  VLM_REQUIRE(B >= 1 && B <= cfg_.max_images, "micro-batch of ", B, " images; the model is planned for 1..",
              cfg_.max_images);
  VLM_ASSERT(int64_t(mb.prompt.size()) == B && int64_t(mb.caption.size()) == B, "one prompt and caption per image");
  s.synchronize();  // the buffers below may still be read by the previous micro-batch's work
  B_ = B, seed_ = mb.seed, loss_norm_ = mb.loss_norm;
  const int64_t S = v.image_size, G = v.grid();
  backend_.copy(pixels_.data(), backend_.device(), mb.pixels, DeviceKind::CPU, size_t(B * S * S * 3));
  VLM_ASSERT(mb.texture, "the relevance stage needs the texture array");
  backend_.copy(texture_.data(), backend_.device(), mb.texture, DeviceKind::CPU,
                size_t(B * kVisionTextureChannels * G * G) * sizeof(float));
  std::vector<int32_t> ids;
  has_prompt_.assign(size_t(B), false);
  samples_.assign(size_t(B), VlmSample{});
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = mb.prompt[size_t(b)];
    VLM_REQUIRE(int64_t(p.size() + mb.caption[size_t(b)].size()) <= cfg_.max_text, "sample ", b, ": ",
                p.size() + mb.caption[size_t(b)].size(), " text tokens exceed train.max_text=", cfg_.max_text);
    ids.insert(ids.end(), p.begin(), p.end());
    has_prompt_[size_t(b)] = !p.empty();
    samples_[size_t(b)].prompt = p;
    samples_[size_t(b)].caption = mb.caption[size_t(b)];
  }
  P_ = int64_t(ids.size());
  if (P_ > 0) {
    std::vector<float> avg(size_t(B * P_), 0.f);
    int64_t at = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = int64_t(mb.prompt[size_t(b)].size());
      for (int64_t j = 0; j < n; ++j) avg[size_t(b * P_ + at + j)] = 1.f / float(n);
      at += n;
    }
    backend_.copy(prompt_ids_.data(), backend_.device(), ids.data(), DeviceKind::CPU, ids.size() * 4);
    backend_.copy(avg_.data(), backend_.device(), avg.data(), DeviceKind::CPU, avg.size() * 4);
  }
}

void VlmModel::vision_forward(Stream& s) {
  vision_->forward(s, pixels_.slice(0, B_), cfg_.vision.texture ? texture_.slice(0, B_) : Tensor{});
}

void VlmModel::query_forward(Stream& s) {
  const Tensor q = query_.slice(0, B_);
  if (P_ == 0) return fill(s, q, 0.f);
  TpContext ctx{s, tp_, false};  // prompt rows are not sequence-sharded
  const Tensor rows = prompt_rows_.slice(0, P_);
  prompt_emb_.forward(ctx, rows, rows, prompt_ids_.slice(0, P_));
  matmul(s, q, avg_.sub(0, Shape{B_, P_}), rows, GemmOpts{});
}

void VlmModel::scorers_prepare(Stream& s) {
  const int64_t G = cfg_.vision.grid();
  const Tensor tex = texture_.slice(0, B_).view(Shape{B_, kVisionTextureChannels, G * G});
  stage_->forward_prepare(s, *features_, tex, query_.slice(0, B_), has_prompt_, seed_);
}

void VlmModel::scorers_forward(Stream& s) {
  scorers_prepare(s);
  for (int k = 0; k < kNumScorers; ++k) scorer_forward(s, k);
  scorers_finish(s);
}

void VlmModel::front_forward(Stream& s, const MicroBatch& mb) {
  load(s, mb);
  vision_forward(s);
  query_forward(s);
  scorers_forward(s);
}

void VlmModel::build_input() {
  const std::vector<int64_t>& cu = stage_->offsets();
  for (int64_t b = 0; b < B_; ++b) samples_[size_t(b)].n_visual = int32_t(cu[size_t(b + 1)] - cu[size_t(b)]);
  const int64_t Tv = cu[size_t(B_)];
  std::vector<VlmSample> samples = samples_;
  const int tp = tp_.size();
  if (cfg_.llm.sequence_parallel && tp > 1) {  // pad T to a multiple of tp with a text-only sample
    int64_t T = Tv;
    for (const VlmSample& x : samples) T += int64_t(x.prompt.size() + x.caption.size());
    if (const int64_t pad = (tp - T % tp) % tp; pad > 0) samples.push_back(VlmSample{0, std::vector<int32_t>(size_t(pad), 0), {}});
  }
  input_ = make_vlm_input(backend_, samples, visual_.slice(0, Tv));
  input_.loss_norm = loss_norm_;
}

float VlmModel::llm_forward_backward(Stream& s, bool backward) {
  const int64_t Tv = stage_->offsets()[size_t(B_)];
  projector_->forward(s, visual_.slice(0, Tv), stage_->tokens());
  build_input();
  const float loss = llm_->forward(s, input_);
  if (backward) {
    llm_->backward(s, input_, dvisual_.slice(0, Tv));
    projector_->backward(s, dtokens_.slice(0, Tv), dvisual_.slice(0, Tv), stage_->tokens());
  }
  return loss;
}

std::vector<int32_t> VlmModel::greedy_next(Stream& s, const std::vector<std::vector<int32_t>>& generated) {
  VLM_ASSERT(int64_t(generated.size()) == B_, "one generated sequence per image");
  for (int64_t b = 0; b < B_; ++b) samples_[size_t(b)].caption = generated[size_t(b)];
  llm_forward_backward(s, false);
  const Tensor logits = llm_->gather_logits(s);  // host [T, V]
  const int64_t V = logits.size(1);
  const float* L = logits.ptr<float>();
  std::vector<int32_t> next(static_cast<size_t>(B_));
  int64_t end = 0;
  for (int64_t b = 0; b < B_; ++b) {
    const VlmSample& x = samples_[size_t(b)];
    end += x.n_visual + int64_t(x.prompt.size() + x.caption.size());
    const float* row = L + (end - 1) * V;
    next[size_t(b)] = int32_t(std::max_element(row, row + V) - row);
  }
  return next;
}

void VlmModel::scorers_backward(Stream& s) {
  const int64_t Tv = stage_->offsets()[size_t(B_)];
  fill(s, dF_.slice(0, B_ * cfg_.vision.tokens()), 0.f);
  stage_->backward(s, *features_, dquery_.slice(0, B_), dtokens_.slice(0, Tv));
  // Under batch-split each rank wrote the feature gradients of its own images only; the
  // replicated encoder needs all of them (the other rows are zero, so the sum is exact).
  if (cfg_.scorers.scorers.placement == Placement::BatchSplit && tp_.size() > 1 && !cfg_.frozen[size_t(ModuleId::Vision)])
    tp_.all_reduce(s, dF_.slice(0, B_ * cfg_.vision.tokens()));
}

void VlmModel::query_backward(Stream& s) {
  if (P_ == 0) return;
  TpContext ctx{s, tp_, false};
  const Tensor drows = dprompt_rows_.slice(0, P_);
  GemmOpts o;
  o.trans_a = true;
  matmul(s, drows, avg_.sub(0, Shape{B_, P_}), dquery_.slice(0, B_), o);
  prompt_emb_.backward(ctx, drows, drows, prompt_ids_.slice(0, P_));
}

void VlmModel::vision_backward(Stream& s) {
  vision_->backward(s, dF_.slice(0, B_ * cfg_.vision.tokens()),
                    cfg_.vision.texture ? texture_.slice(0, B_) : Tensor{});
}

void VlmModel::finish_grads(Stream& s) {
  llm_->finalize_grads(s);
  stage_->finalize_grads(s);
}

}  // namespace vlm
