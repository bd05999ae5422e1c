// `vlm plan` against measured runs of `vlm train` (docs/planning.md), on a
// real Fashion-MNIST subset with configs/tiny.cfg, 2 steps under real mpirun:
//  - memory: plan's total per TP rank is within 1% of every rank's measured peak of the
//    bytes allocated through the training backend (core/counting_backend.h), and never
//    above it (the planned arenas are part of what is measured), at (tp, dp) = (1,1),
//    (2,1), (2,2), (4,2), and with ZeRO-1, sequence parallelism, full recomputation,
//    the batch-split, dedicated and tp2 placements and frozen modules; and ZeRO 2 and 3 at
//    (1,2), (2,2), (1,4), (2,4) with two micro-batches, bf16, a frozen module, every
//    placement, SP and recomputation;
//  - bytes: plan's bytes per step per group equal the Communicator's counters of the
//    last step exactly, kind by kind. The runs fix the step's shape to the largest one
//    plan assumes (lod.budget = lod.max_tokens, train.max_text short enough that every
//    prompt and caption is cut to it);
//  - checkpoint: plan's bytes of tensor data per rank at the run's ZeRO level equal the
//    data area of that rank's shard in the checkpoint the run saved at its end, and at
//    dp <= 2 every level's rows add up to the run's total.
// The refusals and the backbone alone: test_plan_args.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/shard_format.h"
#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;
using Result = test::CommandResult;
using Bytes = std::map<std::string, uint64_t>;  // collective kind -> bytes

std::string cfg() { return std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg"; }

// The trainer's line "memory per rank (...): rank 0 N B, rank 1 N B, ..." -> N per world rank.
std::vector<uint64_t> measured_peaks(const std::string& out) {
  std::vector<uint64_t> v;
  const size_t at = out.find("measured peak in training");
  if (at == std::string::npos) return v;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  const std::regex re("rank (\\d+) (\\d+) B");
  for (std::sregex_iterator it(line.begin(), line.end(), re), end; it != end; ++it) v.push_back(std::stoull((*it)[2]));
  return v;
}

// The trainer's "communication of the last step (rank 0): tp N B (all_reduce X B / k calls, ...) | dp ...".
Bytes measured_bytes(const std::string& out, const std::string& group) {
  Bytes b;
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("[:|] " + group + " (\\d+) B \\(([^)]*)\\)"))) return b;
  const std::string kinds = m[2];
  const std::regex re("(\\w+) (\\d+) B");
  for (std::sregex_iterator it(kinds.begin(), kinds.end(), re), end; it != end; ++it)
    if (std::stoull((*it)[2]) > 0) b[(*it)[1]] = std::stoull((*it)[2]);
  b["total"] = std::stoull(m[1]);
  return b;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> c;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, '|');) {
    const size_t a = x.find_first_not_of(' '), e = x.find_last_not_of(' ');
    c.push_back(a == std::string::npos ? "" : x.substr(a, e - a + 1));
  }
  return c;
}

struct PlanOut {
  std::vector<uint64_t> memory;  // per TP rank
  std::map<std::string, Bytes> bytes;
  // per ZeRO level, per TP rank: DP rank 0's bytes, then the others' min and max
  std::map<int, std::vector<std::vector<uint64_t>>> ckpt;
};

PlanOut parse_plan(const std::string& out) {
  PlanOut p;
  std::stringstream ss(out);
  bool mem = false, comm = false, ckpt = false;
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("memory per rank", 0) == 0) mem = true, comm = false;
    if (line.rfind("communication per step", 0) == 0) comm = true, mem = false;
    if (line.rfind("checkpoint (", 0) == 0) ckpt = true;
    if (line.empty()) mem = comm = ckpt = false;
    const std::vector<std::string> c = cells(line);
    if (ckpt && c.size() >= 3 && !c[0].empty() && std::isdigit(static_cast<unsigned char>(c[0][0]))) {
      std::vector<std::vector<uint64_t>>& level = p.ckpt[std::stoi(c[0])];
      EXPECT_EQ(std::stoul(c[1]), level.size()) << line;
      level.emplace_back();
      for (size_t k = 2; k < c.size(); ++k) level.back().push_back(std::stoull(c[k]));
    }
    if (mem && c.size() >= 8 && !c[0].empty() && std::isdigit(static_cast<unsigned char>(c[0][0])))
      p.memory.push_back(std::stoull(c.back()));  // the exact total, the last column
    if (comm && c.size() == 9 && (c[0] == "tp" || c[0] == "dp")) {
      Bytes b;
      const char* kinds[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
      for (int k = 0; k < 4; ++k)
        if (std::stoull(c[size_t(3 + k)]) > 0) b[kinds[k]] = std::stoull(c[size_t(3 + k)]);
      b["total"] = std::stoull(c[7]);
      p.bytes[c[0]] = b;
    }
  }
  return p;
}

std::string str(const Bytes& b) {
  std::string s;
  for (const auto& [k, v] : b) s += k + "=" + std::to_string(v) + " ";
  return s;
}

class PlanCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("plan_cli");
    const test::FashionSubset f = test::fashion_subset(vlm(), dir_);
    data_ = f.data, tok_ = f.tokenizer;
  }
  // The options both commands get: the tiny model at its largest step shape.
  static std::string common(const std::string& extra) {
    return " --config " + cfg() + " --data.path " + data_ + " --data.tokenizer " + tok_ +
           " --lod.budget 10 --train.max_text 4 --train.steps 2 " + extra;
  }
  static inline std::string dir_, data_, tok_;
};

TEST_F(PlanCli, MemoryAndBytesMatchMeasuredRuns) {
  struct Case {
    int tp, dp;
    std::string extra;
  };
  const std::vector<Case> cases = {
      {1, 1, "--train.batch 8"},
      {2, 1, "--train.batch 8"},
      {2, 2, "--train.batch 4"},
      {4, 2, "--train.batch 4"},
      {2, 2, "--train.batch 4 --train.zero 1 --scorers.placement dedicated"},
      {2, 1, "--train.batch 8 --model.sequence_parallel --model.recompute full --scorers.placement batch-split"},
      {2, 2, "--train.batch 4 --train.freeze vision,llm --train.zero 1 --scorers.placement batch-split"},
      {2, 1, "--train.batch 8 --scorers.placement tp2"},
      {2, 1, "--train.batch 8 --train.freeze vision,scorers --scorers.placement tp2"},
      {2, 2, "--train.batch 4 --train.precision bf16 --train.grad_reduce_dtype bf16"},
      {2, 2, "--train.batch 4 --train.precision bf16 --train.grad_reduce_dtype bf16 --train.zero 1 "
             "--model.sequence_parallel"},
      // ZeRO 2 and 3 (docs/training.md): micro-batches, bf16, a frozen module, every placement.
      {1, 2, "--train.batch 2 --train.micro_batches 2 --train.zero 2"},
      {1, 2, "--train.batch 2 --train.micro_batches 2 --train.zero 3 --train.precision bf16 --train.freeze vision"},
      {2, 2, "--train.batch 2 --train.micro_batches 2 --train.zero 2 --train.precision bf16 "
             "--scorers.placement batch-split --train.freeze projector"},
      {2, 2, "--train.batch 2 --train.micro_batches 2 --train.zero 3 --scorers.placement dedicated "
             "--model.sequence_parallel --model.recompute full"},
      {1, 4, "--train.batch 1 --train.micro_batches 2 --train.zero 3 --train.freeze llm"},
      {1, 4, "--train.batch 1 --train.micro_batches 2 --train.zero 2 --train.grad_reduce_dtype bf16"},
      {2, 4, "--train.batch 1 --train.micro_batches 2 --train.zero 3 --train.precision bf16 --scorers.placement tp2 "
             "--model.recompute selective"},
      {2, 4, "--train.batch 1 --train.micro_batches 2 --train.zero 2 --scorers.placement dedicated "
             "--train.freeze scorers"},
  };
  for (const Case& c : cases) {
    const int world = c.tp * c.dp;
    const std::string what = "tp=" + std::to_string(c.tp) + " dp=" + std::to_string(c.dp) + " " + c.extra;
    const std::string opts = common("--tp " + std::to_string(c.tp) + " " + c.extra);
    std::string run = "r";
    run += std::to_string(&c - cases.data());
    const Result t = test::run_command((world > 1 ? mpirun(world) : std::string()) + vlm() + " train" + opts +
                                           " --train.out_dir " + dir_ + "/runs --train.run " + run,
                                       dir_);
    ASSERT_EQ(t.status, 0) << what << "\n" << t.out << t.err;
    const Result p = test::run_command(vlm() + " plan" + opts + " --nodes 1 --gpus-per-node " + std::to_string(world), dir_);
    ASSERT_EQ(p.status, 0) << what << "\n" << p.out << p.err;
    PlanOut plan = parse_plan(p.out);
    const std::vector<uint64_t> peaks = measured_peaks(t.out);
    ASSERT_EQ(plan.memory.size(), size_t(c.tp)) << what << "\n" << p.out;
    ASSERT_EQ(peaks.size(), size_t(world)) << what << "\n" << t.out;
    for (int r = 0; r < world; ++r) {
      const double planned = double(plan.memory[size_t(r % c.tp)]), got = double(peaks[size_t(r)]);  // tp-first ranks
      EXPECT_LE(planned, got) << what << " rank " << r;
      EXPECT_LE((got - planned) / got, 0.01) << what << " rank " << r << ": planned " << planned << ", measured " << got;
    }
    for (const char* g : {"tp", "dp"}) {
      const Bytes want = measured_bytes(t.out, g);
      ASSERT_FALSE(want.empty()) << what << "\n" << t.out;
      EXPECT_EQ(str(plan.bytes[g]), str(want)) << what << " group " << g;
    }
    // Each rank's shard of the checkpoint saved at the end (world rank = tp rank + tp x dp rank).
    const std::string folder = dir_ + "/runs/" + run + "/checkpoints/step_2";
    const CheckpointIndex idx = parse_index(test::read_file(folder + "/index.json"), folder);
    std::vector<uint64_t> shard(size_t(world), 0);
    for (const IndexTensor& x : idx.tensors)
      for (const IndexPiece& q : x.pieces) shard[size_t(idx.shards[size_t(q.shard)].rank)] += uint64_t(q.bytes());
    // The rows of the run's ZeRO level; at dp <= 2 (the rows hold every rank) every
    // level's rows add up to what the run stored (each element written once).
    const size_t zat = c.extra.find("--train.zero ");
    const int zero = c.dp > 1 && zat != std::string::npos ? c.extra[zat + 13] - '0' : 0;
    ASSERT_EQ(plan.ckpt.size(), c.dp > 1 ? 4u : 1u) << what << "\n" << p.out;
    const std::vector<std::vector<uint64_t>>& at = plan.ckpt[zero];
    ASSERT_EQ(at.size(), size_t(c.tp)) << what << "\n" << p.out;
    const uint64_t stored = std::accumulate(shard.begin(), shard.end(), uint64_t(0));
    for (const auto& [z, level] : plan.ckpt) {
      uint64_t sum = 0;
      for (const std::vector<uint64_t>& b : level) sum += b[0] + (c.dp > 1 ? b[1] : 0);
      if (c.dp <= 2) {
        EXPECT_EQ(sum, stored) << what << " zero " << z;
      }
    }
    for (int r = 0; r < c.tp; ++r) {
      std::vector<uint64_t> want{shard[size_t(r)]};
      if (c.dp > 1) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int d = 1; d < c.dp; ++d) {
          const uint64_t b = shard[size_t(r + c.tp * d)];
          lo = std::min(lo, b), hi = std::max(hi, b);
        }
        want.push_back(lo), want.push_back(hi);
      }
      EXPECT_EQ(at[size_t(r)], want) << what << " tp rank " << r;
    }
    std::printf("[%s] planned per TP rank:", what.c_str());
    for (uint64_t m : plan.memory) std::printf(" %llu", (unsigned long long)m);
    std::printf(" B; measured rank 0: %llu B; tp %s; dp %s\n", (unsigned long long)peaks[0], str(plan.bytes["tp"]).c_str(),
                str(plan.bytes["dp"]).c_str());
  }
}

}  // namespace
}  // namespace vlm
