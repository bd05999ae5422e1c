// Evaluation of a VLM during and after training (forward only, on the calling stream):
//  - validation_loss: the mean caption-token cross-entropy over `batches` batches of a
//    split, over every DP rank (sums of losses and of counted tokens are all-reduced).
//  - caption_accuracy: greedy-decodes a caption for every image of a split (with the KV
//    cache, stopping at EOS or max_new tokens: model/generate.h) and counts an image correct
//    when the decoded caption is one of the captions the dataset gives its label's
//    images (class_captions), i.e. it names the right class in a known phrasing. Each DP
//    rank decodes its shard; the counts are all-reduced. Padding repeats are not counted.
//    With reference captions (image_captions), also the exact-match count: the decoded
//    caption equals one of the image's own captions; then labels are optional.
//  - relevance pictures of the first images (picture/relevance_picture.h) on rank 0.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/load/loader.h"
#include "data/text/tokenizer.h"
#include "model/batch.h"
#include "model/vlm_model.h"
#include "parallel/communicator.h"

namespace vlm {

// caption text -> label, over the captions of `split` whose image has a label (a text
// given to images of two labels is left out: it names no single class).
std::map<std::string, int32_t> class_captions(const DatasetReader& d, const std::string& split);
// image index -> the texts of its captions, over the images of `split`.
using ImageCaptions = std::unordered_map<int64_t, std::vector<std::string>>;
ImageCaptions image_captions(const DatasetReader& d, const std::string& split);

// pictures: when given, the relevance pictures (relevance_picture) of the first images of
// the first batch, up to its size on entry. tokens: when given, the caption tokens counted.
double validation_loss(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                       int batches, std::vector<std::vector<uint8_t>>* pictures = nullptr, double* tokens = nullptr);
// The relevance picture of image i of the last forward: packed RGB [side, side, 3], the
// image enlarged by an integer factor to about kPictureSide pixels (side = S x factor).
inline constexpr int kPictureSide = 256;
std::vector<uint8_t> relevance_picture(VlmModel& model, Stream& s, const Batch& b, int i, int* side);

struct AccuracyReport {
  int64_t images = 0, correct = 0;
  int64_t exact = 0;                  // decoded == one of the image's captions (with refs)
  std::vector<std::string> examples;  // "label | decoded" of the first few (rank 0)
  double accuracy() const { return images ? double(correct) / double(images) : 0.0; }
  double exact_accuracy() const { return images ? double(exact) / double(images) : 0.0; }
};

// images: at most this many per DP rank (0 = the whole split). pictures: relevance
// pictures of the first images written to <dir>/relevance_<i>.png (rank `root` only).
// refs: the reference captions of the split's images (exact matches counted); without
// them the dataset must have labels.
AccuracyReport caption_accuracy(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                                const Tokenizer& tok, const std::map<std::string, int32_t>& classes,
                                int64_t images, int max_new, int pictures, const std::string& dir, bool root,
                                const ImageCaptions* refs = nullptr);

}  // namespace vlm
