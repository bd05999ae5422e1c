// Contracts of core/ops/embedding.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {

void embedding_forward(const Op& op, const Tensor& out, const Tensor& ids, const Tensor& table, int64_t) {
  op.dtype(table, "table");
  VLM_ASSERT(table.ndim() == 2, op.name, ": table must be [V,C], got ", table.str());
  const int64_t T = ids.numel(), C = table.size(1);
  op.elems(ids, DType::I32, T, "ids");
  op.elems(out, table.dtype(), T * C, "out");
  VLM_ASSERT(out.cols() == C, op.name, ": out ", out.str(), " vs table ", table.str());
}

void embedding_backward(const Op& op, const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t) {
  op.dtype(dtable, "dtable");
  VLM_ASSERT(dtable.ndim() == 2, op.name, ": dtable must be [V,C], got ", dtable.str());
  const int64_t T = ids.numel();
  op.elems(ids, DType::I32, T, "ids");
  op.elems(dout, dtable.dtype(), T * dtable.size(1), "dout");
}

}  // namespace vlm::contract
