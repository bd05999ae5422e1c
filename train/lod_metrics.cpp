// What reaches the relevance scorers during training (train/lod_metrics.h).
#include "train/lod_metrics.h"

#include <cmath>
#include <string>

namespace vlm {

LodStepMetrics measure_lod_step(VlmModel& model, Stream& s, const Batch& last) {
  LodStepMetrics m;
  s.synchronize();
  const int G = model.config().vision.grid(), S = model.config().vision.image_size;
  if (!last.boxes.empty()) {
    const std::vector<float> r = to_vector_f32(model.stage().relevance());  // [B, G*G]
    for (int i = 0; i < last.size(); ++i)
      if (last.is_pad.empty() || !last.is_pad[size_t(i)])
        add_relevance_precision(r.data() + size_t(i) * size_t(G) * size_t(G), G, S, last.boxes.data() + size_t(i) * 4,
                                m.precision);
  }
  double sq = 0;
  for (const ModuleParams& mp : model.modules()) {
    if (mp.id != ModuleId::Scorers) continue;
    for (const Param& p : mp.table->params()) {
      if (!p.grad.defined() || p.spec.name.rfind("scorers.lod.", 0) == 0) continue;
      for (float g : to_vector_f32(p.grad)) sq += double(g) * double(g);
    }
  }
  m.scorer_grad_norm = std::sqrt(sq);
  return m;
}

}  // namespace vlm
