// make_nccl_communicator and bind_local_device for builds without the CUDA backend
// (compiled only when VLM_HAS_CUDA is off, see parallel/CMakeLists.txt): device tensors
// cannot exist there, so asking for NCCL is a launch mistake, reported as a UserError;
// there is no device to bind.
#include <mpi.h>

#include "base/error.h"
#include "parallel/groups.h"

namespace vlm {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, const std::string& name, double) {
  throw UserError(cat("group ", name,
                      ": a CUDA (NCCL) communicator was requested but this build has no CUDA backend; "
                      "run with the CPU backend or rebuild with -DVLM_CUDA=ON"));
}

int bind_local_device() { return -1; }

}  // namespace vlm
