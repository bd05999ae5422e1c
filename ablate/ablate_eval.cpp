// Answer accuracy and relevance precision of `vlm ablate` (ablate/ablate_eval.h).
#include "ablate/ablate_eval.h"

#include "base/error.h"
#include "model/generate.h"

namespace vlm {

AnswerReport answer_accuracy(VlmModel& model, Stream& s, Communicator& dp, Loader& loader, const TextRule& rule,
                             const Tokenizer& tok, int max_new) {
  AnswerReport rep;
  const DatasetReader& d = loader.dataset();
  VLM_REQUIRE(d.has_boxes(), d.path(), ": answer accuracy and relevance precision need caption boxes "
              "(a scenes dataset: vlm data build --data.from scenes)");
  const int G = model.config().vision.grid(), S = model.config().vision.image_size;
  const int R = model.config().scorers.lod.region;
  TextRule decode_rule = rule;
  decode_rule.captions = false;
  const int64_t steps = loader.steps_per_epoch();
  for (int64_t step = 0; step < steps; ++step) {
    Batch b = loader.next();
    const int n = b.size();
    if (n == 0) continue;
    MicroBatch mb = make_micro_batch(b, decode_rule, uint64_t(step));
    model.front_forward(s, mb);
    s.synchronize();
    const std::vector<float> r = to_vector_f32(model.stage().relevance());  // [B, G*G]
    const std::vector<int64_t> cu = model.stage().offsets();
    const std::vector<ImageLod> lods = model.stage().allocations();
    GenerateOptions g;
    g.max_new = max_new, g.eos = tok.eos();
    const std::vector<std::vector<int32_t>> gen = generate_captions(model, s, mb.prompt, g);
    for (int i = 0; i < n; ++i) {
      if (!b.is_pad.empty() && b.is_pad[size_t(i)]) continue;
      ++rep.samples;
      rep.visual_tokens += cu[size_t(i) + 1] - cu[size_t(i)];
      const bool right = tok.decode(gen[size_t(i)]) == d.caption(b.caption_index[size_t(i)]);
      const float* box = b.boxes.data() + size_t(i) * 4;
      rep.correct += right;
      add_relevance_precision(r.data() + size_t(i) * G * G, G, S, box, rep);
      if (add_detail_precision(lods[size_t(i)], G, R, S, box, rep.detail))
        ++rep.detailed, rep.detailed_correct += right;
    }
  }
  const std::vector<double> t = all_reduce_values(
      dp, s, {double(rep.samples), double(rep.correct), double(rep.boxed), rep.top_cells, rep.hits, rep.chance_hits,
              double(rep.visual_tokens), rep.detail.box_cells, rep.detail.detailed, double(rep.detailed),
              double(rep.detailed_correct)});
  rep.samples = int64_t(t[0]), rep.correct = int64_t(t[1]), rep.boxed = int64_t(t[2]);
  rep.top_cells = t[3], rep.hits = t[4], rep.chance_hits = t[5], rep.visual_tokens = int64_t(t[6]);
  rep.detail.box_cells = t[7], rep.detail.detailed = t[8], rep.detailed = int64_t(t[9]);
  rep.detailed_correct = int64_t(t[10]);
  return rep;
}

}  // namespace vlm
