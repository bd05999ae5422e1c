// Helpers shared by the CPU op implementations (core/cpu/*.cpp), not a public header.
//  - dispatch_float(dtype, op, f): calls f(T{}) with T = float or double; any other
//    dtype is an internal error.
//  - dispatch_act(dtype, op, f): the same with bf16 too, for the ops that take bf16
//    activations (core/ops/contract.h `kAct`). Their kernels are templates on the
//    storage type S that compute in compute_t<S> (float for bf16, else S itself): ld()
//    loads an element as its compute type, st<S>() stores a value rounded to S (bf16:
//    through f32, round to nearest even). At S = float or double both are identities,
//    so the f32 and f64 results are those of the plain kernels; at S = bf16 the result
//    is that of the f32 kernel on the same values, rounded once to bf16.
//  - StatRef: a per-row statistic tensor (mean, rstd, lse, rowmax, ...) read and written
//    as double. The declarations say these are f32; on CPU an f64 statistic is also
//    accepted, so f64 gradient checks are exact.
// The ops' arguments arrive checked (core/ops/contract.h): devices, dtypes, shapes.
//  - gelu_tanh / gelu_tanh_grad: the GPT-2 tanh GELU and its derivative.
//  - thread_scratch<T>(slot, n): per-thread scratch memory kept between calls.
//  - VLM_CPU_CLONES: compile a function once per x86-64 level and pick at run time.
// Threads: parallel loops go through core/cpu/thread_pool.h (included here).
// Invariant: every loop that reduces does so in a fixed order, independent of the
// thread count, so the same input gives bitwise the same output.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "base/error.h"
#include "core/cpu/thread_pool.h"
#include "core/tensor.h"

// Function multi-versioning: the compiler emits an AVX-512 (x86-64-v4), an AVX2+FMA
// (x86-64-v3) and a baseline body, and the dynamic loader binds the best one for the CPU
// at start-up, so the binary runs on any x86-64 CPU. The kernels are compiled with
// -ffp-contract=off and without reassociation (core/CMakeLists.txt), and their
// reductions fix their order in the code (4-lane vectors, explicit lane sums), so every
// body rounds every element the same way: results are bitwise the same at any level.
// Off under the sanitizers, whose run time is not ready when the loader runs the ifunc
// resolvers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define VLM_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define VLM_CPU_CLONES_ON 1
#else
#define VLM_CPU_CLONES
#endif

namespace vlm::cpu {

// The body VLM_CPU_CLONES functions run on this CPU: "x86-64-v4", "x86-64-v3" or
// "baseline" (the loader's choice, asked the same way).
inline const char* clone_level() {
#ifdef VLM_CPU_CLONES_ON
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
#endif
  return "baseline";
}

// Scratch of `bytes` for the calling thread in slot 0..6, grown when a larger size is
// asked and kept, so an op allocates only the first time it sees a size. One op uses a
// slot at a time on a thread: slot 0 (and 3..6, matmul's bf16 operands, outputs and
// bias) in an op's serial part, slots 1..3 inside tasks.
char* thread_scratch_bytes(int slot, size_t bytes);
template <typename T>
T* thread_scratch(int slot, int64_t n) {
  return reinterpret_cast<T*>(thread_scratch_bytes(slot, size_t(n) * sizeof(T)));
}

template <typename F>
void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F64: f(double{}); return;
    default: VLM_ASSERT(false, op, ": unsupported dtype ", dtype_name(t), " on cpu (f32/f64 only)");
  }
}

template <typename F>
void dispatch_act(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F64: f(double{}); return;
    case DType::BF16: f(bf16{}); return;
    default: VLM_ASSERT(false, op, ": unsupported dtype ", dtype_name(t), " on cpu (f32/f64/bf16 only)");
  }
}

template <typename S>
struct compute_type {
  using type = S;
};
template <>
struct compute_type<bf16> {
  using type = float;
};
template <typename S>
using compute_t = typename compute_type<S>::type;

inline float ld(float x) { return x; }
inline double ld(double x) { return x; }
inline float ld(bf16 x) { return bf16_to_f32(x); }
template <typename S, typename V>
inline S st(V v) {
  if constexpr (std::is_same_v<S, bf16>)
    return f32_to_bf16(float(v));
  else
    return S(v);
}

// n elements of S from p as their compute type into d (a conversion for bf16).
template <typename S>
inline void ld_n(compute_t<S>* d, const S* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = ld(p[i]);
}
// n values from v stored as S into p.
template <typename S>
inline void st_n(S* p, const compute_t<S>* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = st<S>(v[i]);
}

// f32 copies of bf16 tensors, for an op that runs its f32 kernel on them (attention):
// the inputs converted and f32 buffers for the outputs, in this thread's scratch slot 2
// (the kernels use slots 0 and 1); store() rounds the outputs into the bf16 tensors.
// So the bf16 op is the f32 op on the same values, each output rounded once.
class F32Stage {
 public:
  static constexpr size_t kMax = 8;  // inputs and outputs together
  F32Stage(std::initializer_list<const Tensor*> ins, std::initializer_list<const Tensor*> outs) {
    VLM_ASSERT(ins.size() + outs.size() <= kMax, "F32Stage: too many tensors");
    int64_t n = 0;
    for (const Tensor* t : ins) n += t->numel();
    for (const Tensor* t : outs) n += t->numel();
    float* p = thread_scratch<float>(2, n);
    for (const Tensor* t : ins) {
      const bf16* src = t->ptr<bf16>();
      parallel_for(t->numel(), kGrainStream, [&](int64_t b, int64_t e) { ld_n(p + b, src + b, e - b); });
      t_[n_++] = Tensor(p, t->shape(), DType::F32, DeviceKind::CPU);
      p += t->numel();
    }
    n_in_ = n_;
    for (const Tensor* t : outs) {
      dst_[n_] = t;
      t_[n_++] = Tensor(p, t->shape(), DType::F32, DeviceKind::CPU);
      p += t->numel();
    }
  }
  const Tensor& in(size_t i) const { return t_[i]; }
  const Tensor& out(size_t i) const { return t_[n_in_ + i]; }
  void store() const {
    for (size_t i = n_in_; i < n_; ++i) {
      const float* src = t_[i].ptr<float>();
      bf16* d = dst_[i]->ptr<bf16>();
      parallel_for(t_[i].numel(), kGrainStream, [&](int64_t b, int64_t e) { st_n(d + b, src + b, e - b); });
    }
  }

 private:
  Tensor t_[kMax];
  const Tensor* dst_[kMax] = {};
  size_t n_ = 0, n_in_ = 0;
};

class StatRef {
 public:
  // t: f32 or f64 (the contract's stat(), core/ops/contract.h).
  explicit StatRef(const Tensor& t) : p_(t.data()), dt_(t.dtype()) {}
  double get(int64_t i) const {
    return dt_ == DType::F32 ? double(static_cast<const float*>(p_)[i]) : static_cast<const double*>(p_)[i];
  }
  void set(int64_t i, double v) const {
    if (dt_ == DType::F32)
      static_cast<float*>(p_)[i] = float(v);
    else
      static_cast<double*>(p_)[i] = v;
  }

 private:
  void* p_;
  DType dt_;
};

inline constexpr double kGeluK = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluC = 0.044715;

template <typename T>
inline T gelu_tanh(T x) {
  const T k = T(kGeluK), c = T(kGeluC);
  return T(0.5) * x * (T(1) + std::tanh(k * (x + c * x * x * x)));
}

template <typename T>
inline T gelu_tanh_grad(T x) {
  const T k = T(kGeluK), c = T(kGeluC);
  T t = std::tanh(k * (x + c * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x);
}

}  // namespace vlm::cpu
