// make_micro_batch (model/batch.h).
#include "model/batch.h"

#include <algorithm>

#include "base/error.h"

namespace vlm {

MicroBatch make_micro_batch(const Batch& b, const TextRule& rule, uint64_t seed) {
  VLM_REQUIRE(!b.float_images, "the model takes u8 images");
  const int n = b.size();
  MicroBatch mb;
  mb.images = n, mb.seed = seed;
  mb.pixels = b.images_u8.data(), mb.texture = b.texture.data();
  mb.prompt.resize(size_t(n)), mb.caption.resize(size_t(n));
  const bool has_prompts = !b.prompt_lengths.empty();
  int64_t at = 0, pat = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t>& p = mb.prompt[size_t(i)];
    p.push_back(rule.bos);
    const int32_t pl = has_prompts ? b.prompt_lengths[size_t(i)] : 0;
    if (pl > 0)
      p.insert(p.end(), b.prompt_tokens.begin() + pat, b.prompt_tokens.begin() + pat + pl);
    else
      p.insert(p.end(), rule.instruction.begin(), rule.instruction.end());
    pat += pl;
    if (int64_t(p.size()) > rule.max_text - 1) p.resize(size_t(rule.max_text - 1));
    const int32_t tl = b.token_lengths.empty() ? 0 : b.token_lengths[size_t(i)];
    const bool pad = !b.is_pad.empty() && b.is_pad[size_t(i)];
    if (rule.captions && !pad && tl > 1) {
      // Tokens are BOS caption EOS: the caption proper starts after BOS.
      auto first = b.tokens.begin() + at + 1, last = b.tokens.begin() + at + tl;
      const int64_t room = rule.max_text - int64_t(p.size());
      mb.caption[size_t(i)].assign(first, first + std::min<int64_t>(room, last - first));
    }
    at += tl;
  }
  return mb;
}

}  // namespace vlm
