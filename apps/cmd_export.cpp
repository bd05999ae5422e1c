// `vlm export`: a checkpoint of `vlm train` as Hugging Face files (checkpoint/export_hf.h;
// docs/checkpoints.md, "Export to Hugging Face"):
//   vlm export --checkpoint runs/x/ckpt[/step_N] --out DIR
// One process, or one TP group under mpirun (world = tp; each rank reads its slices and
// the backbone is gathered to rank 0, which writes). The inputs are checked on every
// rank in one agreed step before any work: a checkpoint that is not one, a gpt2 backbone
// (no Hugging Face export), an --out that is a file.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "io/atomic_file.h"
#include "parallel/runtime.h"
#include "train/train_options.h"
#include "train/trained_model.h"

namespace vlm {

namespace {

struct ExportInputs {
  std::string checkpoint, out;
};

const OptionSet<ExportInputs>& export_inputs() {
  static const OptionSet<ExportInputs> set([](OptionSet<ExportInputs>& s) {
    s.option("checkpoint", &ExportInputs::checkpoint,
             "a checkpoint of vlm train: a step_N folder, a step_N.h5 file, or a checkpoint folder (its `latest`)");
    s.option("out", &ExportInputs::out, "output folder (created): llm/, vision/, vlm_extra.safetensors");
  });
  return set;
}

void export_options(Config& cfg) {
  export_inputs().add_to(cfg);
  register_runtime_options(cfg);
}

// An export is staged: its files are written into <parent>/.<name>.partial and moved
// into --out (a rename each) only when every one of them was written, so a failed export
// (a full disk) leaves an earlier export in --out whole instead of a mix of the two.
std::string staging_of(const std::string& out) {
  std::filesystem::path p = std::filesystem::path(out).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::string name = ".";
  name += p.filename().string();
  name += ".partial";
  return (p.parent_path() / name).string();
}

// Every destination is checked before the first rename (a folder where the export puts
// a file, something else where it puts a folder), so a blocked export leaves --out as it
// was; the staging folder goes either way.
void move_into(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(from))
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), from));
  const auto fail = [&](const std::string& what) {
    std::error_code ec;
    fs::remove_all(from, ec);
    throw UserError(what);
  };
  for (const fs::path& rel : files) {
    fs::path at = to;
    std::error_code ec;
    for (const fs::path& part : rel.parent_path()) {
      at /= part;
      if (fs::exists(fs::symlink_status(at, ec)) && !fs::is_directory(at, ec))
        fail(cat(at.string(), ": exists and is not a folder (the export writes ", (fs::path(to) / rel).string(), ")"));
    }
    const fs::path dst = fs::path(to) / rel;
    if (fs::is_directory(dst, ec)) fail(cat(dst.string(), ": is a folder (the export writes a file there)"));
  }
  for (const fs::path& rel : files) {
    const fs::path dst = fs::path(to) / rel;
    std::error_code ec;
    fs::create_directories(dst.parent_path(), ec);
    fs::rename(fs::path(from) / rel, dst, ec);
    if (ec) fail(cat(dst.string(), ": cannot move the export's file into place (", ec.message(), ")"));
  }
  fs::remove_all(from);
}

int export_hf(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  const ExportInputs in = export_inputs().read(cfg);
  const std::string& out = in.out;
  std::string path;
  rt.on_every_rank("inputs", [&] {
    VLM_REQUIRE(!in.checkpoint.empty(), "--checkpoint: a checkpoint file or folder is required");
    VLM_REQUIRE(!out.empty(), "--out: an output folder is required");
    VLM_REQUIRE(!std::filesystem::exists(out) || std::filesystem::is_directory(out), "--out ", out,
                ": exists and is not a folder");
    // Inside the checkpoint, its pruning would remove the export (and the export may replace its files).
    VLM_REQUIRE(!path_inside(out, in.checkpoint), "--out ", out, ": inside ", in.checkpoint,
                ", the checkpoint of --checkpoint; write outside it");
    VLM_REQUIRE(rt.topology().dp() == 1, "vlm export runs as one TP group: the world (", rt.topology().world_size(),
                " ranks) must equal --parallel.tp (", rt.topology().tp(), ")");
    path = resolve_checkpoint(in.checkpoint);
    const CheckpointReader ck(path);
    const std::unique_ptr<Config> opts = checkpoint_options(ck);
    VlmConfig v;  // what can be checked before the model loads (the rest: below)
    naming_the_checkpoint(path, [&] {
      v.vision = read_vision_config(*opts);
      if (read_train_options(*opts).llm_hf.empty())
        v.llm = read_model_config(*opts);
      else
        v.llm.family = ModelFamily::Llama;  // llm.hf's Llama/Qwen2
    });
    check_exportable(v, path);
  });
  TrainedModel tm = load_trained_model(path, rt, 1);
  check_exportable(tm.vcfg, path);
  Stream& s = rt.backend().default_stream();
  const std::string staging = staging_of(out);
  if (rt.root()) std::filesystem::remove_all(staging);  // a killed export's
  HfExportReport rep;
  try {
    rep = export_vlm_hf(*tm.model, *tm.tok, tm.options->dump_ini(true), tm.state.step, rt.groups().tp(), *tm.self, s,
                        staging);
  } catch (const UserError& e) {  // named as the files the user asked for
    if (rt.root()) {
      std::error_code ec;
      std::filesystem::remove_all(staging, ec);
    }
    std::string msg = e.what();
    for (size_t at = msg.find(staging); at != std::string::npos; at = msg.find(staging, at + out.size()))
      msg.replace(at, staging.size(), out);
    throw UserError(msg);
  }
  if (rt.root()) {
    move_into(staging, out);
    std::printf("vlm export: %s (step %lld) -> %s: llm/ %lld tensors (%s), vision/ %lld tensors (SigLIP), "
                "%s %zu tensors\n",
                path.c_str(), (long long)tm.state.step, out.c_str(), (long long)rep.llm_tensors,
                tm.vcfg.llm.qkv_bias ? "Qwen2" : "Llama", (long long)rep.vision_tensors, kExtraFile,
                rep.extra.size());
    if (tm.vcfg.vision.texture)
      std::printf("  note: vision.texture is on; vision/ alone computes the encoder without the texture map "
                  "(%s holds it)\n",
                  kExtraFile);
  }
  return 0;
}

}  // namespace

VLM_COMMAND(export_cmd, {.path = "export",
                     .summary = "write a checkpoint as Hugging Face files (Llama/Qwen2 backbone, SigLIP tower, "
                                "the rest in vlm_extra.safetensors)",
                     .usage = "--checkpoint CKPT --out DIR [--tp N] [--device auto|cpu|cuda]\n"
                              "Writes DIR/llm (AutoModelForCausalLM), DIR/vision (SiglipVisionModel) and "
                              "DIR/vlm_extra.safetensors (projector, scorers, texture map; the run's config in its "
                              "metadata). See docs/checkpoints.md.",
                     .options = export_options,
                     .run = export_hf,
                     .multi_rank = true});

}  // namespace vlm
