// KvCache: the keys and values of every layer of a causal stack (nn/stack.h), kept so
// that each new token of incremental decoding costs one row's forward
// (docs/caption-and-eval.md, "KV cache"; nn/README.md). It holds this rank's KV heads only (NKVl of
// nn/block_config.h: the heads are split over TP, or the one replicated head this rank
// uses), after bias and RoPE: exactly the k and v the attention reads.
// Layout: sequence b (< max_seqs) owns the cache rows [b*max_len, (b+1)*max_len);
// layer l's k and v are [max_seqs*max_len, NKVl, HS]. Every buffer, the i32 row tables
// of a step included, is allocated once at construction: nothing is allocated per token.
// Host bookkeeping: len(b), the rows sequence b holds.
//
// Use (the owner, e.g. llm/backbone.h):
//   prefill: slots = cache.prefill(s, cu_seqlens, n)   then stack.forward(ctx, seq, &cache, slots)
//   step:    rows = cache.append(s, seqs)              then stack.decode(ctx, rows, cache)
// prefill and append wait for the stream (s.synchronize()) before they overwrite the
// row tables that the previous step may still read.
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

// The rows of one decode step: one new row (token) for each of N sequences (device
// tensors, i32 [N]).
struct DecodeRows {
  Tensor positions;  // the row's position in its sequence (RoPE, learned positions)
  Tensor slots;      // the cache row its key and value are written to
  Tensor key_start;  // the first cache row of its sequence
  Tensor key_len;    // the keys it attends to, itself included (= position + 1)
  int max_len = 0;   // the largest key_len
  int64_t n = 0;     // N
};

class KvCache {
 public:
  // n_layers layers of kv_heads x head_dim; max_rows: the most rows of a prefill batch.
  KvCache(Backend& b, int n_layers, int64_t kv_heads, int64_t head_dim, int64_t max_seqs, int64_t max_len,
          int64_t max_rows);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const Tensor& k(int layer) const { return k_[size_t(layer)]; }  // [max_seqs*max_len, NKVl, HS]
  const Tensor& v(int layer) const { return v_[size_t(layer)]; }
  int64_t max_seqs() const { return max_seqs_; }
  int64_t max_len() const { return max_len_; }
  int64_t len(int64_t seq) const { return len_[size_t(seq)]; }
  size_t bytes() const { return bytes_; }  // keys, values and row tables

  // The slots [T] (device, i32) of a packed batch whose samples are cut by cu ([B+1],
  // host): sample b < n_seqs becomes sequence b (row t of it goes to cache row
  // b*max_len + t, len(b) = its length); the rows of later samples (padding) are not
  // stored (slot -1); every other sequence is emptied. UserError when n_seqs > max_seqs,
  // n_seqs > B or a stored sample is longer than max_len.
  Tensor prefill(Stream& s, const std::vector<int32_t>& cu, int64_t n_seqs);
  // One new row for each sequence seqs[i] (distinct, < max_seqs, holding at least one
  // row): its position is len(seq), then len(seq) += 1. UserError when a sequence is full.
  DecodeRows append(Stream& s, const std::vector<int32_t>& seqs);

 private:
  Backend& b_;
  int64_t max_seqs_, max_len_, max_rows_;
  size_t bytes_ = 0;
  Tensor storage_;  // every layer's k and v
  Tensor table_;    // i32 [max_rows + 4*max_seqs]: prefill slots, or a step's four rows
  std::vector<Tensor> k_, v_;
  std::vector<int64_t> len_;
  std::vector<int32_t> host_;  // staging of table_ (reserved at construction)
};

}  // namespace vlm
