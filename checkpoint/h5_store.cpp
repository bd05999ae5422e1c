// Reading the single-file checkpoint, step_<N>.h5 (checkpoint/tensor_store.h; its layout:
// checkpoint/checkpoint_h5.h).
#include <cmath>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "checkpoint/checkpoint_h5.h"
#include "checkpoint/tensor_store.h"
#include "io/crc32c.h"
#include "io/h5_io.h"

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

class H5Store final : public TensorStore {
 public:
  explicit H5Store(const std::string& path) {
    path_ = path;
    file_ = h5_open_file(path);
    const H5Handle f = file_.get();
    VLM_REQUIRE(h5_has_attr(f, "format") && h5_read_attr_string(f, path, "format") == kCheckpointFormat, path,
                ": not a vlm checkpoint (root attribute format='", kCheckpointFormat, "' missing)");
    const int64_t version = attr_in(f, path, "version", 0, INT64_MAX);
    VLM_REQUIRE(version >= 1 && version <= kCheckpointVersion, path, ": checkpoint version ", version,
                " (this vlm reads versions 1 to ", kCheckpointVersion, ")");
    CheckpointState& s = meta_.state;
    s.step = attr_in(f, path, "step", 0, INT64_MAX);
    s.saved_tp = int(attr_in(f, path, "saved_tp", 1, 1 << 20));
    s.saved_dp = int(attr_in(f, path, "saved_dp", 1, 1 << 20));
    s.zero = int(attr_in(f, path, "zero", 0, 3));
    s.global_batch = attr_in(f, path, "global_batch", 1, INT64_MAX);
    s.micro_batches = attr_in(f, path, "micro_batches", 1, INT64_MAX);
    VLM_REQUIRE(h5_exists(f, "/state"), path, ": group /state is missing (not a complete vlm checkpoint)");
    H5Id st = h5_open_group(f, "state");
    s.seed = uint64_t(attr_in(st, path, "seed", INT64_MIN, INT64_MAX));
    s.sampler.seed = uint64_t(attr_in(st, path, "sampler_seed", INT64_MIN, INT64_MAX));
    s.sampler.epoch = attr_in(st, path, "sampler_epoch", 0, INT64_MAX);
    s.sampler.step = attr_in(st, path, "sampler_step", 0, INT64_MAX);
    check_data_position(s, path + ": /state");
    meta_.config = read_bytes(f, path, "/config", int64_t(kMaxIniBytes));
    meta_.options = read_bytes(f, path, "/options", int64_t(kMaxIniBytes));
    meta_.tokenizer = read_bytes(f, path, "/tokenizer", kMaxTokenizerBytes);
    if (version >= 2) {  // last: a damaged field above is named by its own check first
      const int64_t want = attr_in(f, path, kChecksumAttr, 0, UINT32_MAX);
      VLM_REQUIRE(uint32_t(want) == h5_state_checksum(meta_), path,
                  ": the checkpoint's state or texts are corrupt (the root attribute crc32c does not match them)");
    }
  }

  std::vector<std::string> tensors(const std::vector<std::string>& modules) const override {
    std::vector<std::string> all;
    for (const char* kind : {"model", "optim/m", "optim/v"})
      for (const std::string& m : modules)
        for (const std::string& n : members(std::string(kind) + "/" + m))
          all.push_back(std::string(kind) + "/" + m + "/" + n);
    return all;
  }

  std::vector<std::string> members(const std::string& group) const override {
    if (!h5_exists(file_.get(), "/" + group)) return {};
    H5Id g = h5_open_group(file_.get(), group);
    return h5_list(g);
  }

  void read(const std::string& tensor, const Dims& shape, const TensorRegion& need, float* dst) override {
    if (tensor != cached_) {  // a tensor is read whole once (its checksum covers all of it)
      cached_.clear();
      full_ = read_full(tensor, shape);
      cached_ = tensor;
    }
    for (const Overlap& o : overlaps(region_runs(shape, whole_region(shape)), region_runs(shape, need)))
      std::memcpy(dst + o.b, full_.data() + o.a, size_t(o.len) * 4);
  }

 private:
  std::vector<float> read_full(const std::string& tensor, const Dims& expect) {
    const std::string at = "/" + tensor;
    VLM_REQUIRE(h5_exists(file_.get(), at), path_, ": tensor ", at,
                " is missing (saved from another model configuration?)");
    std::vector<int64_t> dims;
    H5Id ds = h5_open_dataset(file_.get(), path_, at, H5Elem::F32, int(expect.size()), &dims);
    VLM_REQUIRE(dims == expect, path_, ": tensor ", at, " has shape ", dims_str(dims), ", the model expects ",
                dims_str(expect), " (saved from another model configuration?)");
    const int64_t n = dims_numel(expect);
    h5_check_whole_read(ds, path_, at, uint64_t(n) * 4);
    std::vector<float> v(static_cast<size_t>(n));
    if (n > 0) h5_read_rows(ds, H5Elem::F32, 0, dims[0], n / dims[0], v.data());
    bytes_read_ += uint64_t(n) * 4;
    VLM_REQUIRE(h5_has_attr(ds, kChecksumAttr), path_, ": tensor ", at, " has no '", kChecksumAttr, "' attribute");
    const int64_t want = h5_read_attr_int(ds, path_, kChecksumAttr);
    VLM_REQUIRE(int64_t(crc32c(v.data(), v.size() * 4)) == want, path_, ": tensor ", at,
                " is corrupt (its checksum does not match the data)");
    for (float x : v) VLM_REQUIRE(std::isfinite(x), path_, ": tensor ", at, " holds a non-finite value");
    return v;
  }

  H5Id file_;
  std::string cached_;
  std::vector<float> full_;
};

}  // namespace

uint32_t h5_state_checksum(const CheckpointMeta& m) {
  const CheckpointState& s = m.state;
  const std::string fields = cat(s.step, " ", s.saved_tp, " ", s.saved_dp, " ", s.zero, " ", s.global_batch, " ",
                                 s.micro_batches, " ", int64_t(s.seed), " ", int64_t(s.sampler.seed), " ",
                                 s.sampler.epoch, " ", s.sampler.step, " ");
  uint32_t c = crc32c(fields.data(), fields.size());
  for (const std::string* t : {&m.config, &m.options, &m.tokenizer}) c = crc32c(t->data(), t->size(), c);
  return c;
}

std::unique_ptr<TensorStore> open_h5_store(const std::string& file) { return std::make_unique<H5Store>(file); }

}  // namespace vlm
