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
  const auto t0 = TrainClock::now();
  uint64_t read = 0;
  int64_t stored = 0;
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
    // A resume continues the saved run: the same batches (the seed draws them) in the
    // same words, from a data position that exists in this run's file.
    VLM_REQUIRE(c.seed == seed, path, ": saved by a run of seed ", c.seed, ", this run has --seed ", seed,
                " (a resume continues the saved run: give its seed)");
    VLM_REQUIRE(ck.tokenizer_json() == tok->to_json(), path, ": saved with another tokenizer than this run's (",
                data.tokenizer.empty() ? "the one " + data.path + " names" : "--data.tokenizer " + data.tokenizer,
                "): a resume continues with the tokenizer the model was trained with");
    const Loader& l = loader_at(c.step);
    VLM_REQUIRE(l.fits(c.sampler), path,
                ": its data position (epoch ", c.sampler.epoch, ", step ", c.sampler.step, " of the epoch) is not in ",
                c.step <= data.curriculum_steps && curriculum ? "--data.curriculum " + data.curriculum
                                                              : "--data.path " + data.path,
                " (", l.steps_per_epoch(), " steps per epoch): resume with the data the run was saved with");
    load_training_state(ck, *model, trainable, *opt);
    read = ck.store().bytes_read(), stored = ck.store().data_bytes();
  });
  if (path.empty()) return;
  loader_at(c.step).restore(c.sampler);
  start = c.step + 1;
  if (rt.root()) {
    std::printf("resumed from %s: step %lld of %lld (saved at tp=%d dp=%d%s); rank 0 read %llu bytes of tensor data",
                path.c_str(), (long long)c.step, (long long)total, c.saved_tp, c.saved_dp,
                c.zero ? cat(" zero=", c.zero).c_str() : "", (unsigned long long)read);
    if (stored >= 0) std::printf(" of the %lld stored", (long long)stored);
    std::printf(" in %.2f s\n", seconds_since(t0));
  }
}

void Trainer::State::save(int64_t step) {
  const auto t0 = TrainClock::now();
  CheckpointState c;
  c.step = step, c.sampler = loader_at(step).state(), c.seed = seed;
  c.saved_tp = rt.topology().tp(), c.saved_dp = rt.topology().dp(), c.zero = dpg->zero();
  c.micro_batches = train.micro_batches, c.global_batch = int64_t(c.saved_dp) * train.micro_batches * train.batch;
  const SaveReport r = save_checkpoint(train.ckpt_dir, train.keep_last, c, cfg, *tok, *model, trainable, *opt, rt);
  if (rt.root())
    std::printf("checkpoint: %s (%s of tensor data in %d shards, at most %s from one rank; %.2f s)\n", r.path.c_str(),
                format_bytes(double(r.total_bytes)).c_str(), r.shards, format_bytes(double(r.max_rank_bytes)).c_str(),
                seconds_since(t0));
}

Loader& Trainer::State::loader_at(int64_t n) const {
  return curriculum && n <= data.curriculum_steps ? *curriculum : *loader;
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
