// The shared prefix of ablation rows (docs/ablations.md, "Shared prefix"). Under
// lod.anneal_from a row trains its first steps at lod.max_tokens; when that is every cell
// of the grid (lod.max_tokens = G*G: every region at full detail), every LOD policy and
// budget allocates the same tokens there, so the rows of one placement and seed train the
// same first steps, bitwise. `vlm ablate` then trains those steps once per placement and
// seed (train.stop_after, its checkpoint in <out>/prefix/<placement>-s<seed>-tp<T>dp<D>/)
// and each row resumes from the checkpoint (train.resume): its losses, model and figures
// equal those of the row trained from step 1 (tests/ablate), in the time of its own steps.
// Invariants:
//  - shared_prefix_steps is 0 (nothing shared) unless lod.anneal > 0, lod.anneal_from > 0,
//    a fixed lod.budget, lod.max_tokens = G*G, train.steps > 0 (not train.epochs) and the
//    prefix ends before the last step; it is the last step whose budget is
//    lod.max_tokens for every budget (LodConfig::step_at).
//  - A prefix is trained once per key and ablation: next to its checkpoint, report.txt
//    (written atomically after it) keeps the figures the rows join to theirs, with the
//    ablation's fingerprint and the prefix's steps; a later `vlm ablate` in the same
//    --out (more rows, or a resumed one) reuses the prefix when both match and the
//    checkpoint's `latest` exists, and trains it again otherwise.
//  - joined(prefix, rest) is the report of the whole run: the per-step series
//    concatenated, the first loss the prefix's, the mean step time and throughput over
//    every step, the rest (last loss, validation, memory, bytes) the row's own.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "train/trainer.h"

namespace vlm {

class Config;
class Runtime;

// The steps the rows of `row`'s placement and seed share (0: none; the rules above).
int64_t shared_prefix_steps(const Config& row);

// The whole run's report from the prefix's and the resumed row's.
TrainReport joined(const TrainReport& prefix, const TrainReport& rest);

class SharedPrefixes {
 public:
  // make(extra): the row's Config with the option lines `extra` read last.
  using MakeConfig = std::function<std::unique_ptr<Config>(const std::string& extra)>;
  // fingerprint: of the ablation's options (the rows of one ablation.csv share it).
  SharedPrefixes(std::string out, std::string fingerprint, Runtime& rt)
      : out_(std::move(out)), fingerprint_(std::move(fingerprint)), rt_(rt) {}
  // For a row that shares a prefix (steps > 0, key naming its placement, seed and
  // layout): trains the prefix when this process has not, and returns the option lines
  // that make the row resume from it.
  std::string resume_options(const std::string& key, int64_t steps, const MakeConfig& make);
  const TrainReport& report(const std::string& key) const { return done_.at(key); }

 private:
  std::string dir(const std::string& key) const { return out_ + "/prefix/" + key; }
  // The report of an earlier process (report.txt), when it is this ablation's and this
  // prefix's; false otherwise.
  bool load(const std::string& key, int64_t steps);
  void store(const std::string& key, int64_t steps) const;
  std::string out_, fingerprint_;
  Runtime& rt_;
  std::map<std::string, TrainReport> done_;
};

}  // namespace vlm
