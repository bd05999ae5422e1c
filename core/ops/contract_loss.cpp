// Contracts of core/ops/loss.inc (see contract.h). Targets outside [0, V) (other than
// ignore_index) are the caller's invariant; the CPU ops check them as they read them.
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// logits[N,V] in a dtype the kernels take and targets[N] i32; returns N.
int64_t logits_rules(const Op& op, const Tensor& logits, const Tensor& targets) {
  op.dtype(logits, "logits");
  op.elems(targets, DType::I32, logits.rows(), "targets");
  return logits.rows();
}

}  // namespace

void cross_entropy_forward(const Op& op, const Tensor& losses, const Tensor& logits, const Tensor& targets, int) {
  const int64_t N = logits_rules(op, logits, targets);
  op.stat(losses, N, "losses");
}

void cross_entropy_backward(const Op& op, const Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                            const Tensor& dlosses, int) {
  const int64_t N = logits_rules(op, logits, targets);
  op.same(dlogits, logits, "dlogits");
  op.stat(dlosses, N, "dlosses");
}

void vocab_ce_rowmax(const Op& op, const Tensor& rowmax, const Tensor& logits) {
  op.dtype(logits, "logits");
  op.stat(rowmax, logits.rows(), "rowmax");
}

void vocab_ce_sumexp(const Op& op, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                     const Tensor& rowmax, const Tensor& targets, int64_t) {
  const int64_t N = logits_rules(op, logits, targets);
  op.stat(sumexp, N, "sumexp");
  op.stat(target_logit, N, "target_logit");
  op.stat(rowmax, N, "rowmax");
}

void vocab_ce_loss(const Op& op, const Tensor& losses, const Tensor& rowmax, const Tensor& sumexp,
                   const Tensor& target_logit, const Tensor& targets, int) {
  const int64_t N = targets.numel();
  op.elems(targets, DType::I32, N, "targets");
  op.stat(losses, N, "losses");
  op.stat(rowmax, N, "rowmax");
  op.stat(sumexp, N, "sumexp");
  op.stat(target_logit, N, "target_logit");
}

void vocab_ce_backward(const Op& op, const Tensor& dlogits, const Tensor& logits, const Tensor& rowmax,
                       const Tensor& sumexp, const Tensor& targets, const Tensor& dlosses, int64_t, int) {
  const int64_t N = logits_rules(op, logits, targets);
  op.same(dlogits, logits, "dlogits");
  op.stat(rowmax, N, "rowmax");
  op.stat(sumexp, N, "sumexp");
  op.stat(dlosses, N, "dlosses");
}

}  // namespace vlm::contract
