// make_lm_input: a packed micro-batch from host vectors (see backbone.h).
#include <algorithm>

#include "llm/backbone.h"

namespace vlm {

LmInput make_lm_input(Backend& b, const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& ids,
                      const std::vector<int32_t>& targets, const Tensor& embeddings) {
  VLM_REQUIRE(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0,
              "lm input: cu_seqlens must start at 0 and hold at least one sample");
  const int64_t T = cu_seqlens.back();
  LmInput in;
  in.n_tokens = T;
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) {
    const int32_t a = cu_seqlens[i], e = cu_seqlens[i + 1];
    VLM_REQUIRE(e > a, "lm input: cu_seqlens must increase strictly, got ", a, " then ", e);
    in.max_seqlen = std::max(in.max_seqlen, int(e - a));
    for (int32_t t = a; t < e; ++t) pos[size_t(t)] = t - a;
  }
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
  if (!targets.empty()) {
    VLM_REQUIRE(int64_t(targets.size()) == T, "lm input: ", targets.size(), " targets for T=", T);
    for (int32_t t : targets) {
      VLM_REQUIRE(t >= 0 || t == kIgnoreIndex, "lm input: target ", t, " (expected >= 0 or ", kIgnoreIndex, ")");
      in.n_counted += t != kIgnoreIndex;
      in.max_id = std::max(in.max_id, t);
    }
    in.targets = to_backend(b, Tensor::from_vector(targets, Shape{T}));
  }
  in.cu_seqlens = to_backend(b, Tensor::from_vector(cu_seqlens, Shape{int64_t(cu_seqlens.size())}));
  in.positions = to_backend(b, Tensor::from_vector(pos, Shape{T}));
  return in;
}

}  // namespace vlm
