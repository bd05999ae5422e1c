// make_lm_input and make_vlm_input: packed micro-batches from host vectors (lm_input.h).
#include "llm/lm_input.h"

#include <algorithm>

#include "base/error.h"
#include "core/ops.h"
#include "llm/loss_parallel.h"

namespace vlm {

namespace {

// Positions restarting at 0 in every sample, into `pos` (resized to T = cu.back());
// returns the longest sample. Checks the boundaries (UserError).
int sample_positions(const std::vector<int32_t>& cu_seqlens, std::vector<int32_t>& pos) {
  VLM_REQUIRE(cu_seqlens.size() >= 2 && cu_seqlens.front() == 0,
              "lm input: cu_seqlens must start at 0 and hold at least one sample");
  pos.resize(static_cast<size_t>(std::max<int32_t>(cu_seqlens.back(), 0)));
  int longest = 0;
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) {
    const int32_t a = cu_seqlens[i], e = cu_seqlens[i + 1];
    VLM_REQUIRE(e > a, "lm input: cu_seqlens must increase strictly, got ", a, " then ", e);
    longest = std::max(longest, int(e - a));
    for (int32_t t = a; t < e; ++t) pos[size_t(t)] = t - a;
  }
  return longest;
}

// Checks the targets' range (UserError) and counts them into in.n_counted / in.max_id.
void count_targets(LmInput& in, const std::vector<int32_t>& targets) {
  for (int32_t t : targets) {
    VLM_REQUIRE(t >= 0 || t == kIgnoreIndex, "lm input: target ", t, " (expected >= 0 or ", kIgnoreIndex, ")");
    in.n_counted += t != kIgnoreIndex;
    in.max_id = std::max(in.max_id, t);
  }
}

// cu_seqlens, positions and max_seqlen of `in` from the sample boundaries (T = cu.back()).
void set_samples(Backend& b, LmInput& in, const std::vector<int32_t>& cu_seqlens) {
  std::vector<int32_t> pos;
  in.max_seqlen = sample_positions(cu_seqlens, pos);
  const int64_t T = cu_seqlens.back();
  in.n_tokens = T;
  in.cu_seqlens = to_backend(b, Tensor::from_vector(cu_seqlens, Shape{int64_t(cu_seqlens.size())}));
  in.positions = to_backend(b, Tensor::from_vector(pos, Shape{T}));
}

void set_targets(Backend& b, LmInput& in, const std::vector<int32_t>& targets) {
  if (targets.empty()) return;
  const int64_t T = in.n_tokens;
  VLM_REQUIRE(int64_t(targets.size()) == T, "lm input: ", targets.size(), " targets for T=", T);
  count_targets(in, targets);
  in.targets = to_backend(b, Tensor::from_vector(targets, Shape{T}));
}

// The host side of make_vlm_input: the rows [visual | prompt | caption] of every sample,
// then `pad_rows` rows of a padding sample, into the vectors (cleared first: within
// their capacity nothing is allocated). Returns Tv after checking `visual` against it.
int64_t pack_vlm_rows(std::span<const VlmSample> samples, int64_t pad_rows, const Tensor& visual,
                      std::vector<int32_t>& cu, std::vector<int32_t>& ids, std::vector<int32_t>& targets,
                      std::vector<int32_t>& rows) {
  VLM_REQUIRE(!samples.empty(), "vlm input: no sample");
  cu.assign(1, 0), ids.clear(), targets.clear(), rows.clear();
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
  if (pad_rows > 0) {  // a prompt of token 0 and no caption: nothing counted
    ids.insert(ids.end(), size_t(pad_rows), 0);
    targets.insert(targets.end(), size_t(pad_rows), kIgnoreIndex);
    cu.push_back(int32_t(cu.back() + pad_rows));
  }
  const int64_t Tv = int64_t(rows.size());
  VLM_REQUIRE(Tv == 0 ? !visual.defined() || visual.numel() == 0 : visual.defined() && visual.ndim() == 2 &&
                                                                       visual.size(0) == Tv,
              "vlm input: the samples have ", Tv, " visual rows, the visual embeddings are ",
              visual.defined() ? visual.str() : "undefined");
  return Tv;
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
  std::vector<int32_t> cu, ids, targets, rows;
  const int64_t Tv = pack_vlm_rows(samples, 0, visual, cu, ids, targets, rows);
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

LmInputBuffers::LmInputBuffers(Backend& b, int64_t max_tokens, int64_t max_samples)
    : max_tokens_(max_tokens), max_samples_(max_samples) {
  VLM_ASSERT(max_tokens >= 1 && max_samples >= 1, "lm input buffers: ", max_tokens, " tokens, ", max_samples, " samples");
  ids_ = Tensor::zeros(b, Shape{max_tokens}, DType::I32);
  rows_ = Tensor::zeros(b, Shape{max_tokens}, DType::I32);
  pos_ = Tensor::zeros(b, Shape{max_tokens}, DType::I32);
  targets_ = Tensor::zeros(b, Shape{max_tokens}, DType::I32);
  cu_ = Tensor::zeros(b, Shape{max_samples + 2}, DType::I32);  // + the padding sample
  for (auto* v : {&h_ids_, &h_rows_, &h_pos_, &h_targets_}) v->reserve(size_t(max_tokens));
  h_cu_.reserve(size_t(max_samples + 2));
}

size_t LmInputBuffers::bytes() const {
  return ids_.nbytes() + rows_.nbytes() + pos_.nbytes() + targets_.nbytes() + cu_.nbytes();
}

LmInput LmInputBuffers::pack(Stream& s, std::span<const VlmSample> samples, const Tensor& visual, int64_t pad_rows) {
  VLM_ASSERT(int64_t(samples.size()) <= max_samples_, "lm input buffers: ", samples.size(), " samples, planned for ",
             max_samples_);
  const int64_t Tv = pack_vlm_rows(samples, pad_rows, visual, h_cu_, h_ids_, h_targets_, h_rows_);
  LmInput in;
  in.max_seqlen = sample_positions(h_cu_, h_pos_);
  const int64_t T = h_cu_.back(), nb = int64_t(h_cu_.size());
  VLM_REQUIRE(T <= max_tokens_, "vlm input: a micro-batch of ", T, " rows, planned for at most ", max_tokens_);
  in.n_tokens = T, in.n_visual = Tv;
  for (int32_t id : h_ids_) in.max_id = std::max(in.max_id, id);
  count_targets(in, h_targets_);
  const auto up = [&](const Tensor& dst, std::vector<int32_t>& src, int64_t n) {
    if (n > 0) copy_from_host(s, dst.slice(0, n), Tensor(src.data(), Shape{n}, DType::I32, DeviceKind::CPU));
    return dst.slice(0, n);
  };
  in.ids = up(ids_, h_ids_, T);
  in.positions = up(pos_, h_pos_, T);
  in.targets = up(targets_, h_targets_, T);
  in.visual_rows = up(rows_, h_rows_, Tv);
  in.cu_seqlens = up(cu_, h_cu_, nb);
  if (Tv > 0) in.embeddings = visual;
  return in;
}

}  // namespace vlm
