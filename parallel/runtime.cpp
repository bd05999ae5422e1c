// The runtime start, the agreed steps and the error report of the commands (policy in
// runtime.h).
#include "parallel/runtime.h"

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "core/device_options.h"
#include "parallel/deadline_guard.h"
#include "parallel/mpi/mpi_check.h"

namespace vlm {

namespace {

// 1 when MPI is not running (not initialised, or finalised).
int world_size() {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// A private duplicate of the world for the agreements, so that they never match a
// collective of the step itself, should a rank leave a step early. Created by the
// first agreement (under its guard).
MPI_Comm agreement_comm() {
  static const MPI_Comm comm = [] {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    return c;
  }();
  return comm;
}

void check_options(const RuntimeOptions& o) {
  VLM_REQUIRE(o.device == "auto" || o.device == "cpu" || o.device == "cuda",
              "--device: expected auto, cpu or cuda, got '", o.device, "'");
  VLM_REQUIRE(o.parallel.tp >= 1, "parallel.tp must be >= 1, got ", o.parallel.tp);
  VLM_REQUIRE(o.parallel.ranks_per_node >= 0, "parallel.ranks_per_node must be >= 0, got ", o.parallel.ranks_per_node);
  VLM_REQUIRE(o.parallel.timeout_s > 0, "parallel.timeout_s must be > 0, got ", o.parallel.timeout_s);
}

// Every rank must have been given the same layout and device: the ranks would otherwise
// form different groups (and wait for each other in collectives that never match). The
// check gathers every rank's values, so every rank throws the same message.
void check_same_launch(const RuntimeOptions& o) {
  const char* devices[] = {"auto", "cpu", "cuda"};
  int dev = 0;
  while (dev < 2 && o.device != devices[dev]) ++dev;
  const int mine[3] = {o.parallel.tp, o.parallel.ranks_per_node, dev};
  int size = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<int> all(size_t(size) * 3);
  MPI_CHECK(MPI_Allgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, agreement_comm()));
  const std::string names[3] = {parallel_options().name_of(&ParallelOptions::tp),
                                parallel_options().name_of(&ParallelOptions::ranks_per_node), "--device"};
  const auto show = [&](int k, int v) { return k == 2 ? std::string(devices[v]) : std::to_string(v); };
  for (int r = 1; r < size; ++r)
    for (int k = 0; k < 3; ++k) {
      const int a = all[size_t(k)], b = all[size_t(r) * 3 + size_t(k)];
      if (a != b)
        throw UserError(cat("launch options differ between ranks: ", names[k], " is ", show(k, a), " on rank 0 but ",
                            show(k, b), " on rank ", r, " (give every rank the same parallel.* options and --device)"));
    }
}

}  // namespace

void register_runtime_options(Config& cfg, bool with_device) {
  register_parallel_options(cfg);
  if (with_device) register_device_options(cfg);
}

RuntimeOptions read_runtime_options(const Config& cfg) {
  RuntimeOptions o;
  o.parallel = read_parallel_options(cfg);
  if (device_options().registered_in(cfg)) o.device = read_device_options(cfg).device;
  return o;
}

void on_every_rank(const std::string& what, double timeout_s, const std::function<void()>& step) {
  int initialized = 0, rank = 0, size = 1;
  MPI_CHECK(MPI_Initialized(&initialized));
  VLM_ASSERT(initialized, "on_every_rank('", what, "') needs MPI to be initialised (parallel/mpi/mpi_session.h)");
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const DeadlineGuard guard(timeout_s, cat("step '", what, "' did not complete on every rank within ", timeout_s,
                                           " s (parallel.timeout_s; world rank ", rank,
                                           " waited): a rank is missing, dead or stuck; aborting all ranks"));
  bool failed = false;
  std::string msg;
  try {
    step();
  } catch (const AgreedError&) {
    throw;  // every rank threw it at the same point: agreed already
  } catch (const UserError& e) {
    failed = true;
    msg = e.what();
  }
  int failures = failed ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, agreement_comm()));
  if (failures == 0) return;
  if (failures == size) throw AgreedError(msg, rank == 0);
  throw AgreedError(failed ? msg : cat(what, ": failed on ", failures, " of ", size, " ranks (see their messages)"),
                    failed);
}

namespace {

// The options of this rank as "section.key = value" lines (the command first, every
// option's value, then the positional words).
std::vector<std::string> option_lines(const Config& cfg) {
  std::vector<std::string> lines{"command = " + cfg.program()};
  std::istringstream in(cfg.dump_ini());
  std::string section;
  for (std::string l; std::getline(in, l);) {
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l[0] == '[') {
      section = l.substr(1, l.find(']') - 1);
      continue;
    }
    lines.push_back(section.empty() ? l : section + "." + l);
  }
  for (const std::string& w : cfg.positional()) lines.push_back("FILE " + w);
  return lines;
}

// Every rank must have been given the same options as rank 0 (per-node config files,
// an MPMD launch): a rank with another train.steps waits forever in a collective the
// others never call, one with another eval.images reports a mix. Each rank compares
// its own with rank 0's (two broadcasts, which every rank reaches: they all parsed),
// so a rank that differs names its first differing option.
void check_same_options(const Config& cfg) {
  const std::vector<std::string> mine = option_lines(cfg);
  std::string text;
  for (const std::string& l : mine) text += l + "\n";
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(agreement_comm(), &rank));
  uint64_t n = text.size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, agreement_comm()));
  VLM_ASSERT(n < (uint64_t(1) << 30), "options text of ", n, " bytes");
  std::string root = rank == 0 ? text : std::string(size_t(n), '\0');
  MPI_CHECK(MPI_Bcast(root.data(), int(n), MPI_CHAR, 0, agreement_comm()));
  if (root == text) return;
  std::vector<std::string> theirs;
  std::istringstream in(root);
  for (std::string l; std::getline(in, l);) theirs.push_back(l);
  size_t i = 0;
  while (i < mine.size() && i < theirs.size() && mine[i] == theirs[i]) ++i;
  throw UserError(cat("options differ between ranks: '", i < mine.size() ? mine[i] : "(nothing)", "' on rank ", rank,
                      " but '", i < theirs.size() ? theirs[i] : "(nothing)",
                      "' on rank 0 (give every rank the same options and config files)"));
}

}  // namespace

void parse_on_every_rank(const Config& cfg, const std::function<void()>& parse) {
  std::exception_ptr err;
  try {
    parse();
  } catch (const UserError&) {
    err = std::current_exception();
  }
  double timeout_s = ParallelOptions{}.timeout_s;
  if (!err && parallel_options().registered_in(cfg)) timeout_s = read_parallel_options(cfg).timeout_s;
  on_every_rank("options", timeout_s, [&] {
    if (err) std::rethrow_exception(err);
  });
  // Not agreed on: a rank whose options differ reports them and aborts every rank, as
  // a rank-local error does (report_command_error), while rank 0 goes on.
  check_same_options(cfg);
}

int report_command_error(const std::string& who, const std::exception& e) {
  const auto* agreed = dynamic_cast<const AgreedError*>(&e);
  std::fflush(stdout);
  if (!agreed || agreed->report()) std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what());
  std::fflush(stderr);
  if (!agreed && world_size() > 1) MPI_Abort(MPI_COMM_WORLD, 2);
  return 2;
}

Runtime::Runtime(const RuntimeOptions& o) : mpi_(nullptr, nullptr), opts_(o), uncaught_(std::uncaught_exceptions()) {
  const double t = o.parallel.timeout_s > 0 ? o.parallel.timeout_s : ParallelOptions{}.timeout_s;
  vlm::on_every_rank("options", t, [&] { check_options(o); });
  vlm::on_every_rank("options", t, [&] { check_same_launch(o); });
  vlm::on_every_rank("topology", t, [&] { topo_ = detect_topology(o.parallel); });
  vlm::on_every_rank("device binding", t, [&] {
    if (o.device != "cpu") local_device_ = bind_local_device();
  });
  vlm::on_every_rank("backend", t, [&] { backend_ = &select_backend(o.device, topo_.world_rank() == 0); });
  vlm::on_every_rank("process groups", t,
                     [&] { groups_ = std::make_unique<ProcessGroups>(topo_, backend_->device(), t); });
}

Runtime::~Runtime() {
  // Unwinding on several ranks: a peer may still wait in a collective of these
  // communicators; leave them to the process's end (see the header).
  if (groups_ && std::uncaught_exceptions() > uncaught_ && topo_.world_size() > 1) (void)groups_.release();
}

void Runtime::on_every_rank(const std::string& what, const std::function<void()>& step) const {
  vlm::on_every_rank(what, opts_.parallel.timeout_s, step);
}

Runtime start_runtime(const RuntimeOptions& o) { return Runtime(o); }

Runtime start_runtime(const Config& cfg) { return start_runtime(read_runtime_options(cfg)); }

}  // namespace vlm
