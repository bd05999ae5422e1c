// Order-independent parameter initialisation.
// Element i (row-major index in the Hugging Face shape spec.hf) of parameter `name` is a
// pure function of (seed, name, i): a splitmix64 counter RNG keyed by
// splitmix64(seed ^ fnv1a64(name)), two draws per element, Box-Muller for normals.
// So every rank draws exactly the values of its slice of the FULL tensor, TP=1 and
// TP=8 start from the same model, and adding a parameter never changes the others.
// Padded vocabulary rows are zero. Values are drawn in f32 (an f64 table holds the same
// values widened).
#pragma once
#include <cstdint>
#include <string>

#include "nn/param_table.h"

namespace vlm {

// The value of element `index` of a parameter (exposed for tests and tools).
float init_value(uint64_t seed, const std::string& name, InitKind kind, float std, int64_t index);
// Fills every local parameter of `table` (must be allocated).
void init_params(ParamTable& table, uint64_t seed);

}  // namespace vlm
