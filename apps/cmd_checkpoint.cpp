// `vlm checkpoint`: tools for the checkpoints of `vlm train` (checkpoint/checkpoint.h;
// docs/checkpoints.md), one process, no MPI:
//   vlm checkpoint consolidate --checkpoint runs/x/checkpoints[/step_N] --out step_N.h5
//     writes a sharded checkpoint as the single HDF5 file (checkpoint/checkpoint_h5.h),
//     for h5py and for tools that want one file; every reader reads either form.
//   vlm checkpoint verify --checkpoint runs/x/checkpoints[/step_N]
//     reads every tensor of a checkpoint whole, checking every shard, piece, checksum
//     and value; prints what it holds.
#include <cstdio>
#include <filesystem>
#include <string>

#include "apps/command.h"
#include "base/config.h"
#include "base/error.h"
#include "base/options.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_h5.h"
#include "checkpoint/shard_store.h"
#include "io/atomic_file.h"
#include "train/memory_terms.h"

namespace vlm {

namespace {

struct CheckpointInputs {
  std::string checkpoint, out;
};

// consolidate: --checkpoint and --out; verify: --checkpoint.
const OptionSet<CheckpointInputs>& checkpoint_inputs(bool out) {
  const auto declare = [](OptionSet<CheckpointInputs>& s, bool with_out) {
    s.option("checkpoint", &CheckpointInputs::checkpoint,
             "a sharded checkpoint (step_N/) or a checkpoint folder (its `latest`)");
    if (with_out) s.option("out", &CheckpointInputs::out, "the single HDF5 file to write (step_N.h5)");
  };
  static const OptionSet<CheckpointInputs> with([&](OptionSet<CheckpointInputs>& s) { declare(s, true); });
  static const OptionSet<CheckpointInputs> without([&](OptionSet<CheckpointInputs>& s) { declare(s, false); });
  return out ? with : without;
}

void consolidate_options(Config& cfg) { checkpoint_inputs(true).add_to(cfg); }
void verify_options(Config& cfg) { checkpoint_inputs(false).add_to(cfg); }

std::string input(const CheckpointInputs& in) {
  VLM_REQUIRE(!in.checkpoint.empty(), "--checkpoint: a checkpoint folder is required");
  return resolve_checkpoint(in.checkpoint);
}

int consolidate(const Config& cfg) {
  const CheckpointInputs in = checkpoint_inputs(true).read(cfg);
  VLM_REQUIRE(!in.out.empty(), "--out: the HDF5 file to write is required");
  check_output_path(in.out, cfg, {{"--checkpoint", in.checkpoint}});
  const std::string path = input(in);
  VLM_REQUIRE(std::filesystem::is_directory(path), path, ": already a single-file checkpoint");
  const ConsolidateReport r = consolidate_checkpoint(path, in.out);
  std::printf("vlm checkpoint consolidate: %s -> %s (%lld tensors, %s)\n", path.c_str(), in.out.c_str(),
              (long long)r.tensors, format_bytes(double(r.bytes)).c_str());
  return 0;
}

int verify(const Config& cfg) {
  const std::string path = input(checkpoint_inputs(false).read(cfg));
  VLM_REQUIRE(std::filesystem::is_directory(path), path,
              ": a single-file checkpoint (python3 tools/check_checkpoint.py checks one with h5py)");
  ShardStore st(path);
  st.check_shards();
  for (const IndexTensor& t : st.index().tensors) {
    std::vector<float> v(size_t(dims_numel(t.shape)));
    st.read(t.name, t.shape, whole_region(t.shape), v.data());
  }
  const CheckpointState& s = st.meta().state;
  std::printf("vlm checkpoint verify: %s: step %lld (saved at tp=%d dp=%d zero=%d), %zu tensors in %zu shards, %s of "
              "tensor data: every shard, piece, checksum and value checked\n",
              path.c_str(), (long long)s.step, s.saved_tp, s.saved_dp, s.zero, st.index().tensors.size(),
              st.index().shards.size(), format_bytes(double(st.bytes_read())).c_str());
  return 0;
}

}  // namespace

VLM_COMMAND(checkpoint, {.path = "checkpoint",
                         .summary = "checkpoint tools: `checkpoint consolidate` (one HDF5 file), `checkpoint verify`"});
VLM_COMMAND(checkpoint_consolidate,
            {.path = "checkpoint consolidate",
             .summary = "write a sharded checkpoint as one HDF5 file (for h5py and tools that want one file)",
             .usage = "--checkpoint CKPT --out FILE.h5\n"
                      "CKPT is a step_N/ folder of vlm train or a checkpoint folder (its `latest`). Every vlm command "
                      "reads either form. See docs/checkpoints.md.",
             .options = consolidate_options,
             .run = consolidate});
VLM_COMMAND(checkpoint_verify,
            {.path = "checkpoint verify",
             .summary = "read every tensor of a sharded checkpoint, checking every shard, piece and checksum",
             .usage = "--checkpoint CKPT\nCKPT is a step_N/ folder of vlm train or a checkpoint folder (its `latest`). "
                      "See docs/checkpoints.md.",
             .options = verify_options,
             .run = verify});

}  // namespace vlm
