// The memory terms of a constructed rank (train/memory_terms.h).
#include "train/memory_terms.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"

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

std::string format_bytes(double b) {
  char buf[32];
  if (b >= double(1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= double(1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

}  // namespace vlm
