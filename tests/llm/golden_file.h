// Reader of the golden files written by tools/make_llm_golden.py: "config k v" and
// "tensor name f32|i32 ndim dims... offset" text lines, "DATA", then the raw
// little-endian payload (offsets in bytes from its start). Header-only, test use.
#pragma once
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlm::test {

struct GoldenTensor {
  std::string dtype;
  std::vector<int64_t> dims;
  std::vector<float> f;    // f32 payload
  std::vector<int32_t> i;  // i32 payload
};

struct GoldenFile {
  std::map<std::string, std::string> config;
  std::map<std::string, GoldenTensor> tensors;

  explicit GoldenFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open golden file " + path);
    std::string line;
    struct Rec { std::string name; GoldenTensor t; size_t off; };
    std::vector<Rec> recs;
    while (std::getline(in, line) && line != "DATA") {
      std::istringstream ls(line);
      std::string kind;
      ls >> kind;
      if (kind == "config") {
        std::string k, v;
        ls >> k >> v;
        config[k] = v;
      } else if (kind == "tensor") {
        Rec r;
        int nd = 0;
        ls >> r.name >> r.t.dtype >> nd;
        r.t.dims.resize(size_t(nd));
        for (auto& d : r.t.dims) ls >> d;
        ls >> r.off;
        recs.push_back(r);
      }
    }
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto& r : recs) {
      size_t n = 1;
      for (auto d : r.t.dims) n *= size_t(d);
      if (r.off + 4 * n > data.size()) throw std::runtime_error("golden tensor past the end: " + r.name);
      if (r.t.dtype == "i32") {
        r.t.i.resize(n);
        std::memcpy(r.t.i.data(), data.data() + r.off, 4 * n);
      } else {
        r.t.f.resize(n);
        std::memcpy(r.t.f.data(), data.data() + r.off, 4 * n);
      }
      tensors[r.name] = std::move(r.t);
    }
  }
  const GoldenTensor& at(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error("golden tensor missing: " + name);
    return it->second;
  }
  double num(const std::string& k) const { return std::stod(config.at(k)); }
};

}  // namespace vlm::test
