// From the loader's batches (data/load/loader.h) to the model's micro-batches
// (model/vlm_model.h): the text of every sample becomes
//   prompt  = BOS + (the sample's prompt tokens, or the instruction's when it has none)
//   caption = the caption tokens after BOS, EOS included (what the loss counts)
// cut so that prompt + caption <= max_text (the caption's end goes first). A padding
// repeat of the sampler (Batch::is_pad) keeps its prompt and gets an empty caption, so
// it counts nothing and the global batch stays exactly the sampler's.
#pragma once
#include <cstdint>
#include <vector>

#include "data/load/loader.h"
#include "model/vlm_model.h"

namespace vlm {

struct TextRule {
  int32_t bos = 0;
  std::vector<int32_t> instruction;  // encoded data.prompt (no BOS)
  int max_text = 48;
  bool captions = true;              // false: empty captions (decoding)
};

// `b` must outlive the result (pixels and texture point into it).
MicroBatch make_micro_batch(const Batch& b, const TextRule& rule, uint64_t seed);

}  // namespace vlm
