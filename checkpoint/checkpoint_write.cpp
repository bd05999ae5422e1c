// Writing checkpoints (checkpoint/checkpoint.h): full logical tensors gathered from the TP
// slices and the ZeRO shards (nn/param_layout.h), written by world rank 0 to a temporary
// file that is flushed and renamed, then `latest`, then pruning.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/config.h"
#include "base/error.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_io.h"
#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "optim/optimizer.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"

namespace vlm {

std::string moment_group(int k, ModuleId m) { return std::string("optim/") + (k == 0 ? "m/" : "v/") + module_name(m); }

uint32_t tensor_checksum(const std::vector<float>& v) { return crc32c(v.data(), v.size() * sizeof(float)); }

namespace {

// VLM_FAULT_CKPT_KILL=<n>: the writer kills itself (SIGKILL) after its n-th tensor.
void fault_tick() {
  static const long limit = [] {
    const char* e = std::getenv("VLM_FAULT_CKPT_KILL");
    return e ? std::atol(e) : 0L;
  }();
  static long written = 0;
  if (limit > 0 && ++written == limit) std::raise(SIGKILL);
}

// The full logical tensor (p.spec.hf shape) of parameter p from every TP rank's local
// slice `local` (p.local, host): an all-gather over tp when the parameter is split.
std::vector<float> gather_full(Stream& s, Communicator& tp, const Param& p, const std::vector<float>& local,
                               bool split) {
  std::vector<float> full;
  if (!split || tp.size() == 1) {
    full = local;
  } else {
    Backend& b = backend_for(tp.device());
    const int64_t n = int64_t(local.size()), r = tp.size();
    const Tensor in = Tensor::empty(b, Shape{n}), out = Tensor::empty(b, Shape{r * n});
    copy_tensor(in, Tensor::from_vector(local, Shape{n}));
    tp.all_gather(s, out, in);
    const std::vector<float> g = to_vector_f32(out);  // [r][outer][ld * inner]
    const int d = p.spec.split_dim;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; ++i) outer *= p.spec.full[i];
    for (int i = d + 1; i < int(p.spec.full.ndim()); ++i) inner *= p.spec.full[i];
    const int64_t run = p.local[d] * inner;  // elements of one rank per outer index
    full.resize(size_t(r * n));
    for (int64_t k = 0; k < r; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(&full[size_t((o * r + k) * run)], &g[size_t(k * n + o * run)], size_t(run) * 4);
  }
  full.resize(size_t(p.spec.hf.numel()));  // vocabulary padding rows are the last rows
  return full;
}

H5Id create_groups(H5Handle f, const std::string& path) {  // "a/b/c", each created when absent
  H5Id g;
  std::string at;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t next = std::min(path.find('/', pos), path.size());
    const std::string part = path.substr(pos, next - pos);
    const H5Handle parent = g.valid() ? g.get() : f;
    g = h5_exists(f, at + "/" + part) ? h5_open_group(parent, part) : h5_create_group(parent, part);
    at += "/" + part;
    pos = next + 1;
  }
  return g;
}

// Removes the oldest step_<N>.h5 beyond keep_last (never `keep`), and temporaries that
// killed saves of other processes left behind.
void prune(const std::string& dir, int keep_last, const std::string& keep) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> files;
  const std::string mine = std::string(AtomicFile::kTempInfix) + std::to_string(getpid()) + "-";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".step_", 0) == 0 && n.find(AtomicFile::kTempInfix) != std::string::npos &&
        n.find(mine) == std::string::npos)
      fs::remove(e.path(), ec);
    if (n.rfind("step_", 0) != 0 || n.size() < 9 || n.substr(n.size() - 3) != ".h5") continue;
    const std::string num = n.substr(5, n.size() - 8);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    files.push_back({std::stoll(num), n});
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; keep_last > 0 && i + size_t(keep_last) < files.size(); ++i)
    if (files[i].second != keep) fs::remove(dir + "/" + files[i].second, ec);
}

}  // namespace

std::string save_checkpoint(const std::string& dir, int keep_last, const CheckpointState& state,
                            const Config& options, const Tokenizer& tok, VlmModel& model,
                            const std::vector<bool>& trainable, AdamW& opt, Runtime& rt) {
  Stream& s = rt.backend().default_stream();
  s.synchronize();
  Communicator& tp = rt.groups().tp();
  const bool writer = rt.root(), gathers = rt.topology().self().dp_rank == 0;
  const std::string name = "step_" + std::to_string(state.step) + ".h5", path = dir + "/" + name;
  std::unique_ptr<AtomicFile> out;
  H5Id f;
  if (writer) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    VLM_REQUIRE(!ec, dir, ": cannot create the checkpoint folder (", ec.message(), ")");
    out = std::make_unique<AtomicFile>(path);
    f = h5_create_file(out->temp_path());
    h5_write_attr_string(f, "format", kCheckpointFormat);
    h5_write_attr_int(f, "version", kCheckpointVersion);
    h5_write_attr_int(f, "step", state.step);
    h5_write_attr_int(f, "saved_tp", state.saved_tp);
    h5_write_attr_int(f, "saved_dp", state.saved_dp);
    h5_write_attr_int(f, "zero", state.zero);
    h5_write_attr_int(f, "global_batch", state.global_batch);
    h5_write_attr_int(f, "micro_batches", state.micro_batches);
    for (const bool set_only : {false, true}) {
      const std::string ini = options.dump_ini(set_only);
      h5_write_1d(f, set_only ? "options" : "config", H5Elem::U8, ini.data(), int64_t(ini.size()), true);
    }
    const std::string tj = tok.to_json();
    h5_write_1d(f, "tokenizer", H5Elem::U8, tj.data(), int64_t(tj.size()), true);
    H5Id st = h5_create_group(f, "state");
    h5_write_attr_int(st, "seed", int64_t(state.seed));
    h5_write_attr_int(st, "sampler_seed", int64_t(state.sampler.seed));
    h5_write_attr_int(st, "sampler_epoch", state.sampler.epoch);
    h5_write_attr_int(st, "sampler_step", state.sampler.step);
  }
  auto put = [&](const std::string& group, const Param& p, const std::vector<float>& full) {
    if (!writer) return;
    H5Id g = create_groups(f, group);
    const std::vector<int64_t> dims = p.spec.hf.dims();
    h5_write_array(g, p.spec.name, H5Elem::F32, full.data(), dims);
    std::vector<int64_t> written;
    H5Id ds = h5_open_dataset(f, path, "/" + group + "/" + p.spec.name, H5Elem::F32, int(dims.size()), &written);
    h5_write_attr_int(ds, kChecksumAttr, int64_t(tensor_checksum(full)));
    fault_tick();
  };
  const std::vector<ModuleParams> mods = model.modules();
  const DpGrads& dpg = opt.dp_grads();
  for (size_t i = 0; i < mods.size(); ++i) {
    const ParamTable& t = *mods[i].table;
    // k = -1: the values; 0, 1: the moments (trainable modules only).
    for (int k = -1; k < (trainable[i] ? 2 : 0); ++k) {
      const std::vector<float> flat =
          dpg.gather_flat(s, i, k < 0 ? dpg.owned_values(i) : to_vector_f32(opt.moment(i, k).sub(0, Shape{t.layout().owned()})));
      if (!gathers) continue;
      const std::string group = k < 0 ? std::string(kModelGroup) + "/" + module_name(mods[i].id) : moment_group(k, mods[i].id);
      for (const Param& p : t.params()) {
        const auto at = flat.begin() + p.at;
        put(group, p, gather_full(s, tp, p, std::vector<float>(at, at + p.local.numel()), mods[i].tp_split && p.spec.split_dim >= 0));
      }
    }
  }
  if (writer) {
    h5_close_file(f);
    out->commit();
    write_file_atomic(dir + "/" + kLatestName, name + "\n");
    prune(dir, keep_last, name);
  }
  return path;
}

}  // namespace vlm
