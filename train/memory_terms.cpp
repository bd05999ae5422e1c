// The memory terms of a constructed rank (train/memory_terms.h).
#include "train/memory_terms.h"

#include <algorithm>

#include "base/error.h"
#include "core/reserving_backend.h"
#include "parallel/stand_in_communicator.h"

namespace vlm {

std::vector<MemoryTerms::Term> MemoryTerms::terms() const {
  return {{"parameters", params}, {"bf16 weight copies", bf16_copies}, {"gradients", grads}, {"optimizer state", optimizer},
          {"activations", activations}, {"model buffers", buffers}};
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
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    m.params += mods[i].table->value_arena().bytes();
    m.bf16_copies += mods[i].table->working_bytes();
    m.grads += mods[i].table->grad_bytes();
    // ZeRO-1 (optim/dp_grads.h): the reduced gradient shard and the values' gather buffer.
    if (dp.zero() > 0 && dp.owned(i).grad.defined()) {
      const DpGrads::Owned& o = dp.owned(i);
      m.optimizer += o.grad.nbytes() + size_t(std::max<int64_t>(1, o.end - o.begin)) * 4;
    }
  }
  m.grads += dp.wire_bytes();
  m.optimizer += opt.state_bytes();
  m.activations = size_t(model.activation_bytes());
  const size_t named = m.params + m.bf16_copies + m.grads + m.optimizer + m.activations;
  VLM_ASSERT(allocated >= named, "memory terms: ", named, " bytes named, ", allocated, " allocated");
  m.buffers = allocated - named;
  return m;
}

RankPlan rank_plan(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated) {
  RankPlan r;
  r.memory = memory_terms(model, dp, opt, allocated);
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    r.owned.push_back(dp.owned(i));
    r.owned.back().grad = Tensor{};  // the figures only: the plan outlives the objects
    r.grad_elems.push_back(int64_t(mods[i].table->grad_bytes() / 4));
  }
  r.scorer_params = model.stage().scorer_param_count();
  return r;
}

RankPlan plan_rank(const VlmConfig& cfg, const RankLayout& l, const OptimOptions& o) {
  ReservingBackend b;
  StandInCommunicator tp("tp", l.tp, l.tp_rank), dp("dp", l.dp, l.dp_rank), self("self", 1, 0);
  VlmModel model(cfg, b, tp, self);
  std::vector<bool> trainable;
  for (int m = 0; m < kNumModules; ++m) trainable.push_back(!cfg.frozen[size_t(m)]);
  const std::vector<ModuleParams> mods = model.modules();
  DpGrads dpg(mods, trainable, dp, l.zero, l.bucket_mb, b, l.grad_wire);
  AdamW opt(mods, trainable, dpg, b, o);
  return rank_plan(model, dpg, opt, b.allocated());
}

}  // namespace vlm
