// CPU rotary position embedding (core/ops/rope.inc), "rotate half" (Llama/HF) layout.
// x[T,NH,HS], pos[T] i32, HS even, h = HS/2. For i < h, with
// angle = pos * theta^(-2i/HS) (computed in double):
//   forward:  out[i] = x[i] cos - x[i+h] sin;   out[i+h] = x[i+h] cos + x[i] sin
//   backward: din[i] = d[i] cos + d[i+h] sin;   din[i+h] = d[i+h] cos - d[i] sin
// out may alias in (each pair is read before it is written). Parallel over tokens; the
// angle tables live in per-thread scratch (no allocation per call). f32, f64 and bf16
// (values loaded as double, stored through compute_t: cpu_util.h). rope_qk_* rotate q
// and k with one angle table per token, each head as the single-tensor op would.
#include <cmath>
#include <initializer_list>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

// One tensor to rotate: out = rotation of in (heads NH), possibly in place.
struct RopeTensor {
  const Tensor* out;
  const Tensor* in;
};

// sign = +1 rotates forward, -1 applies the inverse rotation; every tensor of `ts` has
// the same dtype, T and HS.
void rope_apply(const char* op, std::initializer_list<RopeTensor> ts, const Tensor& pos, float theta, double sign) {
  const Tensor& ref = *ts.begin()->in;
  const int64_t T_ = ref.size(0), HS = ref.size(2), h = HS / 2;
  int64_t heads = 0;
  for (const RopeTensor& t : ts) heads += t.in->size(1);
  double* inv_freq = thread_scratch<double>(0, h);
  for (int64_t i = 0; i < h; ++i) inv_freq[i] = std::pow(double(theta), -2.0 * double(i) / double(HS));
  const int32_t* p = pos.ptr<int32_t>();
  dispatch_act(ref.dtype(), op, [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    parallel_for(T_, row_grain(heads * HS + 8 * h, kGrainMath), [&](int64_t t0, int64_t t1) {
      double* cs = thread_scratch<double>(1, 2 * h);
      double* sn = cs + h;
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t i = 0; i < h; ++i) {
          const double a = double(p[t]) * inv_freq[i];
          cs[i] = std::cos(a);
          sn[i] = sign * std::sin(a);
        }
        for (const RopeTensor& rt : ts) {
          const int64_t NH = rt.in->size(1);
          const S* x = rt.in->ptr<S>();
          S* o = rt.out->ptr<S>();
          for (int64_t hd = 0; hd < NH; ++hd) {
            const int64_t base = (t * NH + hd) * HS;
            for (int64_t i = 0; i < h; ++i) {
              const double x1 = double(ld(x[base + i])), x2 = double(ld(x[base + i + h]));
              o[base + i] = st<S>(T(x1 * cs[i] - x2 * sn[i]));
              o[base + i + h] = st<S>(T(x2 * cs[i] + x1 * sn[i]));
            }
          }
        }
      }
    });
  });
}

}  // namespace

void rope_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) {
  rope_apply("rope_forward", {{&out, &in}}, pos, theta, 1.0);
}

void rope_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) {
  rope_apply("rope_backward", {{&din, &dout}}, pos, theta, -1.0);
}

void rope_qk_forward(Stream& s, const Tensor& q, const Tensor& k, const Tensor& pos, float theta) {
  rope_apply("rope_qk_forward", {{&q, &q}, {&k, &k}}, pos, theta, 1.0);
}

void rope_qk_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& pos, float theta) {
  rope_apply("rope_qk_backward", {{&dq, &dq}, {&dk, &dk}}, pos, theta, -1.0);
}

}  // namespace vlm::cpu
