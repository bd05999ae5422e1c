// `vlm train`: trains the VLM on an image-text HDF5 file (train/trainer.h;
// docs/training.md). As one process or under mpirun/srun with world = tp x dp:
//   vlm train --config configs/demo_fashion.cfg [--option value ...]
//   mpirun -np 16 vlm train --config configs/siglip_qwen2_tp8.cfg --tp 8
#include <cstdio>

#include "apps/command.h"
#include "base/config.h"
#include "base/stop_signal.h"
#include "parallel/runtime.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace vlm {

namespace {

int train(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  Trainer trainer(cfg, rt);
  try {
    trainer.run();
  } catch (const Interrupted& e) {  // a signal or train.time_limit (the trainer said where it stopped)
    if (rt.root() && e.saved()) {
      std::printf("vlm train: the same command with --train.resume auto goes on from that checkpoint\n");
      std::fflush(stdout);
    }
    throw;
  }
  return 0;
}

}  // namespace

VLM_COMMAND(train, {.path = "train",
                    .summary = "train the VLM (vision encoder, scorers, projector, backbone) on an image-text HDF5 file",
                    .usage = "--config configs/X.cfg [--option value ...]\n"
                             "Trains on --data.path with the options below (INI files via --config; the command line "
                             "wins). Under mpirun the world is tp x dp. Outputs: <train.out_dir>/<train.run>/ "
                             "(config.ini, metrics.jsonl, relevance pictures). See docs/training.md.",
                    .options = register_all_train_options,
                    .run = train,
                    .multi_rank = true});

}  // namespace vlm
