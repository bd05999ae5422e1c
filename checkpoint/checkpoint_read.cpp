// Reading checkpoints (checkpoint/checkpoint.h): the reader, `latest`, loading a model or the
// whole training state.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/config.h"
#include "base/error.h"
#include "base/file_read.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_io.h"
#include "optim/optimizer.h"

namespace vlm {

namespace {

std::string read_bytes(H5Handle f, const std::string& file, const std::string& path, int64_t max_bytes) {
  VLM_REQUIRE(h5_exists(f, path), file, ": ", path, " is missing (not a complete vlm checkpoint)");
  std::vector<int64_t> dims;
  H5Id ds = h5_open_dataset(f, file, path, H5Elem::U8, 1, &dims);
  VLM_REQUIRE(dims[0] <= max_bytes, file, ": ", path, " holds ", dims[0], " bytes (at most ", max_bytes, " expected)");
  h5_check_whole_read(ds, file, path, uint64_t(dims[0]));
  std::string s(static_cast<size_t>(dims[0]), '\0');
  if (dims[0] > 0) h5_read_rows(ds, H5Elem::U8, 0, dims[0], 1, s.data());
  return s;
}

int64_t attr_in(H5Handle f, const std::string& file, const char* name, int64_t lo, int64_t hi) {
  VLM_REQUIRE(h5_has_attr(f, name), file, ": attribute '", name, "' is missing (not a complete vlm checkpoint)");
  const int64_t v = h5_read_attr_int(f, file, name);
  VLM_REQUIRE(v >= lo && v <= hi, file, ": attribute '", name, "' = ", v, " (expected ", lo, "..", hi, ")");
  return v;
}

// The group holds no tensor that is not a parameter of `t` (missing ones are refused when
// read).
void check_members(const CheckpointReader& ck, const std::string& group, const ParamTable& t) {
  VLM_REQUIRE(ck.has(group), ck.path(), ": group /", group, " is missing (not a complete vlm checkpoint)");
  H5Id g = h5_open_group(ck.file(), group);
  for (const std::string& n : h5_list(g))
    VLM_REQUIRE(t.has(n), ck.path(), ": tensor /", group, "/", n,
                " is not a parameter of this model (saved from another model configuration?)");
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  file_ = h5_open_file(path);
  const H5Handle f = file_.get();
  VLM_REQUIRE(h5_has_attr(f, "format") && h5_read_attr_string(f, path, "format") == kCheckpointFormat, path,
              ": not a vlm checkpoint (root attribute format='", kCheckpointFormat, "' missing)");
  const int64_t version = attr_in(f, path, "version", 0, INT64_MAX);
  VLM_REQUIRE(version == kCheckpointVersion, path, ": checkpoint version ", version, " (this vlm reads version ",
              kCheckpointVersion, ")");
  state_.step = attr_in(f, path, "step", 0, INT64_MAX);
  state_.saved_tp = int(attr_in(f, path, "saved_tp", 1, 1 << 20));
  state_.saved_dp = int(attr_in(f, path, "saved_dp", 1, 1 << 20));
  state_.zero = int(attr_in(f, path, "zero", 0, 3));
  state_.global_batch = attr_in(f, path, "global_batch", 1, INT64_MAX);
  state_.micro_batches = attr_in(f, path, "micro_batches", 1, INT64_MAX);
  VLM_REQUIRE(h5_exists(f, "/state"), path, ": group /state is missing (not a complete vlm checkpoint)");
  H5Id st = h5_open_group(f, "state");
  state_.seed = uint64_t(attr_in(st, path, "seed", INT64_MIN, INT64_MAX));
  state_.sampler.seed = uint64_t(attr_in(st, path, "sampler_seed", INT64_MIN, INT64_MAX));
  state_.sampler.epoch = attr_in(st, path, "sampler_epoch", 0, INT64_MAX);
  state_.sampler.step = attr_in(st, path, "sampler_step", 0, INT64_MAX);
  config_ = read_bytes(f, path, "/config", int64_t(kMaxIniBytes));
  options_ = read_bytes(f, path, "/options", int64_t(kMaxIniBytes));
  tokenizer_ = read_bytes(f, path, "/tokenizer", int64_t(1) << 30);
}

bool CheckpointReader::has(const std::string& tensor) const { return h5_exists(file_.get(), "/" + tensor); }

Tensor CheckpointReader::read_full(const std::string& tensor, const Shape& expect) const {
  const std::string at = "/" + tensor;
  VLM_REQUIRE(has(tensor), path_, ": tensor ", at, " is missing (saved from another model configuration?)");
  std::vector<int64_t> dims;
  H5Id ds = h5_open_dataset(file_.get(), path_, at, H5Elem::F32, int(expect.ndim()), &dims);
  VLM_REQUIRE(Shape(dims) == expect, path_, ": tensor ", at, " has shape ", Shape(dims).str(), ", the model expects ",
              expect.str(), " (saved from another model configuration?)");
  h5_check_whole_read(ds, path_, at, uint64_t(expect.numel()) * 4);
  std::vector<float> v(size_t(expect.numel()));
  if (!v.empty()) h5_read_rows(ds, H5Elem::F32, 0, dims[0], expect.numel() / dims[0], v.data());
  VLM_REQUIRE(h5_has_attr(ds, kChecksumAttr), path_, ": tensor ", at, " has no '", kChecksumAttr, "' attribute");
  const int64_t want = h5_read_attr_int(ds, path_, kChecksumAttr);
  VLM_REQUIRE(int64_t(tensor_checksum(v)) == want, path_, ": tensor ", at,
              " is corrupt (its checksum does not match the data)");
  for (float x : v) VLM_REQUIRE(std::isfinite(x), path_, ": tensor ", at, " holds a non-finite value");
  return Tensor::from_vector(v, expect);
}

Tensor CheckpointReader::read_local(const std::string& tensor, const ParamTable& t, const Param& p) const {
  return t.local_slice(p, read_full(tensor, p.spec.hf));
}

std::string resolve_checkpoint(const std::string& file_or_dir, bool allow_missing) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(file_or_dir, ec)) return file_or_dir;
  if (!fs::is_directory(file_or_dir, ec)) {
    VLM_REQUIRE(allow_missing, file_or_dir, ": no such checkpoint file or folder");
    return "";
  }
  const std::string latest = file_or_dir + "/" + kLatestName;
  if (!fs::exists(latest, ec)) {
    VLM_REQUIRE(allow_missing, file_or_dir, ": no checkpoint in this folder (no '", kLatestName, "' file)");
    return "";
  }
  std::string name = read_file_bounded(latest, 4096, "checkpoint pointer");
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  VLM_REQUIRE(!name.empty() && name.find('/') == std::string::npos, latest,
              ": expected the file name of a checkpoint in this folder, got '", name, "'");
  const std::string path = file_or_dir + "/" + name;
  VLM_REQUIRE(fs::is_regular_file(path, ec), latest, ": names ", name, ", which does not exist");
  return path;
}

void load_model(const CheckpointReader& ck, VlmModel& model) {
  for (const ModuleParams& m : model.modules()) {
    const std::string group = std::string(kModelGroup) + "/" + module_name(m.id);
    check_members(ck, group, *m.table);
    for (const Param& p : m.table->params()) m.table->write(p, ck.read_local(group + "/" + p.spec.name, *m.table, p));
  }
  model.refresh_working_weights();  // bf16 copies of the loaded values (no-op at fp32)
}

void load_training_state(const CheckpointReader& ck, VlmModel& model, const std::vector<bool>& trainable, AdamW& opt) {
  load_model(ck, model);
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    if (!trainable[i]) continue;
    const ParamTable& t = *mods[i].table;
    const ParamLayout& L = t.layout();
    for (int k = 0; k < 2; ++k) {
      const std::string group = moment_group(k, mods[i].id);
      if (!ck.has(group)) continue;  // frozen when saved: the moments start at zero
      check_members(ck, group, t);
      std::vector<float> flat(size_t(L.numel()), 0.f);
      for (const Param& p : t.params()) {
        const std::vector<float> v = to_vector_f32(ck.read_local(group + "/" + p.spec.name, t, p));
        std::memcpy(&flat[size_t(p.at)], v.data(), v.size() * 4);
      }
      // This rank's owned elements, run after run (nn/param_layout.h).
      std::vector<float> mine;
      for (const ShardRun& r : L.runs()) {
        mine.insert(mine.end(), flat.begin() + r.block_begin, flat.begin() + r.block_end);
        mine.insert(mine.end(), flat.begin() + r.tail_begin, flat.begin() + r.tail_end);
      }
      if (!mine.empty()) copy_tensor(opt.moment(i, k).sub(0, Shape{L.owned()}), Tensor::from_vector(mine, Shape{L.owned()}));
    }
  }
}

}  // namespace vlm
