// FrontSlot (model/front_slot.h): its encoder, stage and buffers.
#include "model/front_slot.h"

#include "core/ops.h"
#include "model/vlm_model.h"

namespace vlm {

// The stage reads image i's features as rows [i*N, (i+1)*N) of the slot encoder's output
// and gives their gradient back into the slot's dF (accumulated, zeroed per micro-batch).
class FrontSlot::Features final : public ImageEncoder {
 public:
  Features(VisionEncoder& enc, Tensor& dF) : enc_(enc), dF_(dF) {}
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

FrontSlot::FrontSlot(const VlmConfig& cfg, Backend& b, Communicator& tp, Communicator& self, VisionEncoder* shared)
    : input_buffers(b, cfg.max_backbone_tokens(tp.size()), cfg.max_images) {
  const VisionConfig& v = cfg.vision;
  const int64_t Bm = cfg.max_images, N = v.tokens(), dv = v.d_model, C = cfg.llm.d_model;
  const int64_t Pm = Bm * cfg.max_text, Tv = Bm * cfg.scorers.lod.max_tokens;
  if (shared)
    vision_ = std::make_unique<VisionEncoder>(*shared, b, self, Bm);
  else
    vision_ = std::make_unique<VisionEncoder>(v, b, self, Bm, VisionReadout{}, DType::F32,
                                              !cfg.frozen[size_t(ModuleId::Vision)], cfg.precision, cfg.sharding);
  ScorerDims dims;
  dims.G = v.grid(), dims.d = dv, dims.dq = C;
  // A placement that splits each scorer over a group (ScorerPlacement::split_group) gets
  // the TP group for it (resolve_vlm_config: parallel.tp is that group's size).
  stage_ = std::make_unique<RelevanceStage>(cfg.scorers, dims, tp, &tp);
  features_ = std::make_unique<Features>(*vision_, dF);

  pixels = Tensor::zeros(b, Shape{Bm, v.image_size, v.image_size, 3}, DType::U8);
  texture = Tensor::zeros(b, Shape{Bm, kTextureChannels, v.grid(), v.grid()});
  dF = Tensor::zeros(b, Shape{Bm * N, dv});
  prompt_ids = Tensor::zeros(b, Shape{Pm}, DType::I32);
  avg = Tensor::zeros(b, Shape{Bm * Pm});
  query = Tensor::zeros(b, Shape{Bm, C});
  dquery = Tensor::zeros(b, Shape{Bm, C});
  dtokens = Tensor::zeros(b, Shape{Tv, dv});
  has_prompt.reserve(size_t(Bm));
  samples.resize(size_t(Bm));
  for (VlmSample& x : samples) x.prompt.reserve(size_t(cfg.max_text)), x.caption.reserve(size_t(cfg.max_text));
  ids_host.reserve(size_t(Pm));
  avg_host.reserve(size_t(Bm * Pm));
}

}  // namespace vlm
