// The single-file checkpoint, step_<N>.h5: the form of `vlm checkpoint consolidate`
// (for h5py users and for tools that want one file), and the form `vlm train` wrote
// before checkpoints were sharded; every reader reads it (checkpoint/tensor_store.h).
// Layout (format "vlm-checkpoint", version 2; h5py reads every name):
//   /                          attrs format, version, step, saved_tp, saved_dp, zero,
//                              global_batch, micro_batches, crc32c (h5_state_checksum: the
//                              state and the three texts below; version 2 on, version 1
//                              files are read without it)
//   /config                    u8 [n]: every option of the run as INI text (Config::dump_ini)
//   /options                   u8 [n]: the options the run was given (Config::dump_ini(true)),
//                              which the readers read back: an option the run left unset
//                              stays unset, so what the run derived from it is derived again
//   /tokenizer                 u8 [n]: the run's tokenizer.json
//   /model/<module>/<param>    f32 in the full logical (Hugging Face) shape, whatever the TP
//                              layout: /model/llm/model.layers.3.self_attn.q_proj.weight,
//                              /model/vision/..., /model/scorers/..., /model/projector/...
//   /optim/m/<module>/<param>, /optim/v/<module>/<param>
//                              AdamW's moments, same shapes (trainable modules only); the f32
//                              master weights are /model
//   /state                     attrs sampler_seed, sampler_epoch, sampler_step (the sampler
//                              position of the next batch), seed
// Every tensor carries an attribute crc32c (CRC-32C of its little-endian f32 bytes), and
// the root one covers everything else, so flipped bits anywhere are refused, not trained
// on.
#pragma once
#include <cstdint>
#include <string>

namespace vlm {

inline constexpr const char* kCheckpointFormat = "vlm-checkpoint";
inline constexpr int64_t kCheckpointVersion = 2;  // written; 1 and 2 are read
inline constexpr const char* kChecksumAttr = "crc32c";
inline constexpr int64_t kMaxTokenizerBytes = int64_t(1) << 30;

struct CheckpointMeta;
// The root attribute crc32c: CRC-32C of the state's fields as decimal text, in the
// layout's order (step saved_tp saved_dp zero global_batch micro_batches seed
// sampler_seed sampler_epoch sampler_step, each followed by a space), then the config,
// options and tokenizer bytes.
uint32_t h5_state_checksum(const CheckpointMeta& m);

struct ConsolidateReport {
  int64_t tensors = 0, bytes = 0;  // tensors written and their data bytes
};

// Writes the sharded checkpoint `dir` as the single file `out` (atomically: a temporary
// file renamed when complete), one tensor in memory at a time, in the index's order.
ConsolidateReport consolidate_checkpoint(const std::string& dir, const std::string& out);

}  // namespace vlm
