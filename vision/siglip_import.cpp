// SigLIP safetensors -> VisionEncoder parameters; see siglip_import.h.
#include "vision/siglip_import.h"

#include <filesystem>

#include "base/error.h"
#include "io/safetensors.h"

namespace vlm {

namespace {

namespace fs = std::filesystem;

// What the messages name: the index of a sharded checkpoint, else model.safetensors.
std::string weights_file(const std::string& dir) {
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  return (fs::exists(index) ? index : fs::path(dir) / "model.safetensors").string();
}

std::string shape_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += cat(i ? "," : "", d[i]);
  return s + "]";
}

}  // namespace

VisionReadout siglip_readout(const SiglipCheckpoint& ck) {
  VLM_REQUIRE(ck.feature_layers >= 1, ck.config_file,
              ": vision_feature_layer selects hidden_states[0], the patch embeddings before any block (not "
              "supported: expected a layer after at least one block)");
  return {ck.feature_layers, ck.feature_post_norm};
}

void load_siglip(VisionEncoder& enc, const SiglipCheckpoint& ck) {
  const VisionConfig& v = enc.config();
  VLM_ASSERT(v.image_size == ck.vision.image_size && v.patch == ck.vision.patch && v.d_model == ck.vision.d_model &&
                 v.n_layers == ck.vision.n_layers && v.n_heads == ck.vision.n_heads && v.d_ff == ck.vision.d_ff,
             "load_siglip: encoder ", v.str(), " built for another shape than ", ck.vision.str());
  const std::string dir = ck.vision.hf_dir, wfile = weights_file(dir);
  const SafetensorsCheckpoint st(dir);
  const std::string prefix = find_tensor_prefix(ck, [&](std::string_view n) { return st.has(std::string(n)); }, wfile);
  ParamTable& table = enc.params();
  for (const Param& p : table.params()) {
    if (p.spec.name == kTextureWeight) continue;  // ours: not in any SigLIP checkpoint
    const std::string name = prefix + p.spec.name;
    VLM_REQUIRE(st.has(name), wfile, ": no tensor '", name, "' (needed by the SigLIP tower of ", ck.config_file,
                ")");
    const StTensorInfo& info = st.info(name);
    VLM_REQUIRE(info.shape == p.spec.full.dims(), st.file_of(name).path(), ": tensor '", name, "' has shape ",
                shape_str(info.shape), ", expected ", p.spec.full.str(), " (from ", ck.config_file, ")");
    table.set_full(p.spec.name, Tensor::from_vector(st.read_f32(name), p.spec.full));
  }
}

}  // namespace vlm
