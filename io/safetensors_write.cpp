// Safetensors writer (see io/safetensors.h): f32 tensors before bf16 ones, each group
// by name, packed without holes after a header padded to an 8-byte boundary, so every
// tensor is aligned to its element size and readers that require contiguous
// data_offsets (the reference implementation does) accept the file. Written through an
// AtomicFile (io/atomic_file.h), so a crash never leaves a half file under the final name.
#include <algorithm>
#include <string_view>

#include "base/error.h"
#include "base/json.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace vlm {

void write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Order: f32 before bf16 (so every tensor starts aligned to its element size), then by name.
  std::vector<const StWriteTensor*> order;
  for (const auto& t : tensors) {
    VLM_REQUIRE(t.dtype == DType::F32 || t.dtype == DType::BF16, path, ": tensor '", t.name,
                "': only f32 and bf16 can be written");
    VLM_REQUIRE(!t.name.empty() && t.name != "__metadata__", path, ": bad tensor name '", t.name, "'");
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    VLM_REQUIRE(n == int64_t(t.values.size()), path, ": tensor '", t.name, "': shape has ", n,
                " elements but ", t.values.size(), " values were given");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    if (a->dtype != b->dtype) return a->dtype == DType::F32;
    return a->name < b->name;
  });
  std::map<std::string, json::Value> entries;  // sorted header keys
  uint64_t off = 0;
  for (const auto* t : order) {
    uint64_t bytes = uint64_t(t->values.size()) * dtype_size(t->dtype);
    json::Value::Array shape;
    for (int64_t d : t->shape) shape.push_back(json::Value::integer(d));
    json::Value e = json::Value::object();
    e.set("dtype", json::Value::string(t->dtype == DType::F32 ? "F32" : "BF16"));
    e.set("shape", json::Value::array(std::move(shape)));
    e.set("data_offsets", json::Value::array({json::Value::integer(int64_t(off)), json::Value::integer(int64_t(off + bytes))}));
    VLM_REQUIRE(entries.emplace(t->name, std::move(e)).second, path, ": duplicate tensor '", t->name, "'");
    off += bytes;
  }
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value m = json::Value::object();
    for (const auto& [k, v] : metadata) m.set(k, json::Value::string(v));
    header.set("__metadata__", std::move(m));
  }
  for (auto& [k, v] : entries) header.set(k, std::move(v));
  std::string text = json::write(header);
  while ((8 + text.size()) % 8 != 0) text += ' ';

  AtomicFile out(path);
  char len[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = char(uint8_t(n >> (8 * i)));
  out.write(std::string_view(len, 8));
  out.write(text);
  std::vector<uint16_t> half;
  for (const auto* t : order) {
    if (t->dtype == DType::F32) {
      out.write(std::string_view(reinterpret_cast<const char*>(t->values.data()), t->values.size() * 4));
    } else {
      half.resize(t->values.size());
      for (size_t i = 0; i < half.size(); ++i) half[i] = f32_to_bf16(t->values[i]).bits;
      out.write(std::string_view(reinterpret_cast<const char*>(half.data()), half.size() * 2));
    }
  }
  out.commit();
}

}  // namespace vlm
