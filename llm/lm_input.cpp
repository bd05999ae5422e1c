// make_lm_input and make_vlm_input: packed micro-batches from host vectors (lm_input.h).
#include "llm/lm_input.h"

#include <algorithm>

#include "core/error.h"
#include "llm/loss_parallel.h"

namespace vlm {

namespace {

// cu_seqlens, positions and max_seqlen of `in` from the sample boundaries (T = cu.back()).
void set_samples(Backend& b, LmInput& in, const std::vector<int32_t>& cu_seqlens) {
  VLM_REQUIRE(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0,
              "lm input: cu_seqlens must start at 0 and hold at least one sample");
  const int64_t T = cu_seqlens.back();
  in.n_tokens = T;
  std::vector<int32_t> pos(static_cast<size_t>(std::max<int64_t>(T, 0)));
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) {
    const int32_t a = cu_seqlens[i], e = cu_seqlens[i + 1];
    VLM_REQUIRE(e > a, "lm input: cu_seqlens must increase strictly, got ", a, " then ", e);
    in.max_seqlen = std::max(in.max_seqlen, int(e - a));
    for (int32_t t = a; t < e; ++t) pos[size_t(t)] = t - a;
  }
  in.cu_seqlens = to_backend(b, Tensor::from_vector(cu_seqlens, Shape{int64_t(cu_seqlens.size())}));
  in.positions = to_backend(b, Tensor::from_vector(pos, Shape{T}));
}

void set_targets(Backend& b, LmInput& in, const std::vector<int32_t>& targets) {
  if (targets.empty()) return;
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(int64_t(targets.size()) == T, "lm input: ", targets.size(), " targets for T=", T);
  for (int32_t t : targets) {
    VLM_REQUIRE(t >= 0 || t == kIgnoreIndex, "lm input: target ", t, " (expected >= 0 or ", kIgnoreIndex, ")");
    in.n_counted += t != kIgnoreIndex;
    in.max_id = std::max(in.max_id, t);
  }
  in.targets = to_backend(b, Tensor::from_vector(targets, Shape{T}));
}

}  // namespace

LmInput make_lm_input(Backend& b, const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& ids,
                      const std::vector<int32_t>& targets, const Tensor& embeddings) {
  LmInput in;
  set_samples(b, in, cu_seqlens);
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(ids.empty() != !embeddings.defined(), "lm input: give exactly one of token ids and embeddings");
  if (!ids.empty()) {
    VLM_REQUIRE(int64_t(ids.size()) == T, "lm input: ", ids.size(), " token ids for T=", T);
    for (int32_t id : ids) {
      VLM_REQUIRE(id >= 0, "lm input: token id ", id, " (expected >= 0)");
      in.max_id = std::max(in.max_id, id);
    }
    in.ids = to_backend(b, Tensor::from_vector(ids, Shape{T}));
  } else {
    VLM_REQUIRE(embeddings.ndim() == 2 && embeddings.size(0) == T, "lm input: embeddings ", embeddings.str(),
                " for T=", T);
    in.embeddings = embeddings;
  }
  set_targets(b, in, targets);
  return in;
}

LmInput make_vlm_input(Backend& b, const std::vector<VlmSample>& samples, const Tensor& visual) {
  VLM_REQUIRE(!samples.empty(), "vlm input: no sample");
  std::vector<int32_t> cu{0}, ids, targets, rows;
  for (size_t i = 0; i < samples.size(); ++i) {
    const VlmSample& s = samples[i];
    const int64_t n = int64_t(s.n_visual) + int64_t(s.prompt.size()) + int64_t(s.caption.size());
    VLM_REQUIRE(s.n_visual >= 0 && n >= 1 && int64_t(cu.back()) + n <= INT32_MAX, "vlm input: sample ", i, " has ",
                s.n_visual, " visual rows, ", s.prompt.size(), " prompt and ", s.caption.size(),
                " caption tokens (expected n_visual >= 0, at least one row, T < 2^31)");
    const int32_t t0 = cu.back();
    for (int32_t v = 0; v < s.n_visual; ++v) rows.push_back(t0 + v);
    ids.insert(ids.end(), size_t(s.n_visual), kVisualRowId);
    for (const std::vector<int32_t>* part : {&s.prompt, &s.caption})
      for (int32_t id : *part) {
        VLM_REQUIRE(id >= 0, "vlm input: sample ", i, ": token id ", id, " (expected >= 0)");
        ids.push_back(id);
      }
    // Row t predicts row t+1's id where that row is a caption token.
    const int64_t first_caption = int64_t(s.n_visual) + int64_t(s.prompt.size());
    for (int64_t r = 0; r < n; ++r)
      targets.push_back(r + 1 >= first_caption && r + 1 < n ? s.caption[size_t(r + 1 - first_caption)]
                                                             : kIgnoreIndex);
    cu.push_back(int32_t(t0 + n));
  }
  const int64_t Tv = int64_t(rows.size());
  VLM_REQUIRE(Tv == 0 ? !visual.defined() || visual.numel() == 0 : visual.defined() && visual.ndim() == 2 &&
                                                                       visual.size(0) == Tv,
              "vlm input: the samples have ", Tv, " visual rows, the visual embeddings are ",
              visual.defined() ? visual.str() : "undefined");
  LmInput in;
  set_samples(b, in, cu);
  for (int32_t id : ids) in.max_id = std::max(in.max_id, id);
  in.ids = to_backend(b, Tensor::from_vector(ids, Shape{in.n_tokens}));
  in.visual_rows = to_backend(b, Tensor::from_vector(rows, Shape{Tv}));
  in.n_visual = Tv;
  if (Tv > 0) in.embeddings = visual;
  set_targets(b, in, targets);
  return in;
}

}  // namespace vlm
