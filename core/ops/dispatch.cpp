// The public ops (core/ops.h), generated from the op table (core/ops/ops_all.inc): each
// checks its contract (core/ops/contract.h), then runs the CPU or the CUDA
// implementation by the device of its stream. The only place where an op learns
// whether CUDA was compiled in. Without CUDA a CUDA stream still gets the contract
// checked first, so a broken contract reads the same in every build.
#include "core/ops/contract.h"

namespace vlm {

#ifdef VLM_HAS_CUDA
#define VLM_ROUTE(name, device, args)                                                 \
  if (device == DeviceKind::CUDA) return cuda::name args;                             \
  return cpu::name args
#else
#define VLM_ROUTE(name, device, args)                                                 \
  VLM_ASSERT(device == DeviceKind::CPU, #name ": CUDA stream without CUDA backend"); \
  return cpu::name args
#endif

#define VLM_OP(name, params, args)                                                    \
  void name params {                                                                  \
    const DeviceKind device = s.device();                                             \
    contract::name(contract::Op{#name, device}, VLM_CONTRACT_TAIL args);              \
    VLM_ROUTE(name, device, args);                                                    \
  }
#include "core/ops/ops_all.inc"
#undef VLM_OP

const std::vector<std::string_view>& op_names() {
#define VLM_OP(name, params, args) #name,
  static const std::vector<std::string_view> names{
#include "core/ops/ops_all.inc"
  };
#undef VLM_OP
  return names;
}

}  // namespace vlm
