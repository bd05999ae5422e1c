// MpiSession: RAII initialisation of MPI for a program (the `vlm` command, the
// multi-rank tests). Initialises MPI with MPI_THREAD_MULTIPLE (the scheduler's `comm`
// stream posts the DP collectives from its own thread while the main thread or the `llm`
// stream posts the TP group's; each communicator is used by one thread at a time, see
// train/step.h) unless MPI is already initialised, and finalises it on destruction only if
// it initialised it. Works under mpirun (also as root with OMPI_ALLOW_RUN_AS_ROOT*),
// srun (PMIx/PMI2), and as a singleton (one rank, no launcher).
#pragma once

namespace vlm {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owner_ = false;
  int rank_ = 0;
  int size_ = 1;
};

// Whether MPI was initialised with MPI_THREAD_MULTIPLE (several threads may call it).
bool mpi_thread_multiple();
// Aborts every rank of MPI_COMM_WORLD with `code` after printing `message` (one line,
// prefixed by "vlm: ") to stderr. Used by the collective timeouts; never returns.
[[noreturn]] void abort_all_ranks(const char* message, int code = 3);

}  // namespace vlm
