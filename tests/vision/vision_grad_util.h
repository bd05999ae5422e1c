// Helpers of the f64 vision tests (tests/vision/test_vision_grad.cpp,
// tests/vision/test_vision_stem_grad.cpp): a tiny tower, random inputs and parameters,
// parameter gradients checked to accumulate, and a PatchEmbed with its own table.
#pragma once
#include <functional>
#include <vector>

#include "tests/core/gradcheck.h"
#include "vision/encoder.h"

namespace vlm::test {

inline constexpr int64_t kImages = 2;  // images of every rig

inline VisionConfig tiny_vision() {
  VisionConfig v;
  v.image_size = 8;
  v.patch = 4;  // G = 2: 4 cells per image
  v.d_model = 8;
  v.n_layers = 2;
  v.n_heads = 2;
  v.d_ff = 16;
  v.texture = true;
  v.image_mean = {0.48f, 0.46f, 0.41f};
  v.image_std = {0.27f, 0.26f, 0.28f};
  v.validate();
  return v;
}

inline Tensor random_pixels(uint64_t seed, int64_t B, int64_t S) {
  Rng rng(seed);
  Tensor t = Tensor::empty(cpu_backend(), Shape{B, S, S, 3}, DType::U8);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<uint8_t>()[i] = uint8_t(rng.randint(0, 255));
  return t;
}
inline Tensor random_texture(uint64_t seed, const VisionConfig& v) {
  const int64_t G = v.grid();
  return host(Rng(seed).vec(kImages * kTextureChannels * G * G, -2, 2),
              Shape{kImages, kTextureChannels, G, G});
}

// Every parameter of `t` random (norm weights near 1), the texture map included.
inline void randomize(const ParamTable& t, uint64_t seed) {
  Rng rng(seed);
  for (const Param& p : t.params()) {
    const bool scale = p.spec.init == InitKind::Ones;
    copy_tensor(p.value, host(rng.vec(p.local.numel(), scale ? 0.7 : -0.5, scale ? 1.3 : 0.5), p.local));
  }
}

// Analytic gradients of every parameter of `t` from `backward`, checked to accumulate:
// they start from random values, which are subtracted after.
inline std::vector<Tensor> param_grads(const ParamTable& t, uint64_t seed, const std::function<void()>& backward) {
  Rng rng(seed);
  std::vector<Vec> start;
  for (const Param& q : t.params()) {
    start.push_back(rng.vec(q.local.numel()));
    copy_tensor(q.grad, host(start.back(), q.local));
  }
  backward();
  std::vector<Tensor> g;
  for (size_t i = 0; i < t.params().size(); ++i) {
    const Param& q = t.params()[i];
    Vec v = to_vector_f64(q.grad);
    for (size_t j = 0; j < v.size(); ++j) v[j] -= start[i][j];
    g.push_back(host(v, q.local));
  }
  return g;
}

// A PatchEmbed with its own table and plan (what the encoder does around it).
struct EmbedRig {
  VisionConfig cfg;
  PatchEmbed embed;
  ParamTable table;
  ActPlan plan;
  Tensor out;  // [T, d]
  Tensor pixels = random_pixels(3, kImages, cfg.image_size);
  Tensor texture = random_texture(4, cfg);

  explicit EmbedRig(VisionConfig c = tiny_vision())
      : cfg(c), embed(cfg), table(embed.param_specs(0.02f), 1, 0, DType::F64) {
    table.allocate(cpu_backend());
    embed.bind(table);
    embed.plan(plan);
    plan.add(&out, ActPlan::Rows::T, {cfg.d_model});
    const int64_t T = kImages * cfg.tokens();
    plan.allocate(cpu_backend(), T, T, DType::F64);
    randomize(table, 5);
  }
  Tensor forward() {
    embed.forward(cpu_stream(), out, pixels, texture);
    return to_host(out);
  }
};

}  // namespace vlm::test
