// The run state a checkpoint holds beside its tensors, in either form
// (checkpoint/checkpoint.h, docs/checkpoints.md).
#pragma once
#include <cstdint>
#include <string>

#include "data/load/sampler.h"

namespace vlm {

struct CheckpointState {
  int64_t step = 0;  // optimizer steps done
  SamplerState sampler;
  uint64_t seed = 0;
  int saved_tp = 1, saved_dp = 1, zero = 0;
  int64_t global_batch = 0, micro_batches = 1;
};

// The data position against the step, as a reader checks it (`what` names the field's
// place): each optimizer step draws micro_batches batches and an epoch holds at least
// one, so the sampler's epoch is at most micro_batches x step.
void check_data_position(const CheckpointState& s, const std::string& what);

// The state and the run's texts: every option as INI (Config::dump_ini), the options
// the run was given (Config::dump_ini(true), which readers read back) and tokenizer.json.
struct CheckpointMeta {
  CheckpointState state;
  std::string config, options, tokenizer;
};

}  // namespace vlm
