// Captions of the current micro-batch of a VlmModel (after VlmModel::front_forward): each sample's tokens until EOS (not included),
// max_new tokens, or the model's text budget, whichever comes first. The budget is the
// rule the training text was cut with (model/batch.h): a sample stops when
// prompt + caption + 1 >= VlmConfig::max_text.
// Decoders: the KV cache (VlmModel::decode_start / decode_next; greedy or sampled per
// `decode`), or the full-recompute reference (VlmModel::greedy_next; greedy only). Both
// give the same greedy captions (tests/train/test_decode.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "llm/sampling.h"
#include "model/vlm_model.h"

namespace vlm {

struct GenerateOptions {
  int max_new = 24;      // tokens per caption at most
  int32_t eos = -1;      // the token that ends a caption
  bool kv_cache = true;  // false: the full-recompute reference (greedy only)
  DecodeOptions decode;  // greedy by default
  // The DP group, when the model fetches its layers from it (VlmModel::set_layer_fetch,
  // ZeRO-3): every rank then decodes until every rank is done (a rank whose captions are
  // done takes part in each step's fetches without computing); null: each rank stops alone.
  Communicator* lockstep = nullptr;
};

// prompts: the prompt of every sample of the micro-batch (MicroBatch::prompt).
std::vector<std::vector<int32_t>> generate_captions(VlmModel& model, Stream& s,
                                                    const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& o);

}  // namespace vlm
