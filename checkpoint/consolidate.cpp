// A sharded checkpoint written as the single file (checkpoint/checkpoint_h5.h).
#include <algorithm>

#include "base/error.h"
#include "checkpoint/checkpoint_h5.h"
#include "checkpoint/shard_store.h"
#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/h5_io.h"

namespace vlm {

namespace {

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

}  // namespace

ConsolidateReport consolidate_checkpoint(const std::string& dir, const std::string& out) {
  ShardStore store(dir);
  const CheckpointMeta& meta = store.meta();
  const CheckpointState& s = meta.state;
  AtomicFile file(out);
  H5Id f = h5_create_file(file.temp_path());
  h5_write_attr_string(f, "format", kCheckpointFormat);
  h5_write_attr_int(f, "version", kCheckpointVersion);
  h5_write_attr_int(f, "step", s.step);
  h5_write_attr_int(f, "saved_tp", s.saved_tp);
  h5_write_attr_int(f, "saved_dp", s.saved_dp);
  h5_write_attr_int(f, "zero", s.zero);
  h5_write_attr_int(f, "global_batch", s.global_batch);
  h5_write_attr_int(f, "micro_batches", s.micro_batches);
  h5_write_attr_int(f, kChecksumAttr, int64_t(h5_state_checksum(meta)));
  const std::pair<const char*, const std::string*> texts[] = {
      {"config", &meta.config}, {"options", &meta.options}, {"tokenizer", &meta.tokenizer}};
  for (const auto& [name, text] : texts) h5_write_1d(f, name, H5Elem::U8, text->data(), int64_t(text->size()), true);
  {
    H5Id st = h5_create_group(f, "state");
    h5_write_attr_int(st, "seed", int64_t(s.seed));
    h5_write_attr_int(st, "sampler_seed", int64_t(s.sampler.seed));
    h5_write_attr_int(st, "sampler_epoch", s.sampler.epoch);
    h5_write_attr_int(st, "sampler_step", s.sampler.step);
  }
  ConsolidateReport rep;
  for (const IndexTensor& t : store.index().tensors) {
    std::vector<float> v(size_t(dims_numel(t.shape)));
    store.read(t.name, t.shape, whole_region(t.shape), v.data());
    const size_t cut = t.name.rfind('/');
    VLM_REQUIRE(cut != std::string::npos && cut > 0, store.index_path(), ": tensor /", t.name,
                " is not in a group (expected model/<module>/<name> or optim/<m|v>/<module>/<name>)");
    H5Id g = create_groups(f, t.name.substr(0, cut));
    h5_write_array(g, t.name.substr(cut + 1), H5Elem::F32, v.data(), t.shape);
    std::vector<int64_t> dims;
    H5Id ds = h5_open_dataset(f, file.temp_path(), "/" + t.name, H5Elem::F32, int(t.shape.size()), &dims);
    h5_write_attr_int(ds, kChecksumAttr, int64_t(crc32c(v.data(), v.size() * 4)));
    rep.tensors += 1, rep.bytes += int64_t(v.size()) * 4;
  }
  h5_close_file(f);
  file.commit();
  return rep;
}

}  // namespace vlm
