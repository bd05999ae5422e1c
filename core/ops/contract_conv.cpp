// Contracts of core/ops/conv.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// in[B,Cin,H,W] in a dtype the kernels take, w[Cout,Cin,KH,KW] of in's dtype, stride >= 1,
// pad >= 0, the kernel within the padded input; returns out's shape [B,Cout,Ho,Wo].
Shape conv_rules(const Op& op, const Tensor& in, const Tensor& w, int stride, int pad) {
  op.dtype(in, "in");
  op.on_device(w, "w");
  VLM_ASSERT(in.ndim() == 4 && w.ndim() == 4 && in.size(1) == w.size(1) && w.dtype() == in.dtype(), op.name,
             ": in ", in.str(), " w ", w.str(), " (expected in[B,Cin,H,W], w[Cout,Cin,KH,KW])");
  VLM_ASSERT(stride >= 1 && pad >= 0, op.name, ": stride ", stride, " pad ", pad);
  const int64_t H = in.size(2), W = in.size(3), KH = w.size(2), KW = w.size(3);
  VLM_ASSERT(H + 2 * pad >= KH && W + 2 * pad >= KW, op.name, ": kernel larger than padded input");
  return Shape{in.size(0), w.size(0), (H + 2 * pad - KH) / stride + 1, (W + 2 * pad - KW) / stride + 1};
}

// in[B,C,H,W] (the larger side: forward's input, backward's din), k >= 1, stride >= 1,
// the window within the input; small[B,C,Ho,Wo] of in's dtype.
void pool_rules(const Op& op, const Tensor& in, const char* in_what, const Tensor& small, const char* small_what,
                int k, int stride) {
  op.dtype(in, in_what);
  VLM_ASSERT(in.ndim() == 4 && k >= 1 && stride >= 1 && in.size(2) >= k && in.size(3) >= k, op.name, ": ", in_what,
             " ", in.str(), " with k=", k, " stride=", stride);
  op.on_device(small, small_what);
  const Shape expect{in.size(0), in.size(1), (in.size(2) - k) / stride + 1, (in.size(3) - k) / stride + 1};
  VLM_ASSERT(small.dtype() == in.dtype() && small.shape() == expect, op.name, ": ", small_what, " is ", small.str(),
             ", expected ", dtype_name(in.dtype()), expect.str());
}

// maps[B,C,H,W] in a dtype the kernels take, rows[B*H*W, C] of its dtype.
void layout_rules(const Op& op, const Tensor& rows, const Tensor& maps) {
  op.dtype(maps, "maps");
  op.on_device(rows, "rows");
  VLM_ASSERT(maps.ndim() == 4 && rows.ndim() == 2 && rows.dtype() == maps.dtype() &&
                 rows.size(0) == maps.size(0) * maps.size(2) * maps.size(3) && rows.size(1) == maps.size(1),
             op.name, ": rows ", rows.str(), " maps ", maps.str(), " (expected rows [B*H*W, C] for maps [B,C,H,W])");
}

}  // namespace

void conv2d_forward(const Op& op, const Tensor& out, const Tensor& in, const Tensor& w, const Tensor& bias,
                    int stride, int pad) {
  const Shape os = conv_rules(op, in, w, stride, pad);
  op.on_device(out, "out");
  VLM_ASSERT(out.dtype() == in.dtype() && out.shape() == os, op.name, ": out is ", out.str(), ", expected ",
             dtype_name(in.dtype()), os.str());
  if (bias.defined()) op.elems(bias, in.dtype(), os[1], "bias");
}

void conv2d_backward(const Op& op, const Tensor& din, const Tensor& dw, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& w, int stride, int pad) {
  const Shape os = conv_rules(op, in, w, stride, pad);
  op.on_device(dout, "dout");
  VLM_ASSERT(dout.dtype() == in.dtype() && dout.shape() == os, op.name, ": dout is ", dout.str(), ", expected ",
             dtype_name(in.dtype()), os.str());
  if (din.defined()) op.same(din, in, "din");
  if (dw.defined()) op.same(dw, w, "dw");
  if (dbias.defined()) op.elems(dbias, in.dtype(), os[1], "dbias");
}

void avgpool2d_forward(const Op& op, const Tensor& out, const Tensor& in, int k, int stride) {
  pool_rules(op, in, "in", out, "out", k, stride);
}

void avgpool2d_backward(const Op& op, const Tensor& din, const Tensor& dout, int k, int stride) {
  pool_rules(op, din, "din", dout, "dout", k, stride);
}

void maps_to_rows(const Op& op, const Tensor& rows, const Tensor& maps) { layout_rules(op, rows, maps); }

void rows_to_maps(const Op& op, const Tensor& maps, const Tensor& rows) { layout_rules(op, rows, maps); }

}  // namespace vlm::contract
