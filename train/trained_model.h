// A trained model for the commands that use one (`vlm eval`, `vlm caption`, `vlm export`,
// the ablation's evaluation): a checkpoint's stored options read back with every option
// of `vlm train` registered, and the model those options describe, built on the
// runtime's TP group with the checkpoint's parameters loaded (checkpoint/checkpoint.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "data/text/tokenizer.h"
#include "model/batch.h"
#include "model/vlm_model.h"

namespace vlm {

class Communicator;
class Config;
class Runtime;

// A Config with every `vlm train` option registered and the checkpoint's /options read.
std::unique_ptr<Config> checkpoint_options(const CheckpointReader& ck);
// Runs f, which reads or checks the model of a checkpoint's options: a UserError it raises
// that does not name the checkpoint is raised again naming it ("<path>: the options it
// was saved with: ...").
void naming_the_checkpoint(const std::string& path, const std::function<void()>& f);

// A trained model ready for inference. max_images: images per forward
// (VlmConfig::max_images), given by the option images_option (e.g. "--batch"; "" when the
// command fixes it): a model of that size that does not fit is a UserError naming it.
struct TrainedModel {
  std::unique_ptr<Config> options;
  CheckpointState state;
  std::shared_ptr<const Tokenizer> tok;
  VlmConfig vcfg;
  TextRule rule;
  std::unique_ptr<Communicator> self;
  std::unique_ptr<VlmModel> model;  // declared last: destroyed before `self`
  TrainedModel();
  TrainedModel(TrainedModel&&) noexcept;
  ~TrainedModel();
};
TrainedModel load_trained_model(const std::string& checkpoint, Runtime& rt, int64_t max_images,
                                const std::string& images_option = "");

}  // namespace vlm
