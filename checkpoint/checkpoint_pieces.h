// The checkpoint's tensors that a model's training state maps to, and the pieces of them
// a rank writes or reads (docs/checkpoints.md). Which elements a rank holds and writes
// is optim/ownership.h's (state_share); this file turns those ranges of each module's
// flat arena into regions of the logical tensors:
//  - a parameter's local slice is a box of its logical tensor (the TP slice: offset and
//    extent along the split dimension, whole otherwise), and a range of the arena that
//    meets the parameter is a range of that box's row-major order;
//  - the vocabulary tables' padding rows (ParamSpec: full vs hf) are the last rows of
//    a slice, so they are cut from the end of the range: never written, read as zero.
// The writer, the readers and `vlm plan` call the two functions below, so the bytes
// planned are the bytes written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/tensor_region.h"
#include "model/vlm_model.h"
#include "optim/optimizer.h"
#include "optim/ownership.h"

namespace vlm {

// The three tensors of a parameter: its values, AdamW's first and second moments.
enum class StateKind { Value, M, V };
// "model/<module>", "optim/m/<module>", "optim/v/<module>"
std::string state_group(StateKind k, ModuleId m);

// Elements [buffer_at, buffer_at + span) of the buffer of one module and kind (the
// value arena, or AdamW's moment buffer: the held ranges back to back) that are one
// parameter's, and the region of its logical tensor they hold (the first
// region.numel() of them; the rest are padding rows).
struct StatePiece {
  size_t module = 0;  // index of model.modules()
  StateKind kind = StateKind::Value;
  const Param* param = nullptr;
  std::string tensor;  // state_group(kind, module) + "/" + name
  Dims shape;          // the logical (Hugging Face) shape
  TensorRegion region;
  int64_t buffer_at = 0, span = 0;
};

// This rank as an owner of state: its TP place from the model's split table, its DP
// place and ZeRO stage from `dp` (none: one DP rank, as for inference).
StateOwner state_owner(const std::vector<ModuleParams>& modules, const DpGrads* dp);

// What rank `place` writes to a checkpoint (StateShare::writes; TP-replicated parameters
// on TP rank 0 only), pieces holding no element left out.
std::vector<StatePiece> written_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                       const StateOwner& place);
// What rank `place` reads: the values it holds of every module and, with `moments`, the
// moments it holds of the trainable ones.
std::vector<StatePiece> held_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                    const StateOwner& place, bool moments);
// Data bytes of pieces (4 per element of their regions).
int64_t pieces_bytes(const std::vector<StatePiece>& pieces);
// The buffer piece p is in: its module's value arena, or (moments) opt's moment buffer.
Tensor piece_buffer(const std::vector<ModuleParams>& modules, const AdamW* opt, const StatePiece& p);

}  // namespace vlm
