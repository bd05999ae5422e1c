// CPU image_to_patches (core/ops/image.inc): u8 [B,S,S,3] -> normalised patch rows
// [B*G*G, 3*P*P], f32 or f64. Each output row (one grid cell) is written by one thread
// (rows split over the pool: core/cpu/thread_pool.h);
// the arithmetic is per element in the output dtype, v * scale first, then
// (x - mean) / std, so f32 results match the CUDA kernel's.
#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void image_to_patches(Stream& s, const Tensor& out, const Tensor& in, int patch, const PixelNorm& n) {
  const int64_t B = in.size(0), S = in.size(1), P = patch;
  const int64_t G = S / P, rows = B * G * G, K = 3 * P * P;
  const uint8_t* px = in.ptr<uint8_t>();
  dispatch_float(out.dtype(), "image_to_patches", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data());
    const T scale = T(n.scale);
    const T mean[3] = {T(n.mean[0]), T(n.mean[1]), T(n.mean[2])};
    const T sd[3] = {T(n.stddev[0]), T(n.stddev[1]), T(n.stddev[2])};
    parallel_for(rows, row_grain(K, kGrainStream), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (G * G), gy = (r / G) % G, gx = r % G;
        T* row = o + r * K;
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t ky = 0; ky < P; ++ky) {
            const uint8_t* src = px + ((b * S + gy * P + ky) * S + gx * P) * 3 + c;
            T* dst = row + (c * P + ky) * P;
            for (int64_t kx = 0; kx < P; ++kx) dst[kx] = (T(src[kx * 3]) * scale - mean[c]) / sd[c];
          }
      }
    });
  });
}

}  // namespace vlm::cpu
