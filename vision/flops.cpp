// The FLOPs of the encoder and the projector (vision/flops.h).
#include "vision/flops.h"

#include "vision/patch_embed.h"

namespace vlm {

Flops encoder_flops(const VisionConfig& v, int tp, double images, bool trains) {
  const PatchEmbed embed(v);
  const double N = double(v.tokens()), dv = double(v.d_model), Fv = double(v.d_ff), Lv = v.n_layers;
  const double blocks = Lv * N * 2 * (4 * dv * dv + 2 * dv * Fv), attn_fwd = Lv * 4 * N * N * dv;  // per image
  Flops f;
  f.gemm = images * (2 * embed.forward_macs_per_image() + (trains ? 3 : 1) * blocks +
                     (trains ? 2 * embed.backward_macs_per_image() : 0));
  f.attention = images * (trains ? 3 : 1) * attn_fwd;
  f.model = (f.gemm + f.attention) / tp;
  return f;
}

Flops projector_flops(int64_t d_in, int64_t d_out, int tp, double tokens, double passes) {
  const double di = double(d_in), dout = double(d_out);
  Flops f;
  f.gemm = tokens * 2 * (di * dout + dout * dout) * passes;
  f.model = f.gemm / tp;
  return f;
}

}  // namespace vlm
