// Regions of a logical tensor (checkpoint/tensor_region.h) against element-by-element
// references: for random shapes of 1 to 4 dimensions, random boxes and random ranges,
//  - region_runs lists exactly the region's elements, in its order (the box's row-major
//    order, enumerated index by index, cut to the range);
//  - overlaps of two regions pair exactly their common elements, each once, at their
//    positions in both orders;
//  - region_problem accepts the regions inside their tensor and names what is wrong
//    with the others.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "checkpoint/tensor_region.h"

namespace vlm {
namespace {

// The region's elements as indices of the tensor, in the region's order.
std::vector<int64_t> elements(const Dims& shape, const TensorRegion& r) {
  std::vector<int64_t> v;
  const int64_t n = dims_numel(r.extent);
  for (int64_t e = 0; e < n; ++e) {
    if (e < r.begin || e >= r.end) continue;
    int64_t rest = e, at = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      at += (r.offset[d] + rest % r.extent[d]) * stride;
      rest /= r.extent[d], stride *= shape[d];
    }
    v.push_back(at);
  }
  return v;
}

std::vector<int64_t> expand(const std::vector<TensorRun>& runs) {
  std::vector<int64_t> v;
  for (const TensorRun& r : runs)
    for (int64_t k = 0; k < r.len; ++k) v.push_back(r.at + k);
  return v;
}

struct Gen {
  std::mt19937_64 rng{20240613};
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  Dims shape() {
    Dims s(size_t(uniform(1, 4)));
    for (int64_t& d : s) d = uniform(1, 6);
    return s;
  }
  // A box inside `shape` (sometimes whole along a dimension, sometimes empty) and a range of it.
  TensorRegion region(const Dims& shape) {
    TensorRegion r;
    for (int64_t d : shape) {
      const int64_t o = uniform(0, 2) == 0 ? 0 : uniform(0, d), e = uniform(0, 3) == 0 ? d - o : uniform(0, d - o);
      r.offset.push_back(o), r.extent.push_back(e);
    }
    const int64_t n = dims_numel(r.extent);
    r.begin = uniform(0, 3) == 0 ? 0 : uniform(0, n);
    r.end = uniform(0, 3) == 0 ? n : uniform(r.begin, n);
    return r;
  }
};

TEST(TensorRegion, RunsAreTheRegionsElementsInOrder) {
  Gen g;
  for (int i = 0; i < 3000; ++i) {
    const Dims s = g.shape();
    const TensorRegion r = g.region(s);
    ASSERT_EQ(region_problem(s, r), "") << dims_str(s) << " " << region_str(r);
    const std::vector<TensorRun> runs = region_runs(s, r);
    EXPECT_EQ(expand(runs), elements(s, r)) << dims_str(s) << " " << region_str(r);
    for (size_t k = 1; k < runs.size(); ++k)
      EXPECT_GT(runs[k].at, runs[k - 1].at + runs[k - 1].len) << "runs that touch are one run";
  }
  EXPECT_EQ(expand(region_runs({3, 4}, whole_region({3, 4}))).size(), 12u);
  EXPECT_EQ(region_runs({3, 4}, whole_region({3, 4})).size(), 1u);
}

TEST(TensorRegion, OverlapsPairEveryCommonElementOnce) {
  Gen g;
  for (int i = 0; i < 3000; ++i) {
    const Dims s = g.shape();
    const TensorRegion a = g.region(s), b = g.region(s);
    const std::vector<int64_t> ea = elements(s, a), eb = elements(s, b);
    std::map<int64_t, std::pair<int64_t, int64_t>> common;  // element -> positions in a, b
    std::map<int64_t, int64_t> in_b;
    for (size_t k = 0; k < eb.size(); ++k) in_b[eb[k]] = int64_t(k);
    for (size_t k = 0; k < ea.size(); ++k)
      if (in_b.count(ea[k])) common[ea[k]] = {int64_t(k), in_b[ea[k]]};
    std::map<int64_t, std::pair<int64_t, int64_t>> got;
    for (const Overlap& o : overlaps(region_runs(s, a), region_runs(s, b)))
      for (int64_t k = 0; k < o.len; ++k) {
        ASSERT_EQ(ea[size_t(o.a + k)], eb[size_t(o.b + k)])
            << dims_str(s) << " " << region_str(a) << " " << region_str(b);
        EXPECT_TRUE(got.emplace(ea[size_t(o.a + k)], std::pair{o.a + k, o.b + k}).second) << "an element paired twice";
      }
    EXPECT_EQ(got, common) << dims_str(s) << " " << region_str(a) << " " << region_str(b);
  }
}

TEST(TensorRegion, ProblemsAreNamed) {
  const Dims s{4, 6};
  EXPECT_EQ(region_problem(s, {{0, 2}, {4, 4}, 3, 16}), "");
  EXPECT_NE(region_problem(s, {{0}, {4}, 0, 4}).find("2 dimensions"), std::string::npos);
  EXPECT_NE(region_problem(s, {{0, 3}, {4, 4}, 0, 1}).find("in dimension 1"), std::string::npos);
  EXPECT_NE(region_problem(s, {{-1, 0}, {1, 6}, 0, 1}).find("in dimension 0"), std::string::npos);
  EXPECT_NE(region_problem(s, {{0, 0}, {4, 6}, 5, 4}).find("not a range"), std::string::npos);
  EXPECT_NE(region_problem(s, {{0, 0}, {4, 6}, 0, 25}).find("not a range"), std::string::npos);
  EXPECT_EQ(region_problem(s, {{4, 0}, {0, 6}, 0, 0}), "") << "an empty box at the end";
}

}  // namespace
}  // namespace vlm
