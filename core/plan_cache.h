// PlanCache<Key, Plan>: the plans a CUDA op builds once per key and reuses on every
// later call with that key: cuBLASLt's matmul descriptors and algorithm (the key:
// core/gemm_key.h), cuDNN's attention graphs (core/cuda/attention_cudnn.cpp). Building
// a plan runs a library heuristic (tens of microseconds to seconds); looking one up is a
// hash. A plan that turned out unusable is cached too (its `ok` says so), so the
// heuristic is never asked twice for one key.
// Counters: builds() (how many times a heuristic ran) and hits(), so tests assert that
// a key is built once (tests/core/test_plan_cache.cpp on the CPU, tests/gpu on CUDA).
// Not thread-safe: each CudaStream owns its caches and its ops are enqueued in order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace vlm {

template <class Key, class Plan, class Hash = std::hash<Key>>
class PlanCache {
 public:
  // The plan of `key`, built by `build()` (returning std::unique_ptr<Plan>) the first
  // time. The reference stays valid until clear() (plans never move).
  template <class Build>
  Plan& get(const Key& key, Build&& build) {
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      ++hits_;
      return *it->second;
    }
    ++builds_;
    std::unique_ptr<Plan> p = build();
    Plan& ref = *p;
    plans_.emplace(key, std::move(p));
    return ref;
  }

  const Plan* find(const Key& key) const {
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second.get();
  }
  uint64_t builds() const { return builds_; }
  uint64_t hits() const { return hits_; }
  size_t size() const { return plans_.size(); }
  void clear() { plans_.clear(); }
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [k, p] : plans_) f(k, *p);
  }

 private:
  std::unordered_map<Key, std::unique_ptr<Plan>, Hash> plans_;
  uint64_t builds_ = 0, hits_ = 0;
};

// Combines hashes (boost's hash_combine).
inline void hash_mix(size_t& seed, uint64_t v) {
  seed ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

}  // namespace vlm
