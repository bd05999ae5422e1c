// The checkpoint's tensors that a model's training state maps to, and the pieces of them
// a rank writes or reads (docs/checkpoints.md). Which elements a rank owns, holds and
// writes is each table's layout (nn/param_layout.h: owned_pieces, written_pieces,
// resident); this file turns those ranges of a table's flat space into regions of the
// logical tensors:
//  - a parameter's local slice is a box of its logical tensor (the TP slice: offset and
//    extent along the split dimension, whole otherwise), and a range of the flat space
//    inside the parameter is a range of that box's row-major order;
//  - the vocabulary tables' padding rows (ParamSpec: full vs hf) are the last rows of
//    a slice, so they are cut from the end of the range: never written, read as zero;
//  - a parameter every TP rank holds alike (a replicated table, or a replicated
//    parameter of a split one) is written by TP rank 0 only.
// The writer, the readers and `vlm plan` call the functions below, so the bytes planned
// are the bytes written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/tensor_region.h"
#include "model/vlm_model.h"
#include "optim/optimizer.h"

namespace vlm {

// The three tensors of a parameter: its values, AdamW's first and second moments.
enum class StateKind { Value, M, V };
// "model/<module>", "optim/m/<module>", "optim/v/<module>"
std::string state_group(StateKind k, ModuleId m);

// Flat elements [flat.begin, flat.end) of one parameter of one module (at flat.shard_at
// in the rank's shard buffers when they are owned ones), for one kind, and the region
// of its logical tensor they hold (the first region.numel() of them; the rest are
// padding rows).
struct StatePiece {
  size_t module = 0;  // index of model.modules()
  StateKind kind = StateKind::Value;
  const Param* param = nullptr;
  std::string tensor;  // state_group(kind, module) + "/" + name
  Dims shape;          // the logical (Hugging Face) shape
  TensorRegion region;
  ParamLayout::Piece flat{};
  int64_t span() const { return flat.end - flat.begin; }
};

// What DP rank `dp_rank` (-1: this rank's) of this TP rank writes to a checkpoint: of
// every module the values of ParamLayout::written_pieces, and of a trainable one the
// moments of the same elements; TP-replicated parameters on TP rank 0 only; pieces
// holding no element of their tensor left out.
std::vector<StatePiece> written_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                       int dp_rank = -1);
// What this rank reads: the values it holds of every module (a parameter whole where
// its run is resident, else its owned pieces) and, with `moments`, the moments it owns
// of the modules flagged in `trainable`.
std::vector<StatePiece> held_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                    bool moments);
// Data bytes of pieces (4 per element of their regions).
int64_t pieces_bytes(const std::vector<StatePiece>& pieces);
// Where the elements of an owned piece live on this rank ([span], f32, or bf16 where a
// table keeps only a bf16 copy): its table's storage of them (ParamTable::owned_view),
// or (moments) the optimizer's moment buffer.
Tensor piece_storage(const std::vector<ModuleParams>& modules, const AdamW* opt, const StatePiece& p);

}  // namespace vlm
