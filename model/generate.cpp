// generate_captions (model/generate.h): the stopping rule, over either decoder.
#include "model/generate.h"

#include "base/error.h"

namespace vlm {

std::vector<std::vector<int32_t>> generate_captions(VlmModel& model, Stream& s,
                                                    const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& o) {
  VLM_ASSERT(o.kv_cache || o.decode.greedy(), "generate_captions: the full-recompute decoder is greedy only");
  const size_t n = prompts.size();
  const int64_t max_text = model.config().max_text;
  std::vector<std::vector<int32_t>> gen(n);
  std::vector<bool> done(n, false);
  std::vector<int32_t> next, feed(n, -1);
  bool mine_done = false;  // every caption of this rank is done
  for (int t = 0; t < o.max_new; ++t) {
    if (mine_done)
      model.fetch_layers(s);  // lockstep: the step's fetches, nothing to compute
    else if (o.kv_cache)
      next = t == 0 ? model.decode_start(s, o.decode) : model.decode_next(s, feed);
    else
      next = model.greedy_next(s, gen);
    bool all = true;
    for (size_t i = 0; i < n && !mine_done; ++i) {
      feed[i] = -1;
      if (done[i]) continue;
      if (next[i] == o.eos || int64_t(gen[i].size() + prompts[i].size()) + 1 >= max_text)
        done[i] = true;
      else
        gen[i].push_back(feed[i] = next[i]);
      all = all && done[i];
    }
    mine_done = all;  // identical on every TP rank: the same logits
    if (o.lockstep ? all_reduce_values(*o.lockstep, s, {mine_done ? 0.0 : 1.0})[0] == 0 : mine_done) break;
  }
  return gen;
}

}  // namespace vlm
