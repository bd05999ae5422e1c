// A trained model from a checkpoint (train/trained_model.h).
#include "train/trained_model.h"

#include <mpi.h>

#include "base/config.h"
#include "base/error.h"
#include "core/out_of_memory.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"
#include "train/train_options.h"

namespace vlm {

std::unique_ptr<Config> checkpoint_options(const CheckpointReader& ck) {
  auto cfg = std::make_unique<Config>("vlm train");
  register_all_train_options(*cfg);
  cfg->read_ini_text(ck.options_ini(), ck.path() + ":/options");
  return cfg;
}

void naming_the_checkpoint(const std::string& path, const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    if (msg.rfind(path, 0) == 0) throw;
    throw UserError(cat(path, ": the options it was saved with: ", msg));
  }
}

TrainedModel::TrainedModel() = default;
TrainedModel::TrainedModel(TrainedModel&&) noexcept = default;
TrainedModel::~TrainedModel() = default;

TrainedModel load_trained_model(const std::string& checkpoint, Runtime& rt, int64_t max_images,
                                const std::string& images_option) {
  TrainedModel r;
  std::unique_ptr<CheckpointReader> ck;
  rt.on_every_rank("checkpoint", [&] {
    const std::string path = resolve_checkpoint(checkpoint);
    ck = std::make_unique<CheckpointReader>(path);
    r.options = checkpoint_options(*ck);
    r.state = ck->state();
    r.tok = std::make_shared<const Tokenizer>(Tokenizer::from_json(ck->tokenizer_json(), path + ":/tokenizer"));
    naming_the_checkpoint(path, [&] {
      TrainOptions t = read_train_options(*r.options);
      t.batch = int(max_images);
      r.vcfg = resolve_vlm_config(*r.options, t, *r.tok, rt.topology().tp());
      r.vcfg.frozen.fill(true);  // inference: no gradient memory
      r.rule = text_rule(read_data_options(*r.options), t, *r.tok);
    });
  });
  Backend& b = rt.backend();
  r.self = make_communicator(b.device(), MPI_COMM_SELF, "self", rt.options().parallel.timeout_s);
  try {  // the activation arenas grow with the images per forward
    r.model = std::make_unique<VlmModel>(r.vcfg, b, rt.groups().tp(), *r.self);
  } catch (const OutOfMemory& e) {
    if (images_option.empty()) throw;
    throw UserError(cat(images_option, " ", max_images, ": the model for ", max_images,
                        " images per forward does not fit (", e.what(), ")",
                        max_images > 1 ? "; give fewer" : "; it needs a device with more memory"));
  }
  rt.on_every_rank("checkpoint tensors", [&] { load_model(*ck, *r.model); });
  return r;
}

}  // namespace vlm
