// `vlm lm logits`: loads a Hugging Face Llama/Qwen2 checkpoint directory (config.json +
// safetensors, sharded or not) into the tensor-parallel backbone and writes the logits
// of the given token ids to HDF5, so that an import can be checked against another
// implementation (e.g. transformers).
//   vlm lm logits --hf DIR --ids 1,2,3 [--tp N] [--device auto|cpu|cuda] --out FILE.h5
// Under mpirun the world is tp x dp; every TP rank reads only its slices, the logits are
// gathered over the TP group and world rank 0 writes the file:
//   /logits  f32 [T, V]  (V = vocab_size of config.json, padding dropped)
//   /ids     i32 [T]
//   attrs on /: format = "vlm-lm-logits", model (the ModelConfig line), tp, device.
// The ids form one sample (positions 0..T-1); each must lie in [0, vocab_size). The
// inputs are checked on every rank in one agreed step before any work (the error
// policy of parallel/runtime.h).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "core/backend.h"
#include "io/atomic_file.h"
#include "io/h5_io.h"
#include "llm/backbone.h"
#include "llm/hf_config.h"
#include "llm/hf_import.h"
#include "parallel/runtime.h"

namespace vlm {

namespace {

void write_logits_h5(const std::string& path, const std::vector<float>& logits, const std::vector<int32_t>& ids,
                     int64_t V, const std::string& model, int tp, const std::string& device) {
  h5_write_file_atomic(path, [&](H5Handle file) {  // an existing file is replaced only by a complete one
    h5_write_array(file, "logits", H5Elem::F32, logits.data(), {int64_t(ids.size()), V});
    h5_write_1d(file, "ids", H5Elem::I32, ids.data(), int64_t(ids.size()), false);
    h5_write_attr_string(file, "format", "vlm-lm-logits");
    h5_write_attr_string(file, "model", model);
    h5_write_attr_int(file, "tp", tp);
    h5_write_attr_string(file, "device", device);
  });
}

struct LogitsInputs {
  std::string hf;
  std::vector<int64_t> ids;
  std::string out;
};

const OptionSet<LogitsInputs>& logits_inputs() {
  static const OptionSet<LogitsInputs> set([](OptionSet<LogitsInputs>& s) {
    s.option("hf", &LogitsInputs::hf, "Hugging Face checkpoint directory (config.json + model.safetensors or an index)");
    s.option("ids", &LogitsInputs::ids, "token ids of the sequence, comma-separated").range(0, INT32_MAX);
    s.option("out", &LogitsInputs::out, "output HDF5 file");
  });
  return set;
}

void lm_logits_options(Config& cfg) {
  logits_inputs().add_to(cfg);
  register_runtime_options(cfg);
}

int lm_logits(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  const LogitsInputs args = logits_inputs().read(cfg);
  const std::string &dir = args.hf, &out = args.out;
  std::vector<int32_t> ids;
  ModelConfig m;
  rt.on_every_rank("inputs", [&] {
    VLM_REQUIRE(!dir.empty(), "--hf: a checkpoint directory is required");
    VLM_REQUIRE(std::filesystem::is_directory(dir), "--hf ", dir,
                ": expected a Hugging Face model folder (config.json and its *.safetensors)");
    VLM_REQUIRE(!out.empty(), "--out: an output .h5 file is required");
    check_output_path(out, cfg, {{"--hf", dir}});
    for (int64_t x : args.ids) ids.push_back(int32_t(x));
    VLM_REQUIRE(!ids.empty(), "--ids: at least one token id is required");
    m = read_hf_config(dir);
    for (int32_t id : ids)
      VLM_REQUIRE(id >= 0 && id < m.vocab_size, "--ids: token id ", id, " outside [0, vocab_size=", m.vocab_size,
                  ")");
    VLM_REQUIRE(int64_t(ids.size()) <= m.max_pos, "--ids: ", ids.size(), " tokens exceed max_position_embeddings=",
                m.max_pos, " of ", dir);
    // The TP rules of ModelConfig::validate, in the checkpoint's own key names.
    const int tp = rt.topology().tp();
    const std::string cj = dir + "/config.json: ";
    VLM_REQUIRE(m.n_heads % tp == 0, cj, "num_attention_heads=", m.n_heads, " is not divisible by --parallel.tp=", tp);
    VLM_REQUIRE(m.d_ff % tp == 0, cj, "intermediate_size=", m.d_ff, " is not divisible by --parallel.tp=", tp);
    VLM_REQUIRE(m.kv_heads() % tp == 0 || tp % m.kv_heads() == 0, cj, "num_key_value_heads=", m.kv_heads(),
                " and --parallel.tp=", tp, ": one must divide the other");
  });
  const int64_t T = int64_t(ids.size());
  const int tp = rt.topology().tp();
  Backend& b = rt.backend();

  Backbone bb(m, b, rt.groups().tp(), T);
  load_hf_checkpoint(bb, dir);
  Stream& s = b.default_stream();
  LmInput in = make_lm_input(b, {0, int32_t(T)}, ids, {});
  bb.forward(s, in);
  Tensor logits = bb.gather_logits(s);  // host [T, V], collective over the TP group
  s.synchronize();
  if (rt.root()) {
    require_shape(logits, Shape{T, m.vocab_size}, "gathered logits");
    write_logits_h5(out, to_vector_f32(logits), ids, m.vocab_size, m.str(), tp, b.description());
    std::printf("vlm lm logits: %s (%s, tp=%d) -> %s: logits [%lld, %lld]\n", dir.c_str(), m.str().c_str(), tp,
                out.c_str(), (long long)T, (long long)m.vocab_size);
  }
  return 0;
}

}  // namespace

VLM_COMMAND(lm, {.path = "lm", .summary = "language backbone tools: `lm logits` (Hugging Face import check)"});
VLM_COMMAND(lm_logits,
            {.path = "lm logits",
             .summary = "write the logits of a Hugging Face Llama/Qwen2 checkpoint for given ids",
             .usage = "--hf DIR --ids 1,2,3 [--tp N] [--device auto|cpu|cuda] --out FILE.h5\n"
                      "Loads a Hugging Face Llama/Qwen2 checkpoint and writes the logits [T, vocab] (f32, "
                      "dataset 'logits') and the ids (dataset 'ids') of one sequence to HDF5.",
             .options = lm_logits_options,
             .run = lm_logits,
             .multi_rank = true});

}  // namespace vlm
