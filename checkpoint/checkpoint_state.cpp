// The run state's own rules (checkpoint/checkpoint_state.h), which both checkpoint forms
// check when they read it.
#include "checkpoint/checkpoint_state.h"

#include "base/error.h"

namespace vlm {

void check_data_position(const CheckpointState& s, const std::string& what) {
  VLM_REQUIRE(__int128(s.sampler.epoch) <= __int128(s.micro_batches) * s.step, what, ": sampler_epoch ",
              s.sampler.epoch, " is past the ", s.micro_batches, " x ", s.step, " batches that ", s.step,
              " steps of ", s.micro_batches, " micro-batches draw");
}

}  // namespace vlm
