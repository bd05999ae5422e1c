// f32 staging of bf16 operands on CUDA; see stage.h.
#include "core/cuda/stage.h"

#include "core/cuda/cuda_backend.h"
#include "core/ops.h"

namespace vlm::cuda {

bool any_bf16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && t->dtype() == DType::BF16) return true;
  return false;
}

void run_staged(Stream& s, std::initializer_list<Staged> operands,
                const std::function<void(const std::vector<Tensor>&)>& op) {
  constexpr size_t kAlign = 256;
  // Offsets in the stage buffer: one copy per distinct bf16 memory (same data, same size).
  std::vector<const Tensor*> ops;
  std::vector<int> copy_of;  // index into `distinct`, -1 = passes through
  std::vector<const Tensor*> distinct;
  std::vector<size_t> offset;
  std::vector<bool> written;
  size_t bytes = 0;
  for (const Staged& o : operands) {
    ops.push_back(o.t);
    if (!o.t->defined() || o.t->dtype() != DType::BF16) {
      copy_of.push_back(-1);
      continue;
    }
    int found = -1;
    for (size_t d = 0; d < distinct.size(); ++d)
      if (distinct[d]->data() == o.t->data() && distinct[d]->numel() == o.t->numel()) found = int(d);
    if (found < 0) {
      found = int(distinct.size());
      distinct.push_back(o.t);
      offset.push_back(bytes);
      written.push_back(false);
      bytes += (size_t(o.t->numel()) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
    }
    if (o.written) written[size_t(found)] = true;
    copy_of.push_back(found);
  }
  char* base = bytes ? static_cast<char*>(cuda_stream(s).stage_scratch(bytes)) : nullptr;
  std::vector<Tensor> f32(distinct.size());
  for (size_t d = 0; d < distinct.size(); ++d) {
    f32[d] = Tensor(base + offset[d], distinct[d]->shape(), DType::F32, DeviceKind::CUDA);
    cuda::convert(s, f32[d], *distinct[d]);  // outputs too: an op may read what it accumulates into
  }
  std::vector<Tensor> views;
  for (size_t i = 0; i < ops.size(); ++i)
    views.push_back(copy_of[i] < 0 ? *ops[i] : f32[size_t(copy_of[i])].view(ops[i]->shape()));
  op(views);
  for (size_t d = 0; d < distinct.size(); ++d)
    if (written[d]) cuda::convert(s, *distinct[d], f32[d]);
}

}  // namespace vlm::cuda
