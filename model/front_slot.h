// FrontSlot: the state of one micro-batch in VlmModel's front end (model/vlm_model.h):
// everything its forward writes before the backbone runs and its backward reads after:
//   the loaded micro-batch   pixels, texture, prompt ids and averaging matrix (device),
//                            the samples, prompt flags, seed and loss divisor (host)
//   the encoder              a VisionEncoder and its activation arena
//   the relevance stage      a RelevanceStage (its scorer, balancer and LOD activations),
//                            bound to the model's one scorer parameter table
//   the query                q [B, C] and its gradient
//   the gradients back       dtokens [Tv, d_v] (the projector's), dF [B*G*G, d_v]
//   the LM input             packed into planned buffers (llm/lm_input.h) by the front end
// Slot 0's encoder is the model's (it owns the encoder's weights and gradients). A
// second slot (VlmConfig::front_slots = 2: micro-batch m+1's front end runs while the
// backbone runs m, train/step.h) has an encoder with activations of its own over slot
// 0's parameters (vision/encoder.h, the sharing constructor): the same weights, and its
// gradients accumulate into slot 0's arena (every encoder backward is on `vision`).
// Everything is planned at construction for max_images images of at most max_text text
// tokens; nothing is allocated per micro-batch (the stage's scratch grows once).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "llm/lm_input.h"
#include "scorers/stage.h"
#include "vision/encoder.h"

namespace vlm {

struct VlmConfig;

class FrontSlot {
 public:
  // shared: slot 0's encoder, whose parameters this slot's encoder uses (null: its own).
  FrontSlot(const VlmConfig& cfg, Backend& b, Communicator& tp, Communicator& self, VisionEncoder* shared = nullptr);
  FrontSlot(const FrontSlot&) = delete;
  FrontSlot& operator=(const FrontSlot&) = delete;

  VisionEncoder& vision() { return *vision_; }
  RelevanceStage& stage() { return *stage_; }
  ImageEncoder& features() { return *features_; }  // the stage reads F (and gives dF) through it

  // Device buffers, planned for Bmax = max_images (views cut per micro-batch).
  Tensor pixels, texture;       // [Bmax,S,S,3] u8, [Bmax,13,G,G]
  Tensor dF;                    // [Bmax*G*G, d_v] encoder feature gradient (+= by the stage)
  Tensor prompt_ids, avg;       // [Pmax] i32, [Bmax*Pmax] prompt averaging matrix
  Tensor query, dquery;         // [Bmax, C]
  Tensor dtokens;               // [Tv, d_v] (Tv <= Bmax*max_tokens)
  LmInputBuffers input_buffers;  // the backbone's packed input (+ SP padding)
  // The micro-batch (host).
  int64_t B = 0, P = 0;
  uint64_t seed = 0;
  LodConfig::Step lod;  // MicroBatch::lod
  double loss_norm = 1.0;
  std::vector<bool> has_prompt;
  std::vector<VlmSample> samples;
  std::vector<int32_t> ids_host;  // staging of prompt_ids (reserved)
  std::vector<float> avg_host;    // staging of avg (reserved)
  LmInput input;                  // views of input_buffers, packed by VlmModel::scorers_finish

 private:
  class Features;
  std::unique_ptr<VisionEncoder> vision_;
  std::unique_ptr<RelevanceStage> stage_;
  std::unique_ptr<ImageEncoder> features_;
};

}  // namespace vlm
