// `vlm export` round trip (checkpoint/export_hf.h): a checkpoint made by a real tiny training
// run (`vlm train`, configs/tiny.cfg, a Fashion-MNIST subset) is exported by the binary,
// then imported back through the project's own Hugging Face readers into fresh modules:
// the backbone through read_hf_config + load_hf_checkpoint (llm/hf_import.h), the vision
// tower through read_siglip_config + load_siglip (vision/siglip_import.h), the rest from
// vlm_extra.safetensors. Every parameter of the run's model must equal the checkpoint's
// tensor bitwise (CheckpointReader::read_local, the independent reference), every exported
// tensor must be used exactly once, and the config.json files must give back the run's
// shapes, so a wrong name, shape or transposition fails. Two runs: Llama (untied
// embeddings, texture on) and Qwen2 (q/k/v bias, tied embeddings, texture off). The
// checkpoint is the sharded folder the run wrote; its consolidated single file
// (`vlm checkpoint consolidate`) exports to byte-identical files.
// An MPI singleton (the modules need communicators); `vlm` runs as a child process.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/config.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "io/safetensors.h"
#include "llm/backbone.h"
#include "llm/hf_config.h"
#include "llm/hf_import.h"
#include "parallel/runtime.h"
#include "tests/support/cli.h"
#include "tests/support/mpi.h"
#include "train/trained_model.h"
#include "vision/patch_embed.h"
#include "vision/siglip_import.h"

namespace vlm {
namespace {

using test::vlm;

class ExportRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("export_roundtrip");
    const test::FashionSubset fm = test::fashion_subset(vlm(), dir_, 200);
    data_ = fm.data, tok_ = fm.tokenizer;
  }
  // Trains `run` for 10 steps with `extra` options and exports its checkpoint to
  // <dir>/<run>_hf; returns the checkpoint file.
  static std::string train_and_export(const std::string& run, const std::string& extra) {
    const std::string ckpt = dir_ + "/" + run + "_ckpt", hf = dir_ + "/" + run + "_hf";
    const std::string train = vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg" +
                              " --data.path " + data_ + " --data.tokenizer " + tok_ + " --train.out_dir " + dir_ +
                              "/runs --train.run " + run + " --train.steps 10 --train.ckpt_dir " + ckpt + " " + extra;
    test::CommandResult r = test::run_command(train, dir_);
    EXPECT_EQ(r.status, 0) << train << "\n" << r.out << r.err;
    r = test::run_command(vlm() + " export --checkpoint " + ckpt + " --out " + hf, dir_);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    // The checkpoint consolidated into one file exports byte for byte the same files.
    const std::string one = dir_ + "/" + run + ".h5";
    r = test::run_command(vlm() + " checkpoint consolidate --checkpoint " + ckpt + " --out " + one, dir_);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    r = test::run_command(vlm() + " export --checkpoint " + one + " --out " + hf + "_h5", dir_);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    size_t files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(hf)) {
      if (!e.is_regular_file()) continue;
      const std::string rel = std::filesystem::relative(e.path(), hf).string();
      EXPECT_EQ(test::read_file(e.path()), test::read_file(hf + "_h5/" + rel)) << rel;
      ++files;
    }
    EXPECT_GE(files, 8u);
    return resolve_checkpoint(ckpt);
  }
  static inline std::string dir_, data_, tok_;
};

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> a = to_vector_f32(got), b = to_vector_f32(want);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << ": values differ";
}

void check_round_trip(const std::string& ckpt, const std::string& hf, bool tied) {
  SCOPED_TRACE(ckpt);
  RuntimeOptions ro;
  Runtime rt = start_runtime(ro);
  TrainedModel tm = load_trained_model(ckpt, rt, 1);  // for the run's config and tables
  const CheckpointReader ck(ckpt);
  Backend& b = cpu_backend();
  const std::unique_ptr<Communicator> self = test::self_comm();
  std::set<std::string> reference;  // every parameter of the model, as "<module>/<name>"
  for (const ModuleParams& m : tm.model->modules())
    for (const Param& p : m.table->params()) reference.insert(std::string(module_name(m.id)) + "/" + p.spec.name);

  // llm/: config.json gives the run's backbone; every tensor imports bitwise.
  const ModelConfig m = read_hf_config(hf + "/llm");
  const ModelConfig& want = tm.vcfg.llm;
  EXPECT_EQ(m.str(), want.str());
  EXPECT_EQ(m.tied_embeddings, tied);
  EXPECT_EQ(m.qkv_bias, want.qkv_bias);
  EXPECT_EQ(m.rope_theta, want.rope_theta);
  EXPECT_EQ(m.norm_eps, want.norm_eps);
  Backbone bb(m, b, *self, 8);
  load_hf_checkpoint(bb, hf + "/llm");  // refuses missing and leftover tensors
  std::set<std::string> seen;
  for (const Param& p : bb.params().params()) {
    expect_bitwise(p.value, ck.read_local("model/llm/" + p.spec.name, bb.params(), p), "llm/" + p.spec.name);
    seen.insert("llm/" + p.spec.name);
  }
  EXPECT_EQ(SafetensorsCheckpoint(hf + "/llm").names().size(), bb.params().params().size());

  // vision/: the SigLIP tower, under vision_model.*; the texture map comes from the extra file.
  const SiglipCheckpoint sc = read_siglip_config(hf + "/vision");
  EXPECT_EQ(sc.prefix(), kSiglipPrefix);
  VisionConfig vc = sc.vision;
  vc.texture = tm.vcfg.vision.texture;
  vc.hf_dir.clear();
  VisionConfig vw = tm.vcfg.vision;
  vw.hf_dir.clear();
  EXPECT_EQ(vc.str(), vw.str());
  VisionEncoder enc(vc, b, *self, 1, siglip_readout(sc));
  load_siglip(enc, sc);
  const SafetensorsFile extra(hf + "/" + kExtraFile);
  size_t tower = 0;
  for (const Param& p : enc.params().params()) {
    const std::string name = "vision/" + p.spec.name;
    const Tensor ref = ck.read_local("model/" + name, enc.params(), p);
    if (p.spec.name == kTextureWeight)
      expect_bitwise(Tensor::from_vector(extra.read_f32(name), p.spec.full), ref, name + " (extra file)");
    else
      expect_bitwise(p.value, ref, name), ++tower;
    seen.insert(name);
  }
  EXPECT_EQ(SafetensorsFile(hf + "/vision/model.safetensors").tensors().size(), tower);

  // vlm_extra.safetensors: the projector, the scorers and the texture map, one tensor each.
  for (const ModuleParams& mp : tm.model->modules()) {
    if (mp.id != ModuleId::Projector && mp.id != ModuleId::Scorers) continue;
    for (const Param& p : mp.table->params()) {
      const std::string name = std::string(module_name(mp.id)) + "/" + p.spec.name;
      ASSERT_NE(extra.find(name), nullptr) << name;
      expect_bitwise(Tensor::from_vector(extra.read_f32(name), p.spec.full),
                     ck.read_local("model/" + name, *mp.table, p), name);
      seen.insert(name);
    }
  }
  std::set<std::string> in_extra;
  for (const StTensorInfo& t : extra.tensors()) in_extra.insert(t.name);
  EXPECT_EQ(in_extra.size(), extra.tensors().size());
  for (const std::string& n : in_extra) EXPECT_TRUE(n.rfind("llm/", 0) != 0 && seen.count(n)) << n;
  EXPECT_EQ(seen, reference);
  EXPECT_EQ(extra.metadata().at("vlm_format"), "vlm-extra");
  EXPECT_EQ(extra.metadata().at("vlm_step"), "10");
  EXPECT_EQ(extra.metadata().at("vlm_config"), tm.options->dump_ini(true));
}

TEST_F(ExportRoundTrip, LlamaWithTexture) {
  const std::string ckpt = train_and_export("llama", "");
  check_round_trip(ckpt, dir_ + "/llama_hf", false);
}

TEST_F(ExportRoundTrip, Qwen2TiedWithoutTexture) {
  const std::string ckpt =
      train_and_export("qwen2", "--model.qkv_bias --model.tied_embeddings true --vision.texture off");
  check_round_trip(ckpt, dir_ + "/qwen2_hf", true);
}

}  // namespace
}  // namespace vlm
