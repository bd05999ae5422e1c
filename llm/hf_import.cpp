// Import of Hugging Face safetensors into the ParamTable (per-rank slices) and export of
// the gathered full tensors; see hf_import.h.
#include "llm/hf_import.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "llm/backbone.h"
#include "llm/hf_config.h"

namespace vlm {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// This rank's slice of one parameter as host f32 values in the local shape.
std::vector<float> read_local(const Param& p, const SafetensorsCheckpoint& ckpt) {
  const ParamSpec& s = p.spec;
  const StTensorInfo& info = ckpt.info(s.name);
  const std::vector<int64_t> want = s.hf.dims();
  if (info.shape != want) {
    Shape have = info.shape.size() <= size_t(Shape::kMaxDims) ? Shape(info.shape) : Shape{};
    throw UserError(cat(ckpt.file_of(s.name).path(), ": tensor '", s.name, "': shape ", have.str(),
                        " but the model config expects ", s.hf.str()));
  }
  if (s.split_dim < 0) return ckpt.read_f32(s.name);
  const int d = s.split_dim;
  VLM_ASSERT(d <= 1, s.name, ": split dim ", d);
  const int64_t n = p.local[d];
  const int64_t hf_extent = s.hf[d];
  const int64_t begin = std::min(p.offset, hf_extent);
  const int64_t end = std::min(p.offset + n, hf_extent);
  std::vector<float> part = ckpt.read_slice_f32(s.name, d, begin, end);
  if (end - begin == n) return part;
  // Vocabulary padding: rows past V are zero (only dim 0 of the vocab tables is padded).
  VLM_ASSERT(d == 0, s.name, ": padding on split dim ", d);
  std::vector<float> out(size_t(p.local.numel()), 0.f);
  std::copy(part.begin(), part.end(), out.begin());
  return out;
}

}  // namespace

void import_hf_params(ParamTable& params, const SafetensorsCheckpoint& ckpt, bool tied_embeddings) {
  VLM_ASSERT(params.allocated(), "import_hf_params before ParamTable::allocate");
  std::set<std::string> used;
  for (const Param& p : params.params()) {
    if (!ckpt.has(p.spec.name))
      throw UserError(cat(ckpt.dir(), ": tensor '", p.spec.name, "' missing from the checkpoint (the model config ",
                          "needs it)"));
    std::vector<float> local = read_local(p, ckpt);
    params.write(p, Tensor::from_vector(local, p.local));
    used.insert(p.spec.name);
  }
  for (const std::string& name : ckpt.names()) {
    if (used.count(name)) continue;
    if (tied_embeddings && name == "lm_head.weight") continue;  // a copy of embed_tokens
    if (ends_with(name, "rotary_emb.inv_freq")) continue;       // recomputed from rope_theta
    throw UserError(cat(ckpt.dir(), ": tensor '", name, "' has no place in the backbone (config.json ",
                        "and the weights disagree, e.g. biases or a tied/untied output layer)"));
  }
}

void load_hf_checkpoint(Backbone& bb, const std::string& dir) {
  SafetensorsCheckpoint ckpt(dir);
  import_hf_params(bb.params(), ckpt, bb.config().tied_embeddings);
}

std::vector<StWriteTensor> gather_hf_params(const ParamTable& params, Communicator& tp, Stream& s,
                                            DType dtype) {
  // A tied table has no lm_head.weight entry, so tied exports carry none.
  const int P = tp.size();
  std::vector<StWriteTensor> out;
  for (const Param& p : params.params()) {
    const ParamSpec& spec = p.spec;
    std::vector<float> full;  // spec.full layout, on rank 0
    if (spec.split_dim < 0 || P == 1) {
      if (tp.rank() == 0) full = to_vector_f32(p.value);
    } else {
      Backend& b = backend_for(p.value.device());
      Tensor gathered = Tensor::empty(b, Shape{P * p.local.numel()});
      tp.all_gather(s, gathered, p.value.view(Shape{p.local.numel()}));
      s.synchronize();
      if (tp.rank() == 0) {
        std::vector<float> g = to_vector_f32(gathered);
        if (spec.split_dim == 0) {
          full = std::move(g);  // rank blocks of rows are already in row order
        } else {                // blocks [P][rows][lc] -> [rows][P*lc]
          const int64_t rows = p.local[0], lc = p.local[1];
          full.resize(g.size());
          for (int r = 0; r < P; ++r)
            for (int64_t i = 0; i < rows; ++i)
              std::copy_n(g.begin() + (r * rows + i) * lc, lc, full.begin() + i * P * lc + r * lc);
        }
      }
    }
    if (tp.rank() != 0) continue;
    // Drop vocabulary padding rows: the HF tensor is the first hf.numel() values.
    full.resize(size_t(spec.hf.numel()));
    out.push_back({spec.name, spec.hf.dims(), std::move(full), dtype});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

void export_hf_checkpoint(const Backbone& bb, Communicator& tp, Stream& s, const std::string& dir,
                          DType dtype) {
  std::vector<StWriteTensor> tensors =
      gather_hf_params(bb.params(), tp, s, dtype);
  if (tp.rank() != 0) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  VLM_REQUIRE(!ec, dir, ": cannot create the export directory (", ec.message(), ")");
  write_hf_config((std::filesystem::path(dir) / "config.json").string(), bb.config());
  write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors,
                    {{"format", "pt"}});
}

}  // namespace vlm
