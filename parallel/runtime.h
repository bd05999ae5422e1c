// The runtime start of every command that computes (and of the multi-rank tests):
//
//   Runtime rt = start_runtime(cfg);   // MPI, then the five phases below, in order
//     1. options         read and check the parallel.* and device options; every rank
//                        must have the same launch options (tp, ranks_per_node, device)
//     2. topology        detect_topology (parallel/topology.h)
//     3. device binding  GPU = node-local rank % visible GPUs (bind_local_device), unless
//                        --device cpu
//     4. backend         select_backend(--device); rank 0 logs the choice in one line
//     5. process groups  world, TP and DP communicators on the backend's device
//
// Error policy across ranks (docs/errors.md); every phase is a step of on_every_rank:
//  - A step runs on every rank, then the ranks agree on its outcome (one all-reduce of
//    the number of ranks whose step threw a UserError). When no rank failed, all go on.
//    When every rank failed (the same bad option given to all), rank 0 prints its
//    message; when only some failed (a file only they cannot read), each of those
//    prints its own. Either way every rank then throws AgreedError and the command exits
//    with code 2 on every rank: no rank waits for another, nobody hangs.
//  - A step, and its agreement, is guarded by parallel.timeout_s (DeadlineGuard): a rank
//    that dies or stalls before the agreement makes the others abort with a message
//    naming the step. (A rank whose command line did not parse uses the default.) So a
//    step must throw before its own collectives or alike on every rank (as
//    detect_topology does); else the ranks left in the step's collective end by this
//    timeout.
//  - A UserError outside a step (a rank-local failure in the middle of the work) is
//    printed by the rank that saw it, which then calls MPI_Abort(MPI_COMM_WORLD, 2), so
//    every rank ends at once with a non-zero status (report_command_error). Commands
//    therefore check their inputs in a step (Runtime::on_every_rank) before working.
//  - Only UserError is agreed on; internal errors abort as always (base/error.h).
//
// Invariants of a Runtime: MPI is initialised (by the Runtime itself when nobody did,
// then finalised with it); topology, backend and groups are set and consistent (the
// groups live on backend().device()); the device, when bound, was bound before the
// backend was first used. While an exception unwinds a Runtime of several ranks, its
// communicators are left to the process's end instead of being torn down (a peer may
// still wait in a collective, and the rank is about to exit or abort).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "core/backend.h"
#include "parallel/groups.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/options.h"
#include "parallel/topology.h"

namespace vlm {

class Config;

struct RuntimeOptions {
  ParallelOptions parallel;
  std::string device = "cpu";  // "auto" | "cpu" | "cuda"
};

// Registers what start_runtime(cfg) reads: parallel.* (parallel/options.h) and, when
// with_device, device and seed (core/device_options.h). Without them the run is on CPU.
void register_runtime_options(Config& cfg, bool with_device = true);
RuntimeOptions read_runtime_options(const Config& cfg);

// A UserError every rank throws at the same step after the agreement above. report()
// is true on the rank(s) that print (what() is then the failure's own message).
class AgreedError : public UserError {
 public:
  AgreedError(const std::string& msg, bool report) : UserError(msg), report_(report) {}
  bool report() const { return report_; }

 private:
  bool report_;
};

// Runs `step` on every rank of MPI_COMM_WORLD (MPI initialised) and agrees on its
// outcome under a deadline of timeout_s (policy above); `what` names the step in the
// timeout message. An AgreedError thrown by `step` was agreed already: rethrown as is.
void on_every_rank(const std::string& what, double timeout_s, const std::function<void()>& step);
// The options step of a multi-rank command: `parse` parses the command line into cfg
// on this rank; its outcome is agreed under the parsed parallel.timeout_s (the default
// where parsing failed or cfg has none). Then every rank's options (every value and the
// positional words) must equal rank 0's: a rank whose differ throws a UserError naming
// the first one, outside an agreement, so it reports it and aborts every rank.
void parse_on_every_rank(const Config& cfg, const std::function<void()>& parse);

// Prints "<who>: error: <what>" (unless an AgreedError that another rank reports),
// flushes, and for a rank-local error in a world of several ranks calls
// MPI_Abort(MPI_COMM_WORLD, 2). Returns the exit code, 2.
int report_command_error(const std::string& who, const std::exception& e);

class Runtime {
 public:
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeOptions& options() const { return opts_; }
  const Topology& topology() const { return topo_; }
  bool root() const { return topo_.world_rank() == 0; }
  int local_device() const { return local_device_; }  // the bound GPU, -1 when none
  Backend& backend() const { return *backend_; }
  ProcessGroups& groups() { return *groups_; }

  // One more agreed step (a command's input checks), under parallel.timeout_s.
  void on_every_rank(const std::string& what, const std::function<void()>& step) const;

 private:
  friend Runtime start_runtime(const RuntimeOptions& o);
  explicit Runtime(const RuntimeOptions& o);

  MpiSession mpi_;  // first: initialised first, finalised last
  RuntimeOptions opts_;
  Topology topo_;
  int local_device_ = -1;
  Backend* backend_ = nullptr;
  std::unique_ptr<ProcessGroups> groups_;
  int uncaught_ = 0;  // std::uncaught_exceptions() at construction
};

// The five phases above; throws AgreedError (on every rank) when one fails.
Runtime start_runtime(const RuntimeOptions& o);
Runtime start_runtime(const Config& cfg);

}  // namespace vlm
