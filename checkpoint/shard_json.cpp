// The JSON pieces of the shard header and the index (checkpoint/shard_json.h).
#include "checkpoint/shard_json.h"

#include <algorithm>

#include "base/error.h"

namespace vlm::shard_json {

Value int_value(int64_t v) { return Value::integer(v); }

Value dims_value(const Dims& d) {
  Value::Array a;
  for (int64_t x : d) a.push_back(int_value(x));
  return Value::array(std::move(a));
}

void put_region(Value& o, const TensorRegion& r) {
  o.set("offset", dims_value(r.offset));
  o.set("extent", dims_value(r.extent));
  o.set("range", dims_value({r.begin, r.end}));
}

void only_keys(const Value& o, std::initializer_list<std::string_view> keys, const std::string& what) {
  for (const auto& [k, v] : o.as_object(what))
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) throw UserError(cat(what, ": unexpected key '", k, "'"));
}

int64_t int_at(const Value& o, std::string_view key, int64_t lo, int64_t hi, const std::string& what) {
  return json::int_in(o.at(key, what), lo, hi, cat(what, ": ", key));
}

Dims dims_at(const Value& o, std::string_view key, int64_t hi, const std::string& what) {
  const Value::Array& a = o.at(key, what).as_array(cat(what, ": ", key));
  VLM_REQUIRE(a.size() <= kMaxDims, what, ": ", key, " has ", a.size(), " entries (at most ", kMaxDims, ")");
  Dims d;
  for (size_t i = 0; i < a.size(); ++i) d.push_back(json::int_in(a[i], 0, hi, cat(what, ": ", key, "[", i, "]")));
  return d;
}

Dims shape_at(const Value& o, const std::string& what) {
  const Dims s = dims_at(o, "shape", kMaxDim, what);
  int64_t n = 1;
  for (int64_t x : s) {
    VLM_REQUIRE(x == 0 || n <= kMaxDim / x, what, ": shape ", dims_str(s), " has more than 2^50 elements");
    n *= x;
  }
  return s;
}

TensorRegion region_at(const Value& o, const Dims& shape, const std::string& what) {
  TensorRegion r;
  r.offset = dims_at(o, "offset", kMaxDim, what);
  r.extent = dims_at(o, "extent", kMaxDim, what);
  const Dims range = dims_at(o, "range", kMaxDim, what);
  VLM_REQUIRE(range.size() == 2, what, ": range has ", range.size(), " entries (expected [begin, end])");
  r.begin = range[0], r.end = range[1];
  const std::string problem = region_problem(shape, r);
  VLM_REQUIRE(problem.empty(), what, ": ", problem);
  VLM_REQUIRE(r.numel() > 0, what, ": the piece holds no element");
  return r;
}

std::string string_at(const Value& o, std::string_view key, size_t max_bytes, const std::string& what) {
  const std::string& s = o.at(key, what).as_string(cat(what, ": ", key));
  VLM_REQUIRE(!s.empty() && s.size() <= max_bytes, what, ": ", key, " must have 1 to ", max_bytes, " bytes");
  for (unsigned char c : s) VLM_REQUIRE(c >= 0x20, what, ": ", key, " holds a control character");
  return s;
}

std::string save_at(const Value& o, const std::string& what) {
  const std::string s = string_at(o, "save", 32, what);
  for (char c : s)
    VLM_REQUIRE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), what, ": save '", s, "' is not a hexadecimal id");
  return s;
}

std::string file_at(const Value& o, const std::string& what) {
  const std::string f = string_at(o, "file", 255, what);
  VLM_REQUIRE(f.find('/') == std::string::npos && f[0] != '.', what, ": file '", f,
              "' is not a plain file name of the checkpoint's folder");
  return f;
}

std::string tensor_name_at(const Value& o, std::string_view key, const std::string& what) {
  const std::string n = string_at(o, key, 1024, what);
  VLM_REQUIRE(n[0] != '/', what, ": tensor name '", n, "' starts with '/'");
  return n;
}

uint32_t crc_at(const Value& o, std::string_view key, const std::string& what) {
  return uint32_t(int_at(o, key, 0, int64_t(UINT32_MAX), what));
}

int64_t check_format(const Value& root, const char* format, int64_t oldest, int64_t newest, const std::string& file) {
  root.as_object(file);
  const Value* f = root.find("format");
  VLM_REQUIRE(f && f->is_string() && f->as_string() == format, file, ": not a vlm checkpoint file (format '", format,
              "' expected)");
  const int64_t v = int_at(root, "version", 0, INT64_MAX, file);
  VLM_REQUIRE(v >= oldest && v <= newest, file, ": version ", v, " (this vlm reads ",
              oldest == newest ? cat("version ", newest) : cat("versions ", oldest, " to ", newest), ")");
  return v;
}

void check_disjoint(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t data_bytes, const std::string& what) {
  std::sort(spans.begin(), spans.end());
  for (size_t i = 0; i < spans.size(); ++i) {
    VLM_REQUIRE(spans[i].first + spans[i].second <= data_bytes, what, ": a piece at byte ", spans[i].first,
                " runs past the data area (", data_bytes, " bytes)");
    VLM_REQUIRE(i == 0 || spans[i - 1].first + spans[i - 1].second <= spans[i].first, what,
                ": two pieces share the bytes at ", spans[i].first);
  }
}

}  // namespace vlm::shard_json
