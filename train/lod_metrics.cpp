// What reaches the relevance scorers during training (train/lod_metrics.h).
#include "train/lod_metrics.h"

#include <cmath>
#include <string>

namespace vlm {

LodStepMetrics measure_lod_step(VlmModel& model, Stream& s, const Batch& last, Communicator& dp, Communicator& tp) {
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
  const std::vector<double> t = all_reduce_values(
      dp, s, {double(m.precision.boxed), m.precision.top_cells, m.precision.hits, m.precision.chance_hits});
  m.precision.boxed = int64_t(t[0]), m.precision.top_cells = t[1], m.precision.hits = t[2];
  m.precision.chance_hits = t[3];
  double sq = 0;
  bool split = false;
  for (const ModuleParams& mp : model.modules()) {
    if (mp.id != ModuleId::Scorers) continue;
    split = mp.tp_split;
    for (const Param& p : mp.table->params()) {
      if (!p.grad.defined() || p.spec.name.rfind("scorers.lod.", 0) == 0) continue;
      for (float g : to_vector_f32(p.grad)) sq += double(g) * double(g);
    }
  }
  if (split) sq = all_reduce_values(tp, s, {sq})[0];  // tp2: the shards of the pair (= the TP group)
  m.scorer_grad_norm = std::sqrt(sq);
  return m;
}

}  // namespace vlm
