// The checks shared by every op's contract (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {

std::string DTypes::str() const {
  std::string s;
  for (DType t : {DType::F32, DType::BF16, DType::F64, DType::I32, DType::U8})
    if (has(t)) s += cat(s.empty() ? "" : "/", dtype_name(t));
  return s.empty() ? "none" : s;
}

void Op::on_device(const Tensor& t, const char* what) const {
  VLM_ASSERT(t.defined(), name, ": ", what, " is undefined");
  VLM_ASSERT(t.device() == device, name, ": ", what, " is ", t.str(), ", expected a ", device_name(device),
             " tensor");
}

void Op::on_host(const Tensor& t, const char* what) const {
  VLM_ASSERT(t.defined(), name, ": ", what, " is undefined");
  VLM_ASSERT(t.is_cpu(), name, ": ", what, " is ", t.str(), ", expected a host (cpu) tensor");
}

void Op::dtype(const Tensor& t, const char* what, const Kernels& k) const {
  on_device(t, what);
  VLM_ASSERT(k.on(device).has(t.dtype()), name, ": ", what, ": unsupported dtype ", dtype_name(t.dtype()), " on ",
             device_name(device), " (", k.on(device).str(), ")");
}

void Op::same(const Tensor& t, const Tensor& ref, const char* what) const {
  on_device(t, what);
  VLM_ASSERT(t.dtype() == ref.dtype() && t.shape() == ref.shape(), name, ": ", what, " is ", t.str(), ", expected ",
             ref.str());
}

void Op::elems(const Tensor& t, DType dt, int64_t n, const char* what) const {
  on_device(t, what);
  VLM_ASSERT(t.dtype() == dt, name, ": ", what, " is ", t.str(), ", expected dtype ", dtype_name(dt));
  VLM_ASSERT(t.numel() == n, name, ": ", what, " is ", t.str(), ", expected ", n, " elements");
}

void Op::stat(const Tensor& t, int64_t n, const char* what) const {
  dtype(t, what);
  VLM_ASSERT(t.numel() == n, name, ": ", what, " is ", t.str(), ", expected ", n, " elements");
}

void Op::disjoint(const Tensor& t, const char* t_what, const Tensor& u, const char* u_what) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(t.data()), b = reinterpret_cast<uintptr_t>(u.data());
  VLM_ASSERT(t.nbytes() == 0 || u.nbytes() == 0 || a + t.nbytes() <= b || b + u.nbytes() <= a, name, ": ", t_what,
             " ", t.str(), " and ", u_what, " ", u.str(), " overlap");
}

}  // namespace vlm::contract
