// What `vlm ablate` measures on a trained model beyond the validation loss
// (docs/ablations.md), over a split of a dataset with caption boxes (`vlm data build
// --data.from scenes`), forward only, on the calling stream:
//  - answer accuracy: the greedy answer to the sample's question (model/generate.h, at
//    most max_new tokens) equals the sample's own caption text exactly;
//  - relevance precision (scorers/relevance_precision.h) of the relevance map of each
//    sample's image against the box its question is about, and detail precision (same
//    file) of its level-of-detail allocation against that box;
//  - the accuracy on the samples whose box is wholly at full detail (what the answers
//    lose where the allocation was right: the rest is what they lose where it was not).
// Padding repeats of the sampler are not counted; every sum is all-reduced over DP.
#pragma once
#include <cstdint>
#include <vector>

#include "data/load/loader.h"
#include "data/text/tokenizer.h"
#include "model/batch.h"
#include "model/vlm_model.h"
#include "parallel/communicator.h"
#include "scorers/relevance_precision.h"

namespace vlm {

struct AnswerReport : RelevancePrecision {
  int64_t samples = 0, correct = 0;   // answered samples, exact answers
  int64_t visual_tokens = 0;          // the answered samples' visual tokens (their allocations)
  DetailPrecision detail;
  int64_t detailed = 0, detailed_correct = 0;  // samples whose box is wholly at full detail, their exact answers
  double tokens_per_image() const { return samples ? double(visual_tokens) / double(samples) : 0.0; }
  double accuracy() const { return samples ? double(correct) / double(samples) : 0.0; }
  double detailed_accuracy() const { return detailed ? double(detailed_correct) / double(detailed) : -1.0; }
};

// Every sample of `loader` (one epoch; the split cut by LoaderOptions::limit when set).
AnswerReport answer_accuracy(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                             const Tokenizer& tok, int max_new);

}  // namespace vlm
