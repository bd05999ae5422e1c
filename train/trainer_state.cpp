// Trainer::State (train/trainer_state.h): resuming from a checkpoint, saving one, the
// loader options of a split, and the message of an allocation that failed.
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "checkpoint/checkpoint.h"
#include "core/out_of_memory.h"
#include "parallel/runtime.h"
#include "train/trainer_state.h"

namespace vlm {

void Trainer::State::resume() {
  const int dp = rt.topology().dp();
  const bool automatic = train.resume == "auto";
  std::string path;
  CheckpointState c;
  rt.on_every_rank("resume", [&] {
    path = resolve_checkpoint(automatic ? train.ckpt_dir : train.resume, automatic);
    if (path.empty()) return;
    const CheckpointReader ck(path);
    c = ck.state();
    const int64_t gb = int64_t(dp) * train.micro_batches * train.batch;
    VLM_REQUIRE(c.global_batch == gb && c.micro_batches == train.micro_batches, path, ": saved with a global batch of ",
                c.global_batch, " in ", c.micro_batches, " micro-batches, this run has ", gb, " in ",
                train.micro_batches, " (resume with dp x train.batch = ", c.global_batch / c.micro_batches,
                " and train.micro_batches = ", c.micro_batches, ")");
    VLM_REQUIRE(c.step <= total, path, ": saved at step ", c.step, ", after the last step of this run (", total,
                "; raise train.steps or train.epochs)");
    load_training_state(ck, *model, trainable, *opt);
  });
  if (path.empty()) return;
  loader->restore(c.sampler);
  start = c.step + 1;
  if (rt.root())
    std::printf("resumed from %s: step %lld of %lld (saved at tp=%d dp=%d%s)\n", path.c_str(), (long long)c.step,
                (long long)total, c.saved_tp, c.saved_dp, c.zero ? cat(" zero=", c.zero).c_str() : "");
}

void Trainer::State::save(int64_t step) {
  const auto t0 = TrainClock::now();
  CheckpointState c;
  c.step = step, c.sampler = loader->state(), c.seed = seed;
  c.saved_tp = rt.topology().tp(), c.saved_dp = rt.topology().dp(), c.zero = dpg->zero();
  c.micro_batches = train.micro_batches, c.global_batch = int64_t(c.saved_dp) * train.micro_batches * train.batch;
  const std::string path = save_checkpoint(train.ckpt_dir, train.keep_last, c, cfg, *tok, *model, trainable,
                                           *opt, rt);
  if (rt.root())
    std::printf("checkpoint: %s (%.1f MiB, %s)\n", path.c_str(),
                double(std::filesystem::file_size(path)) / (1 << 20), format_duration(seconds_since(t0)).c_str());
}

LoaderOptions Trainer::State::loader_options(const std::string& split) const {
  LoaderOptions o;
  o.path = data.path, o.split = split, o.batch_size = train.batch;
  o.image_size = vcfg.vision.image_size, o.grid = vcfg.vision.grid();
  o.threads = data.threads, o.prefetch = data.prefetch;
  o.dp_size = rt.topology().dp(), o.dp_rank = rt.topology().self().dp_rank;
  o.seed = seed, o.texture = true, o.tokenizer = tok, o.max_tokens = train.max_text;
  return o;
}

std::string Trainer::State::out_of_memory(const OutOfMemory& e, const char* when, size_t held) const {
  std::string predicted;
  try {
    const RankPlan p = plan_rank(vcfg, layout, train.optim);
    predicted = cat("`vlm plan` predicts ", format_bytes(double(p.memory.total())), " for this rank of tp=", layout.tp,
                    " dp=", layout.dp, " zero=", layout.zero, " (", p.memory.str(), ")");
  } catch (const std::exception& pe) {
    predicted = cat("no plan could be made (", pe.what(), ")");
  }
  return cat("rank ", rt.topology().world_rank(), " (tp rank ", layout.tp_rank, ", dp rank ", layout.dp_rank, "): ",
             e.what(), " while ", when, ", with ", format_bytes_exact(held), " allocated on this rank; ", predicted,
             "; free memory on the device or choose a layout that fits (vlm plan ranks them)");
}

}  // namespace vlm
