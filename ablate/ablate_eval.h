// What `vlm ablate` measures on a trained model beyond the validation loss
// (docs/ablations.md), over a split of a dataset with caption boxes (`vlm data build
// --data.from scenes`), forward only, on the calling stream:
//  - answer accuracy: the greedy answer to the sample's question (model/generate.h, at
//    most max_new tokens) equals the sample's own caption text exactly;
//  - relevance precision: for a sample whose asked-about box B (letterboxed pixels,
//    x0 <= x < x1, y0 <= y < y1) holds the centres of k >= 1 of the G x G cells
//    (cell (x, y) has its centre at ((x + 0.5) p, (y + 0.5) p), p = S / G), the k cells
//    of highest relevance r (ties: lower raster index first) are taken, and
//    precision = (sum over samples of those inside B) / (sum over samples of k).
//    Samples whose box holds no cell centre are left out. The chance level is the same
//    figure for k cells drawn uniformly at random: (sum of k * k / G^2) / (sum of k).
// Padding repeats of the sampler are not counted; every sum is all-reduced over DP.
#pragma once
#include <cstdint>
#include <vector>

#include "data/load/loader.h"
#include "data/text/tokenizer.h"
#include "model/batch.h"
#include "model/vlm_model.h"
#include "parallel/communicator.h"

namespace vlm {

struct AnswerReport {
  int64_t samples = 0, correct = 0;   // answered samples, exact answers
  int64_t boxed = 0;                  // samples counted by the relevance precision
  double top_cells = 0, hits = 0;     // sum of k, sum of top-k cells inside the box
  double chance_hits = 0;             // sum of k * k / G^2
  double accuracy() const { return samples ? double(correct) / double(samples) : 0.0; }
  double precision() const { return top_cells > 0 ? hits / top_cells : 0.0; }
  double chance() const { return top_cells > 0 ? chance_hits / top_cells : 0.0; }
};

// The precision counts of one image: r [G*G] relevance, box in pixels of the S x S image.
// Adds to rep (boxed, top_cells, hits, chance_hits) when the box holds a cell centre.
void add_relevance_precision(const float* r, int G, int S, const float box[4], AnswerReport& rep);

// Every sample of `loader` (one epoch; the split cut by LoaderOptions::limit when set).
AnswerReport answer_accuracy(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                             const Tokenizer& tok, int max_new);

}  // namespace vlm
