// The memory terms of a constructed rank (train/memory_terms.h).
#include "train/memory_terms.h"

#include <algorithm>

#include "base/error.h"
#include "core/reserving_backend.h"
#include "parallel/stand_in_communicator.h"

namespace vlm {

std::vector<MemoryTerms::Term> MemoryTerms::terms() const {
  return {{"parameters", params}, {"bf16 weight copies", bf16_copies}, {"gathered layers", gathered},
          {"gradients", grads}, {"optimizer state", optimizer}, {"activations", activations}, {"model buffers", buffers}};
}

MemoryTerms::Term MemoryTerms::largest() const {
  const std::vector<Term> t = terms();
  return *std::max_element(t.begin(), t.end(), [](const Term& a, const Term& b) { return a.bytes < b.bytes; });
}

std::string MemoryTerms::str() const {
  std::string s;
  for (const Term& t : terms()) s += std::string(t.name) + " " + format_bytes(double(t.bytes)) + ", ";
  return s + "total " + std::to_string(total()) + " B";
}

MemoryTerms memory_terms(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated) {
  MemoryTerms m;
  for (const ModuleParams& mod : model.modules()) {
    m.params += mod.table->value_bytes();
    m.bf16_copies += mod.table->working_bytes();
    m.gathered += mod.table->pool_bytes();
    m.grads += mod.table->grad_bytes();
  }
  m.grads += dp.wire_bytes();
  m.optimizer += opt.state_bytes() + dp.shard_bytes() + dp.staging_bytes();
  m.activations = size_t(model.activation_bytes());
  const size_t named = m.params + m.bf16_copies + m.gathered + m.grads + m.optimizer + m.activations;
  VLM_ASSERT(allocated >= named, "memory terms: ", named, " bytes named, ", allocated, " allocated");
  m.buffers = allocated - named;
  return m;
}

RankPlan rank_plan(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated) {
  RankPlan r;
  r.memory = memory_terms(model, dp, opt, allocated);
  for (const ModuleParams& mod : model.modules()) {
    r.layouts.push_back(mod.table->layout());
    r.trains.push_back(mod.table->trains());
  }
  r.scorer_params = model.stage().scorer_param_count();
  return r;
}

RankPlan plan_rank(const VlmConfig& config, const RankLayout& l, const OptimOptions& o) {
  ReservingBackend b;
  StandInCommunicator tp("tp", l.tp, l.tp_rank), dp("dp", l.dp, l.dp_rank), self("self", 1, 0);
  VlmConfig cfg = config;
  cfg.sharding = DpSharding{l.zero, l.dp, l.dp_rank};
  VlmModel model(cfg, b, tp, self);
  std::vector<bool> trainable;
  for (int m = 0; m < kNumModules; ++m) trainable.push_back(!cfg.frozen[size_t(m)]);
  const std::vector<ModuleParams> mods = model.modules();
  DpGrads dpg(mods, trainable, dp, l.zero, l.bucket_mb, b, l.grad_wire);
  AdamW opt(mods, trainable, dpg, b, o);
  return rank_plan(model, dpg, opt, b.allocated());
}

}  // namespace vlm
