// ParamLayout: the flat element space of one parameter table (nn/param_table.h) and its
// ZeRO sharding over a DP group: the one description of which elements of which
// parameters each DP rank owns. The table places its storage by it; the DP reduction
// (optim/dp_grads.h) reduces and gathers by it, the optimizer (optim/optimizer.h)
// updates by it, the checkpoints (checkpoint/) gather and scatter by it, and the planner
// (plan/) counts bytes by it. docs/training.md, "Sharded data parallelism", shows it.
//
// Flat space. The parameters, in table order, form units: with layer units (a table
// that pools its stack layers, ParamLayoutOptions::layer_units) each run of parameters
// with the same ParamSpec::layer is a unit (the backbone: the embedding, every layer,
// the output head; the vision encoder: the embeddings, every block, the post norm);
// otherwise the whole table is one unit. A unit is laid out in two
// parts: first its bf16-form parameters (matrices that only matmuls read, under mixed
// precision: their compute copy is bf16 only), then its f32-form ones (vectors, tables
// that lookups read, every parameter at fp32), each in table order, each parameter at a
// multiple of kParamAlign elements. Any storage that holds a part's elements at their
// flat offsets, in f32 or bf16, so has 256-byte aligned views; the same offsets index
// values, gradients, master weights and AdamW moments.
//
// Runs and groups. A group is what the DP reduction handles at once: zero <= 1 the whole
// table; zero >= 2 each pooled unit alone (a layer of a table with layer units), and each
// maximal sequence of adjacent other units. A run is a maximal range of parts of one form
// inside one group: the unit of sharding, of every reduce-scatter and all-gather.
//
// Ownership. zero 0 (or a DP group of one): every rank owns every element. zero >= 1, DP
// size p, rank r: of a run [b, e) of n elements, rank r owns the block
// [b + r*s, b + (r+1)*s), s = floor(n / p), and every rank owns the tail [b + p*s, e)
// (fewer than p elements, updated identically by every rank; DP rank 0 counts it in the
// gradient norm). A rank's shard buffers (reduced gradients, master weights, moments)
// hold its owned elements run after run, each run's block then its tail, from
// ShardRun::shard_at; owned() elements in all, the same count on every DP rank.
// Storage by zero level (ParamTable::allocate places it):
//   0: f32 values and gradients of every element on every rank (+ bf16 copies).
//   1: compute copies of every element (f32 values of the f32-form parts, bf16 copies of
//      the bf16-form parts); f32 master weights only for the owned elements of the
//      bf16-form parts (the f32-form parts' values are their own masters); gradients of
//      every element.
//   2: as 1, but the pooled units' gradients live in a pool of two slots, reduce-
//      scattered per micro-batch; only the other units' gradients are resident.
//   3: as 2, and the pooled units' compute copies live in a pool of two slots, gathered
//      before each use; every pooled element's master (or, frozen, its compute value) is
//      held by its owner only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vlm {

// Elements per parameter slot: a multiple of 128 (256 bytes in bf16, 512 in f32).
inline constexpr int64_t kParamAlign = 128;

// train.zero and this rank's DP group, as a table's storage sees them.
struct DpSharding {
  int zero = 0;            // 0..3 (docs/training.md); 0 when the group has one rank
  int size = 1, rank = 0;  // the DP group
  int stage() const { return size > 1 ? zero : 0; }
};

struct ShardRun {
  int64_t begin = 0, end = 0;              // flat elements
  int64_t block_begin = 0, block_end = 0;  // this rank's block (zero 0: the whole run)
  int64_t tail_begin = 0, tail_end = 0;    // the elements every rank holds (zero 0: none)
  int64_t shard_at = 0;                    // where the run's owned elements start in the shard buffers
  bool bf16 = false;                       // form: a bf16 compute copy only, else f32 values
  int unit = 0;                            // the unit of its first element
  int group = 0;
  bool pooled = false;                     // a pooled unit's run (zero >= 2)
  int64_t size() const { return end - begin; }
  int64_t block() const { return block_end - block_begin; }
  int64_t tail() const { return tail_end - tail_begin; }
  int64_t owned() const { return block() + tail(); }
};

struct ParamLayoutEntry {
  int64_t numel = 0;
  int layer = -1;     // ParamSpec::layer
  bool bf16 = false;  // bf16 form (see above)
};

struct ParamLayoutOptions {
  bool layer_units = false;  // units by ParamSpec::layer, the layers pooled at zero >= 2
  DpSharding dp;
};

class ParamLayout {
 public:
  ParamLayout() = default;
  ParamLayout(const std::vector<ParamLayoutEntry>& params, const ParamLayoutOptions& o);

  const DpSharding& sharding() const { return opt_.dp; }
  int stage() const { return opt_.dp.stage(); }
  int64_t numel() const { return numel_; }                      // the flat space, padding included
  int64_t offset(size_t param) const { return offset_[param]; }  // flat start of parameter i
  int64_t padded(size_t param) const { return padded_[param]; }  // its slot (numel rounded up)

  int units() const { return int(units_.size()); }
  std::pair<int64_t, int64_t> unit_range(int u) const { return units_[size_t(u)]; }
  int unit_of(size_t param) const { return unit_[param]; }
  // A layer unit: the stack layer it holds (-1 for the units outside the layers, and in a
  // table without layer units).
  int unit_layer(int u) const { return unit_layer_[size_t(u)]; }
  // Pooled: a layer unit of a table with layer units, at zero >= 2 (see above).
  bool pooled(int u) const { return stage() >= 2 && unit_layer(u) >= 0; }
  // Whether every rank holds every element of run k (its compute copy resident): all
  // runs but the pooled ones at zero 3, of which a rank holds its owned elements only.
  bool resident(int k) const { return !(stage() >= 3 && runs_[size_t(k)].pooled); }
  // The pooled units in order (the k-th uses pool slot k % 2).
  const std::vector<int>& pooled_units() const { return pooled_; }
  int slot_of(int u) const;  // the pool slot of a pooled unit

  const std::vector<ShardRun>& runs() const { return runs_; }
  // The group of unit u (a pooled unit's group is the unit alone); the runs of group g,
  // as [first, last) indices into runs().
  int unit_group(int u) const { return unit_group_[size_t(u)]; }
  int groups() const { return int(group_runs_.size()); }
  std::pair<int, int> group_runs(int g) const { return group_runs_[size_t(g)]; }
  int64_t owned() const { return owned_; }  // the shard buffers' size in elements

  // The pieces of parameter i (its elements, not its padding) this rank owns: flat range,
  // position in the shard buffers, whether a tail piece, and the run; in flat order.
  struct Piece {
    int64_t begin, end, shard_at;
    bool tail;
    int run;
  };
  std::vector<Piece> owned_pieces(size_t param) const;
  // The pieces of parameter i that DP rank `dp_rank` of this layout's group writes to a
  // checkpoint (checkpoint/checkpoint_pieces.h), so that the group writes every element
  // once: the blocks of the rule above over the whole DP group whatever the level, and on
  // DP rank 0 the tails. Under ZeRO they are the rank's owned pieces less the tails on
  // the other ranks; at zero 0, where every rank owns every element, they are what zero 1
  // would give the rank (the runs of levels 0 and 1 are the same). shard_at: the position
  // in that rank's shard buffers (at zero 0, the flat offset).
  std::vector<Piece> written_pieces(size_t param, int dp_rank) const;

 private:
  ParamLayoutOptions opt_;
  int64_t numel_ = 0, owned_ = 0;
  std::vector<int64_t> offset_, padded_, size_;
  std::vector<int> unit_, unit_layer_, unit_group_, pooled_;
  std::vector<std::pair<int64_t, int64_t>> units_;
  std::vector<ShardRun> runs_;
  std::vector<std::pair<int, int>> group_runs_;
};

}  // namespace vlm
