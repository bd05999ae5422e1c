// Ownership of the training state over the data-parallel group: which elements of a
// module's flat arena (ParamTable: values and gradients share one layout, this TP rank's
// slices) each DP rank updates, holds and writes to a checkpoint. The one place these
// rules are written: DpGrads (optim/dp_grads.h) and AdamW (optim/optimizer.h) take their
// blocks from dp_share, the checkpoint writer and reader (checkpoint/checkpoint_pieces.h)
// and `vlm plan` take everything from state_share.
//  - DP block: of a flat arena of n elements, DP rank r of p owns [r*s, (r+1)*s) with
//    s = floor(n / p); the tail [p*s, n) (fewer than p elements) belongs to every rank.
//  - train.zero = 0: every DP rank holds and updates the whole arena (values and AdamW
//    moments). ZeRO over one DP rank is none (effective_zero).
//  - train.zero = 1: every rank holds all values; the moments of its block and of the
//    tail (AdamW's buffer: the block, then the tail).
//  - Checkpoints: the DP group writes each element once, whatever the zero stage: DP rank
//    r writes its block, DP rank 0 also the tail (values and, for a trainable module,
//    moments), so replicated state is never written twice and every DP rank writes
//    about 1/p of its TP rank's state. Of a TP-split table, every TP rank writes its
//    own slices; a parameter every TP rank holds alike (a replicated table, or a
//    replicated parameter of a split one) is written by TP rank 0 only.
#pragma once
#include <cstdint>
#include <vector>

namespace vlm {

// Elements [begin, end) of a flat arena.
struct FlatRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const FlatRange&) const = default;
};

// The block and the tail of DP rank r of p over n elements (rule above).
struct DpShare {
  FlatRange block, tail;
};
DpShare dp_share(int64_t n, int p, int r);

// ZeRO over one DP rank is none.
inline int effective_zero(int zero, int dp) { return dp > 1 ? zero : 0; }

// A rank as an owner of state: its place in the TP x DP layout and train.zero (as
// given; effective_zero applies).
struct StateOwner {
  int tp = 1, tp_rank = 0, dp = 1, dp_rank = 0, zero = 0;
};

// What a rank holds and writes of one module whose flat arena has n elements.
struct StateShare {
  std::vector<FlatRange> values;   // the values it holds (the value arena's layout)
  std::vector<FlatRange> moments;  // the elements whose AdamW moments it holds, in the
                                   // order of AdamW's buffer; empty when frozen
  std::vector<FlatRange> writes;   // the elements whose values (and moments, when
                                   // trainable) it writes to a checkpoint
  bool writes_tp_replicated = false;  // whether it writes the parameters every TP rank holds alike
};
StateShare state_share(int64_t n, const StateOwner& r, bool trainable);

// The position of arena element e in a buffer that holds `held` back to back, or -1
// when no range holds it.
int64_t held_position(const std::vector<FlatRange>& held, int64_t e);

}  // namespace vlm
