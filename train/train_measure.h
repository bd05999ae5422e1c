// What `vlm train` measures for the planner's checks (docs/planning.md):
// the bytes one step moved per group (a difference of Communicator counters) and, at the
// end, every rank's measured peak of device arena memory, printed by rank 0 as
//   memory per rank (device arenas, measured peak in training, planned N B on rank 0): rank 0 X B, ...
//   communication of the last step (rank 0): tp N B (...) | dp N B (...)
#pragma once
#include "parallel/communicator.h"
#include "train/trainer.h"

namespace vlm {

class Runtime;

// now - then, kind by kind (bytes and calls).
CommCounters counters_since(const CommCounters& now, const CommCounters& then);

// Gathers rep.peak_arena_bytes of every rank over the world group (a collective) and
// prints the two lines above on rank 0.
void report_memory_and_bytes(Runtime& rt, Stream& s, const TrainReport& rep);

}  // namespace vlm
