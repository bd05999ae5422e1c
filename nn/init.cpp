// Counter-based initialisation; see init.h.
#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/splitmix.h"
#include "core/cpu_threads.h"

namespace vlm {

namespace {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in (0, 1): 53 random bits, never 0.
double uniform(uint64_t key, uint64_t counter) {
  return (double(splitmix64(key + counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Element `index` of a tensor whose RNG key is `key` (= splitmix64(seed ^ fnv1a64(name)),
// computed once per tensor, not per element).
float init_value_keyed(uint64_t key, InitKind kind, float std, int64_t index) {
  switch (kind) {
    case InitKind::Zeros: return 0.f;
    case InitKind::Ones: return 1.f;
    case InitKind::Normal: break;
  }
  const double u1 = uniform(key, 2 * uint64_t(index)), u2 = uniform(key, 2 * uint64_t(index) + 1);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return float(double(std) * z);
}

}  // namespace

float init_value(uint64_t seed, const std::string& name, InitKind kind, float std, int64_t index) {
  return init_value_keyed(splitmix64(seed ^ fnv1a64(name)), kind, std, index);
}

void init_params(ParamTable& table, uint64_t seed) {
  VLM_ASSERT(table.allocated(), "init_params before allocate");
  for (const Param& p : table.params()) {
    const ParamSpec& s = p.spec;
    const int64_t hf_rows = s.hf[0];
    const int64_t cols = s.hf.ndim() >= 2 ? s.hf.numel() / hf_rows : 1;
    const int64_t lrows = p.local[0];
    const int64_t lcols = p.local.ndim() >= 2 ? p.local.numel() / lrows : 1;
    const int64_t row0 = s.split_dim == 0 ? p.offset : 0;
    const int64_t col0 = s.split_dim == 1 ? p.offset : 0;
    const uint64_t key = splitmix64(seed ^ fnv1a64(s.name));
    std::vector<float> v(size_t(p.local.numel()), 0.f);
    // Rows [r0, r1): each element a pure function of its index, so any split of the rows
    // over threads gives the same values (a 1B model's billion draws take a minute on one core).
    auto fill_rows = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t gr = row0 + r;
        if (gr >= hf_rows) continue;  // vocabulary padding
        for (int64_t c = 0; c < lcols; ++c)
          v[size_t(r * lcols + c)] = init_value_keyed(key, s.init, s.std, gr * cols + col0 + c);
      }
    };
    if (s.init == InitKind::Normal)  // a thread per 2^18 draws at most
      host_parallel_for(lrows, std::max<int64_t>(1, (int64_t(1) << 18) / lcols), fill_rows);
    else
      fill_rows(0, lrows);
    table.write(p, Tensor::from_vector(v, p.local));  // wherever it lives (nn/param_table.h)
  }
}

}  // namespace vlm
