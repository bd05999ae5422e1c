// Regions of a logical tensor (checkpoint/tensor_region.h).
#include "checkpoint/tensor_region.h"

#include <algorithm>

namespace vlm {

int64_t dims_numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  return s + "]";
}

TensorRegion whole_region(const Dims& shape) { return {Dims(shape.size(), 0), shape, 0, dims_numel(shape)}; }

std::string region_problem(const Dims& shape, const TensorRegion& r) {
  if (r.offset.size() != shape.size() || r.extent.size() != shape.size())
    return "the box has " + std::to_string(r.offset.size()) + "/" + std::to_string(r.extent.size()) +
           " offsets/extents for a tensor of " + std::to_string(shape.size()) + " dimensions";
  for (size_t i = 0; i < shape.size(); ++i)
    if (r.offset[i] < 0 || r.extent[i] < 0 || r.offset[i] > shape[i] || r.extent[i] > shape[i] - r.offset[i])
      return "the box " + region_str(r) + " leaves the tensor " + dims_str(shape) + " in dimension " +
             std::to_string(i);
  if (r.begin < 0 || r.begin > r.end || r.end > dims_numel(r.extent))
    return "elements " + std::to_string(r.begin) + ".." + std::to_string(r.end) + " are not a range of the box's " +
           std::to_string(dims_numel(r.extent));
  return "";
}

std::string region_str(const TensorRegion& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.offset.size() && i < r.extent.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(r.offset[i]) + ":" + std::to_string(r.offset[i] + r.extent[i]);
  }
  return s + "] elements " + std::to_string(r.begin) + ".." + std::to_string(r.end);
}

std::vector<TensorRun> region_runs(const Dims& shape, const TensorRegion& r) {
  std::vector<TensorRun> out;
  if (r.begin >= r.end) return out;
  const int nd = int(shape.size());
  if (nd == 0) return {{0, 1}};
  Dims stride(size_t(nd), 1);
  for (int i = nd - 2; i >= 0; --i) stride[size_t(i)] = stride[size_t(i + 1)] * shape[size_t(i + 1)];
  // Dimensions after k are whole in the box: a step of dimension k's index is one run.
  int k = nd - 1;
  while (k > 0 && r.offset[size_t(k)] == 0 && r.extent[size_t(k)] == shape[size_t(k)]) --k;
  const int64_t len = r.extent[size_t(k)] * stride[size_t(k)];
  for (int64_t m = r.begin / len; m * len < r.end; ++m) {
    int64_t at = r.offset[size_t(k)] * stride[size_t(k)], rest = m;
    for (int j = k - 1; j >= 0; --j) {  // m in the mixed radix of the box's outer extents
      at += (r.offset[size_t(j)] + rest % r.extent[size_t(j)]) * stride[size_t(j)];
      rest /= r.extent[size_t(j)];
    }
    const int64_t s = std::max(r.begin, m * len) - m * len, e = std::min(r.end, (m + 1) * len) - m * len;
    out.push_back({at + s, e - s});
  }
  return out;
}

std::vector<Overlap> overlaps(const std::vector<TensorRun>& first, const std::vector<TensorRun>& second) {
  std::vector<Overlap> out;
  size_t i = 0, j = 0;
  int64_t pa = 0, pb = 0;  // positions of runs i and j in their region's order
  while (i < first.size() && j < second.size()) {
    const TensorRun &a = first[i], &b = second[j];
    const int64_t lo = std::max(a.at, b.at), hi = std::min(a.at + a.len, b.at + b.len);
    if (lo < hi) {
      const Overlap o{pa + lo - a.at, pb + lo - b.at, hi - lo};
      if (!out.empty() && out.back().a + out.back().len == o.a && out.back().b + out.back().len == o.b)
        out.back().len += o.len;
      else
        out.push_back(o);
    }
    if (a.at + a.len <= b.at + b.len)
      pa += a.len, ++i;
    else
      pb += b.len, ++j;
  }
  return out;
}

}  // namespace vlm
