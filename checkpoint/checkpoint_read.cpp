// Reading checkpoints (checkpoint/checkpoint.h): the reader of either form, `latest`,
// loading a model or the whole training state.
#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file_read.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_pieces.h"
#include "checkpoint/shard_store.h"
#include "optim/optimizer.h"

namespace vlm {

namespace fs = std::filesystem;

namespace {

bool is_sharded(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::exists(dir + "/" + kIndexName, ec);
}

// A folder with shard files (or their temporaries) but no index: a save that did not finish.
bool has_shards(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".shard") != std::string::npos) return true;
  return false;
}

// The newest complete save of a checkpoint folder by step (a step_<N>.h5 file or a
// step_<N>/ folder with its index), "" when there is none.
std::string newest_save(const std::string& dir) {
  std::error_code ec;
  int64_t best = -1;
  std::string name;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const int64_t step = save_step(n);
    const bool complete = n.ends_with(".h5") ? e.is_regular_file(ec) : is_sharded(e.path().string());
    if (step > best && complete) best = step, name = n;
  }
  return name;
}

// The file that lists the tensors (for messages): the index of a sharded checkpoint.
std::string listing(const CheckpointReader& ck) {
  return ck.sharded() ? ck.path() + "/" + kIndexName : ck.path();
}

// Every stored tensor is a parameter's values or moments in a group of the model's
// modules (missing ones are refused when read).
void check_tensors(const CheckpointReader& ck, const std::vector<ModuleParams>& mods) {
  std::vector<std::string> names;
  for (const ModuleParams& m : mods) names.push_back(module_name(m.id));
  for (const std::string& t : ck.store().tensors(names)) {
    const size_t cut = t.rfind('/');
    const std::string group = cut == std::string::npos ? "" : t.substr(0, cut);
    const ParamTable* table = nullptr;
    for (const ModuleParams& m : mods)
      for (StateKind k : {StateKind::Value, StateKind::M, StateKind::V})
        if (group == state_group(k, m.id)) table = m.table;
    VLM_REQUIRE(table, listing(ck), ": tensor /", t,
                " is not a tensor of a vlm checkpoint (model/<module>/<name> or optim/m|v/<module>/<name>)");
    VLM_REQUIRE(table->has(t.substr(cut + 1)), listing(ck), ": tensor /", t,
                " is not a parameter of this model (saved from another model configuration?)");
  }
}

// Reads each piece where this rank keeps it (the padding rows of a span read as zero): a
// parameter's values into a host copy of its local slice, which ParamTable::write places
// wherever the table keeps them (nn/param_table.h; the pieces of a parameter's values
// come one after another), the moments into the optimizer's buffers.
void read_pieces(const CheckpointReader& ck, const std::vector<ModuleParams>& mods, const AdamW* opt,
                 const std::vector<StatePiece>& pieces) {
  const StatePiece* pending = nullptr;
  std::vector<float> local;
  const auto flush = [&] {
    if (pending)
      mods[pending->module].table->write(*pending->param, Tensor::from_vector(local, pending->param->local));
    pending = nullptr;
  };
  for (const StatePiece& p : pieces) {
    if (p.kind != StateKind::Value) {
      std::vector<float> host(size_t(p.span()), 0.f);
      ck.store().read(p.tensor, p.shape, p.region, host.data());
      copy_tensor(piece_storage(mods, opt, p), Tensor::from_vector(host, Shape{p.span()}));
      continue;
    }
    if (!pending || pending->param != p.param) {
      flush();
      pending = &p, local.assign(size_t(p.param->local.numel()), 0.f);
    }
    ck.store().read(p.tensor, p.shape, p.region, local.data() + (p.flat.begin - p.param->at));
  }
  flush();
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : sharded_(fs::is_directory(path)) {
  if (sharded_) {
    VLM_REQUIRE(is_sharded(path), path, ": not a complete checkpoint (no ", kIndexName,
                has_shards(path) ? ": its save did not finish)" : ")");
    store_ = std::make_unique<ShardStore>(path);
  } else {
    store_ = open_h5_store(path);
  }
}

Tensor CheckpointReader::read_full(const std::string& tensor, const Shape& expect) const {
  std::vector<float> v(size_t(expect.numel()));
  store_->read(tensor, expect.dims(), whole_region(expect.dims()), v.data());
  return Tensor::from_vector(v, expect);
}

Tensor CheckpointReader::read_local(const std::string& tensor, const ParamTable& t, const Param& p) const {
  return t.local_slice(p, read_full(tensor, p.spec.hf));
}

int64_t save_step(const std::string& n) {
  if (n.rfind("step_", 0) != 0) return -1;
  std::string num = n.substr(5);
  if (num.size() > 3 && num.substr(num.size() - 3) == ".h5") num.resize(num.size() - 3);
  if (num.empty() || num.size() > 18 || num.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(num);
}

std::string resolve_checkpoint(const std::string& path, bool allow_missing) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) || is_sharded(path)) return path;
  if (!fs::is_directory(path, ec)) {
    VLM_REQUIRE(allow_missing, path, ": no such checkpoint file or folder");
    return "";
  }
  const std::string latest = path + "/" + kLatestName;
  if (!fs::exists(latest, ec)) {
    VLM_REQUIRE(!has_shards(path), path, ": not a complete checkpoint (no ", kIndexName, ": its save did not finish)");
    const std::string newest = newest_save(path);
    if (!newest.empty()) return path + "/" + newest;
    VLM_REQUIRE(allow_missing, path, ": no checkpoint in this folder (no '", kLatestName,
                "' file and no complete step_<N> save)");
    return "";
  }
  std::string name = read_file_bounded(latest, 4096, "checkpoint pointer");
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  VLM_REQUIRE(std::all_of(name.begin(), name.end(), [](unsigned char c) { return c >= 0x20 && c != 0x7f; }), latest,
              ": expected the name of a checkpoint in this folder, got ", name.size(),
              " bytes with control characters");
  VLM_REQUIRE(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..", latest,
              ": expected the name of a checkpoint in this folder, got '", name, "'");
  const std::string p = path + "/" + name;
  VLM_REQUIRE(fs::is_regular_file(p, ec) || fs::is_directory(p, ec), latest, ": names ", name,
              ", which does not exist");
  VLM_REQUIRE(!fs::is_directory(p, ec) || is_sharded(p), latest, ": names ", name,
              ", which is not a complete checkpoint (no ", kIndexName, ")");
  return p;
}

void load_model(const CheckpointReader& ck, VlmModel& model) {
  const std::vector<ModuleParams> mods = model.modules();
  check_tensors(ck, mods);
  read_pieces(ck, mods, nullptr, held_pieces(mods, std::vector<bool>(mods.size(), false), false));
  model.refresh_working_weights();  // bf16 copies of the loaded values (no-op at fp32)
}

void load_training_state(const CheckpointReader& ck, VlmModel& model, const std::vector<bool>& trainable, AdamW& opt) {
  const std::vector<ModuleParams> mods = model.modules();
  check_tensors(ck, mods);
  // A module frozen when saved has no moments: they start at zero.
  std::vector<bool> stored = trainable;
  for (size_t i = 0; i < mods.size(); ++i)
    stored[i] = trainable[i] && !ck.store().members(state_group(StateKind::M, mods[i].id)).empty();
  read_pieces(ck, mods, &opt, held_pieces(mods, stored, true));
  model.refresh_working_weights();
}

}  // namespace vlm
