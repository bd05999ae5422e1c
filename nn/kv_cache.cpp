// KvCache: the buffers, prefill slots and decode-step rows (nn/kv_cache.h).
#include "nn/kv_cache.h"

#include <algorithm>

#include "base/error.h"

namespace vlm {

KvCache::KvCache(Backend& b, int n_layers, int64_t kv_heads, int64_t head_dim, int64_t max_seqs, int64_t max_len,
                 int64_t max_rows, DType dtype)
    : b_(b), max_seqs_(max_seqs), max_len_(max_len), max_rows_(max_rows) {
  VLM_ASSERT(n_layers > 0 && kv_heads > 0 && head_dim > 0 && max_seqs > 0 && max_len > 0 && max_rows > 0,
             "kv cache: ", n_layers, " layers, ", kv_heads, " x ", head_dim, ", ", max_seqs, " x ", max_len, ", ",
             max_rows, " prefill rows");
  VLM_REQUIRE(max_seqs * max_len < (int64_t(1) << 31), "kv cache: ", max_seqs, " sequences of ", max_len,
              " rows exceed 2^31 rows");
  const int64_t rows = max_seqs * max_len, layer = rows * kv_heads * head_dim;
  storage_ = Tensor::zeros(b, Shape{2 * n_layers * layer}, dtype);
  for (int l = 0; l < n_layers; ++l) {
    k_.push_back(storage_.sub(int64_t(2 * l) * layer, Shape{rows, kv_heads, head_dim}));
    v_.push_back(storage_.sub(int64_t(2 * l + 1) * layer, Shape{rows, kv_heads, head_dim}));
  }
  table_ = Tensor::zeros(b, Shape{max_rows + 4 * max_seqs}, DType::I32);
  bytes_ = storage_.nbytes() + table_.nbytes();
  len_.assign(size_t(max_seqs), 0);
  host_.reserve(size_t(max_rows + 4 * max_seqs));
}

Tensor KvCache::prefill(Stream& s, const std::vector<int32_t>& cu, int64_t n_seqs) {
  const int64_t B = int64_t(cu.size()) - 1, T = B >= 0 ? cu.back() : 0;
  VLM_REQUIRE(n_seqs >= 1 && n_seqs <= max_seqs_ && n_seqs <= B, "kv cache: ", n_seqs,
              " sequences to keep, planned for at most ", max_seqs_, ", the batch has ", B);
  VLM_REQUIRE(T <= max_rows_, "kv cache: a prefill of ", T, " rows, planned for at most ", max_rows_);
  s.synchronize();
  host_.assign(size_t(T), -1);
  std::fill(len_.begin(), len_.end(), 0);
  for (int64_t b = 0; b < n_seqs; ++b) {
    const int64_t n = cu[size_t(b + 1)] - cu[size_t(b)];
    VLM_REQUIRE(n <= max_len_, "kv cache: sample ", b, " has ", n, " rows, the cache holds ", max_len_,
                " per sequence");
    for (int64_t t = 0; t < n; ++t) host_[size_t(cu[size_t(b)] + t)] = int32_t(b * max_len_ + t);
    len_[size_t(b)] = n;
  }
  const Tensor slots = table_.slice(0, T);
  b_.copy(slots.data(), b_.device(), host_.data(), DeviceKind::CPU, size_t(T) * sizeof(int32_t));
  return slots;
}

DecodeRows KvCache::append(Stream& s, const std::vector<int32_t>& seqs) {
  const int64_t N = int64_t(seqs.size());
  VLM_REQUIRE(N >= 1 && N <= max_seqs_, "kv cache: a step of ", N, " rows, planned for 1..", max_seqs_);
  s.synchronize();
  host_.assign(size_t(4 * N), 0);
  int32_t *pos = host_.data(), *slot = pos + N, *start = slot + N, *klen = start + N;
  DecodeRows r;
  r.n = N;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t b = seqs[size_t(i)];
    VLM_ASSERT(b >= 0 && b < max_seqs_ && len_[size_t(b)] >= 1, "kv cache: step row ", i, " for sequence ", b,
               " (", max_seqs_, " planned; a sequence is decoded after its prefill)");
    for (int64_t j = 0; j < i; ++j) VLM_ASSERT(seqs[size_t(j)] != b, "kv cache: sequence ", b, " twice in a step");
    const int64_t p = len_[size_t(b)];
    VLM_REQUIRE(p < max_len_, "kv cache: sequence ", b, " is full (", max_len_, " rows)");
    pos[i] = int32_t(p), slot[i] = int32_t(b * max_len_ + p), start[i] = int32_t(b * max_len_);
    klen[i] = int32_t(p + 1);
    r.max_len = std::max(r.max_len, int(p + 1));
    len_[size_t(b)] = p + 1;
  }
  b_.copy(table_.data(), b_.device(), host_.data(), DeviceKind::CPU, size_t(4 * N) * sizeof(int32_t));
  r.positions = table_.slice(0, N);
  r.slots = table_.slice(N, 2 * N);
  r.key_start = table_.slice(2 * N, 3 * N);
  r.key_len = table_.slice(3 * N, 4 * N);
  return r;
}

}  // namespace vlm
