// The bytes the backbone's collectives move on the TP group in a training step, as the
// Communicator counts them (bytes of the local input buffer of each call), for the
// planner (plan/plan_comm.h): the formula of llm/backbone.h ("Communication per step")
// with the mixed input (E = 1), per micro-batch of T packed tokens (sequence-parallel
// padding included), M micro-batches; the activations cross the TP regions in `act`
// bytes per element (the compute precision), the embedding's output and the loss
// statistics in f32; when the backbone trains, the TP-partial gradients (R: replicated
// KV weights when NKV < tp; S: norms, row biases and positions under sequence
// parallelism): once per step, but the layers' `layer_finalizes` times (M under ZeRO >= 2,
// whose step reduces each layer's after each micro-batch: train/step.h). Nothing at tp = 1.
#pragma once
#include <cstdint>

#include "llm/model_config.h"
#include "parallel/communicator.h"

namespace vlm {

CommCounters backbone_tp_bytes(const ModelConfig& m, int tp, int64_t T, int64_t act, int64_t M, bool trains,
                               int64_t layer_finalizes = 1);

}  // namespace vlm
