// Validation loss, caption accuracy and relevance pictures (model/evaluate.h).
#include "model/evaluate.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "data/image/png.h"
#include "io/atomic_file.h"
#include "model/generate.h"
#include "picture/relevance_picture.h"

namespace vlm {

std::map<std::string, int32_t> class_captions(const DatasetReader& d, const std::string& split) {
  std::map<std::string, int32_t> out;
  std::set<std::string> ambiguous;
  const auto& labels = d.labels();
  if (labels.empty()) return out;
  for (int64_t j : d.split_captions(split)) {
    const int32_t label = labels[size_t(d.caption_image(j))];
    if (label < 0) continue;
    std::string text = d.caption(j);
    auto [it, fresh] = out.emplace(text, label);
    if (!fresh && it->second != label) ambiguous.insert(text);
  }
  for (const std::string& t : ambiguous) out.erase(t);
  return out;
}

ImageCaptions image_captions(const DatasetReader& d, const std::string& split) {
  ImageCaptions out;
  for (int64_t j : d.split_captions(split)) out[d.caption_image(j)].push_back(d.caption(j));
  return out;
}

std::vector<uint8_t> relevance_picture(VlmModel& model, Stream& s, const Batch& b, int i, int* side) {
  const int G = model.config().vision.grid(), S = model.config().vision.image_size;
  s.synchronize();
  const std::vector<float> r = to_vector_f32(model.stage().relevance().slice(i, i + 1));
  RelevanceGrid grid{r.data(), G, model.stage().allocations()[size_t(i)].level.data(),
                     model.config().scorers.lod.region};
  // Small images are drawn enlarged (nearest neighbour) so that the grid leaves the
  // pixels visible.
  const int f = std::max(1, kPictureSide / S), P = S * f;
  std::vector<uint8_t> big(size_t(P) * P * 3);
  const uint8_t* src = b.images_u8.data() + size_t(i) * S * S * 3;
  for (int y = 0; y < P; ++y)
    for (int x = 0; x < P; ++x)
      for (int c = 0; c < 3; ++c) big[(size_t(y) * P + x) * 3 + c] = src[(size_t(y / f) * S + x / f) * 3 + c];
  *side = P;
  return render_relevance(ImageView::packed(big.data(), P, P), grid);
}

double validation_loss(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                       int batches, std::vector<std::vector<uint8_t>>* pictures, double* tokens) {
  double sum = 0, count = 0;
  for (int i = 0; i < batches; ++i) {
    Batch b = loader.next();
    if (b.size() == 0) continue;
    MicroBatch mb = make_micro_batch(b, rule, uint64_t(i));
    mb.loss_norm = 1.0;  // the backbone returns the sum of the token losses
    model.front_forward(s, mb);
    sum += model.llm_forward_backward(s, false);
    count += double(mb.counted());
    if (pictures && i == 0) {
      const size_t n = std::min(pictures->size(), size_t(b.size()));
      pictures->resize(n);
      int side = 0;
      for (size_t k = 0; k < n; ++k) (*pictures)[k] = relevance_picture(model, s, b, int(k), &side);
    }
  }
  const std::vector<double> t = all_reduce_values(dp, s, {sum, count});
  if (tokens) *tokens = t[1];
  return t[1] > 0 ? t[0] / t[1] : 0.0;
}

AccuracyReport caption_accuracy(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                                const Tokenizer& tok, const std::map<std::string, int32_t>& classes,
                                int64_t images, int max_new, int pictures, const std::string& dir, bool root,
                                const ImageCaptions* refs) {
  AccuracyReport rep;
  const auto& labels = loader.dataset().labels();
  const auto& names = loader.dataset().class_names();
  VLM_REQUIRE(!labels.empty() || refs, loader.dataset().path(), ": caption accuracy needs /labels (a labelled dataset)");
  TextRule decode_rule = rule;
  decode_rule.captions = false;
  const int64_t steps = loader.steps_per_epoch();
  // With layers fetched from the DP group (ZeRO-3), every rank decodes in lockstep: the
  // batches until every rank has seen its images (model/generate.h).
  Communicator* lockstep = model.layer_fetch() ? &dp : nullptr;
  auto more = [&](bool mine) { return lockstep ? all_reduce_values(dp, s, {mine ? 1.0 : 0.0})[0] > 0 : mine; };
  int64_t seen = 0, drawn = 0;
  for (int64_t step = 0; step < steps && more(images == 0 || seen < images); ++step) {
    Batch b = loader.next();
    const int n = b.size();
    VLM_ASSERT(n > 0 || !lockstep, "an empty batch in lockstep");
    if (n == 0) continue;
    MicroBatch mb = make_micro_batch(b, decode_rule, uint64_t(step));
    model.front_forward(s, mb);
    GenerateOptions g;
    g.max_new = max_new, g.eos = tok.eos(), g.lockstep = lockstep;
    const std::vector<std::vector<int32_t>> gen = generate_captions(model, s, mb.prompt, g);
    for (int i = 0; root && i < n && drawn < pictures; ++i, ++drawn) {
      int side = 0;
      const std::vector<uint8_t> rgb = relevance_picture(model, s, b, i, &side);
      const std::string path = dir + "/relevance_" + std::to_string(drawn) + ".png";
      write_file_atomic(path, encode_png(rgb.data(), side, side, 3));
    }
    for (int i = 0; i < n; ++i) {
      if (!b.is_pad.empty() && b.is_pad[size_t(i)]) continue;
      if (images > 0 && seen >= images) break;
      ++seen;
      const int32_t label = labels.empty() ? -1 : labels[size_t(b.image_index[size_t(i)])];
      const std::string text = tok.decode(gen[size_t(i)]);
      const auto it = classes.find(text);
      bool ok = it != classes.end() && it->second == label;
      rep.correct += ok;
      std::string ref;  // an unlabelled image's example shows its first caption
      if (refs) {
        const auto r = refs->find(b.image_index[size_t(i)]);
        const bool exact = r != refs->end() && std::find(r->second.begin(), r->second.end(), text) != r->second.end();
        rep.exact += exact;
        if (labels.empty()) ref = r != refs->end() ? r->second.front() : "?", ok = exact;
      }
      if (root && rep.examples.size() < 8)
        rep.examples.push_back((label >= 0 && size_t(label) < names.size() ? names[size_t(label)] : ref) +
                               " | " + text + (ok ? "" : "   (wrong)"));
    }
  }
  const std::vector<double> t = all_reduce_values(dp, s, {double(seen), double(rep.correct), double(rep.exact)});
  rep.images = int64_t(t[0]), rep.correct = int64_t(t[1]), rep.exact = int64_t(t[2]);
  return rep;
}

}  // namespace vlm
