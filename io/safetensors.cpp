// Safetensors reader (validated header, sliced pread) and sharded checkpoint index.
// See io/safetensors.h for the format and the checks; the writer is in
// safetensors_write.cpp.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/json.h"

namespace vlm {

namespace {

struct DTypeName {
  StDType t;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {StDType::F64, "F64", 8}, {StDType::F32, "F32", 4}, {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4},
    {StDType::I16, "I16", 2},  {StDType::I8, "I8", 1},   {StDType::U8, "U8", 1},
    {StDType::BOOL, "BOOL", 1}};

// IEEE half -> f32 (subnormals, infinities and NaN included).
float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { man <<= 1; ++e; } while (!(man & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7F800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Converts n little-endian elements of `dt` at src to f32 (the host is little-endian).
void convert_to_f32(const unsigned char* src, StDType dt, size_t n, float* dst) {
  switch (dt) {
    case StDType::F32: std::memcpy(dst, src, n * 4); return;
    case StDType::F64:
      for (size_t i = 0; i < n; ++i) { double d; std::memcpy(&d, src + 8 * i, 8); dst[i] = float(d); }
      return;
    case StDType::F16:
      for (size_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); dst[i] = f16_to_f32(h); }
      return;
    case StDType::BF16:
      for (size_t i = 0; i < n; ++i) { bf16 b; std::memcpy(&b.bits, src + 2 * i, 2); dst[i] = bf16_to_f32(b); }
      return;
    default: VLM_ASSERT(false, "convert_to_f32 on a non-float dtype");
  }
}

bool is_float(StDType t) {
  return t == StDType::F64 || t == StDType::F32 || t == StDType::F16 || t == StDType::BF16;
}

}  // namespace

const char* st_dtype_name(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.name;
  return "?";
}

size_t st_dtype_size(StDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.size;
  return 0;
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- SafetensorsFile ---------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a named pipe: no wait for a writer
  if (fd_ < 0) throw UserError(cat(path, ": cannot open (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw UserError(cat(path, ": not a regular file"));
  }
  try {
    parse_header(uint64_t(st.st_size));
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::read_bytes(void* dst, uint64_t offset, uint64_t bytes,
                                 const std::string& tensor) const {
  auto* p = static_cast<unsigned char*>(dst);
  while (bytes > 0) {
    ssize_t r = ::pread(fd_, p, size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30)), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw UserError(cat(path_, ": tensor '", tensor, "': read failed at byte ", offset,
                          r < 0 ? cat(" (", std::strerror(errno), ")") : std::string(" (file truncated)")));
    p += r;
    offset += uint64_t(r);
    bytes -= uint64_t(r);
  }
}

void SafetensorsFile::parse_header(uint64_t file_size) {
  if (file_size < 8)
    throw UserError(cat(path_, ": ", file_size, " bytes is too short for a safetensors file (needs an 8-byte header length)"));
  unsigned char len_bytes[8];
  read_bytes(len_bytes, 0, 8, "<header length>");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxSafetensorsHeaderBytes)
    throw UserError(cat(path_, ": header length ", n, " exceeds the limit of ", kMaxSafetensorsHeaderBytes, " bytes"));
  if (n > file_size - 8)
    throw UserError(cat(path_, ": header length ", n, " runs past the end of the file (", file_size, " bytes)"));
  if (n < 2) throw UserError(cat(path_, ": header length ", n, " is too short for a JSON object"));
  std::string text(size_t(n), '\0');
  read_bytes(text.data(), 8, n, "<header>");

  // The writer may pad the header with trailing spaces; JSON whitespace handles that.
  json::Limits lim;
  lim.max_bytes = size_t(kMaxSafetensorsHeaderBytes);
  lim.max_depth = 8;
  json::Value h = json::parse(text, cat(path_, " (header)"), lim);
  if (!h.is_object()) throw UserError(cat(path_, ": header is a JSON ", json::type_name(h.type()), ", expected an object"));
  if (text[0] != '{')
    throw UserError(cat(path_, ": the header must start with '{' at byte 8 of the file (found byte ",
                        int(uint8_t(text[0])), ")"));

  data_start_ = 8 + n;
  const uint64_t data_size = file_size - data_start_;
  for (const auto& [name, v] : h.as_object()) {
    const std::string what = cat(path_, ": tensor '", name, "'");
    if (name == "__metadata__") {
      for (const auto& [k, mv] : v.as_object(cat(path_, ": __metadata__")))
        metadata_[k] = mv.as_string(cat(path_, ": __metadata__ '", k, "'"));
      continue;
    }
    if (name.empty()) throw UserError(cat(path_, ": a tensor has an empty name"));
    for (const auto& [k, _] : v.as_object(what))
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        throw UserError(cat(what, ": unexpected key '", k, "' (expected dtype, shape, data_offsets)"));
    StTensorInfo t;
    t.name = name;
    const std::string& ds = v.at("dtype", what).as_string(cat(what, " dtype"));
    bool known = false;
    for (const auto& d : kDTypes)
      if (ds == d.name) { t.dtype = d.t; known = true; }
    if (!known)
      throw UserError(cat(what, ": unknown dtype '", ds, "' (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)"));
    int64_t numel = 1;
    const auto& shape = v.at("shape", what).as_array(cat(what, " shape"));
    if (shape.size() > 64) throw UserError(cat(what, ": shape has ", shape.size(), " dimensions (at most 64)"));
    for (const auto& d : shape) {
      const int64_t x = d.as_int(cat(what, " shape entry"));
      if (x < 0) throw UserError(cat(what, ": negative dimension ", x));
      if (x > 0 && numel > std::numeric_limits<int64_t>::max() / 16 / x)
        throw UserError(cat(what, ": shape too large"));
      numel *= x;
      t.shape.push_back(x);
    }
    const auto& off = v.at("data_offsets", what).as_array(cat(what, " data_offsets"));
    if (off.size() != 2) throw UserError(cat(what, ": data_offsets must have 2 entries, has ", off.size()));
    const int64_t b = json::int_in(off[0], 0, std::numeric_limits<int64_t>::max(), cat(what, " data_offsets[0]"));
    const int64_t e = json::int_in(off[1], 0, std::numeric_limits<int64_t>::max(), cat(what, " data_offsets[1]"));
    if (e < b)
      throw UserError(cat(what, ": data_offsets [", b, ",", e, ") are not an increasing pair"));
    t.begin = uint64_t(b);
    t.end = uint64_t(e);
    if (t.end > data_size)
      throw UserError(cat(what, ": data_offsets [", b, ",", e, ") run past the end of the data area (",
                          data_size, " bytes)"));
    uint64_t want = uint64_t(numel) * st_dtype_size(t.dtype);
    if (t.end - t.begin != want)
      throw UserError(cat(what, ": ", t.end - t.begin, " bytes in data_offsets but dtype ", ds, " x shape has ",
                          want, " bytes"));
    tensors_.push_back(std::move(t));
  }
  // The byte ranges must tile the data area: in offset order each starts where the
  // previous one ends, the first at 0 and the last at the end (no overlap, no hole, no
  // unindexed trailing bytes). Empty tensors sit anywhere on the boundary.
  std::vector<const StTensorInfo*> by_off;
  for (const auto& t : tensors_) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const StTensorInfo* prev = nullptr;
  for (const StTensorInfo* t : by_off) {
    if (t->begin < at)
      throw UserError(cat(path_, ": tensors '", prev->name, "' and '", t->name, "' have overlapping data_offsets"));
    if (t->begin > at)
      throw UserError(cat(path_, ": ", t->begin - at, " bytes of the data area before tensor '", t->name,
                          "' (from byte ", at, ") belong to no tensor (the format forbids holes)"));
    at = t->end;
    prev = t;
  }
  if (at != data_size)
    throw UserError(cat(path_, ": the last ", data_size - at, " bytes of the data area (from byte ", at,
                        ") belong to no tensor (the format forbids holes)"));
  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const StTensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  const StTensorInfo* t = find(name);
  if (!t) throw UserError(cat(path_, ": no tensor '", name, "'"));
  return *t;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const StTensorInfo& t = info(name);
  if (t.shape.empty()) {  // a scalar: one element
    std::vector<float> out(1);
    std::vector<unsigned char> raw(st_dtype_size(t.dtype));
    if (!is_float(t.dtype)) throw UserError(cat(path_, ": tensor '", name, "': dtype ", st_dtype_name(t.dtype), " is not a float type"));
    read_bytes(raw.data(), data_start_ + t.begin, raw.size(), name);
    convert_to_f32(raw.data(), t.dtype, 1, out.data());
    if (!std::isfinite(out[0])) throw UserError(cat(path_, ": tensor '", name, "': holds a non-finite value (", out[0], ")"));
    return out;
  }
  return read_slice_f32(name, 0, 0, t.shape[0]);
}

std::vector<float> SafetensorsFile::read_slice_f32(const std::string& name, int dim, int64_t begin,
                                                   int64_t end) const {
  const StTensorInfo& t = info(name);
  const std::string what = cat(path_, ": tensor '", name, "'");
  if (!is_float(t.dtype))
    throw UserError(cat(what, ": dtype ", st_dtype_name(t.dtype), " is not a float type (F64, F32, F16, BF16)"));
  if (dim < 0 || dim >= int(t.shape.size()))
    throw UserError(cat(what, ": cannot slice dimension ", dim, " of a ", t.shape.size(), "-D tensor"));
  if (begin < 0 || end < begin || end > t.shape[size_t(dim)])
    throw UserError(cat(what, ": slice [", begin, ",", end, ") outside dimension ", dim, " of size ",
                        t.shape[size_t(dim)]));
  // outer x [dim] x inner; each outer index contributes one contiguous run.
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= t.shape[size_t(i)];
  for (size_t i = size_t(dim) + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
  const size_t es = st_dtype_size(t.dtype);
  const uint64_t run = uint64_t(end - begin) * uint64_t(inner);  // elements per run
  std::vector<float> out(size_t(outer) * run);
  if (run == 0) return out;
  std::vector<unsigned char> raw(size_t(run) * es);
  for (int64_t o = 0; o < outer; ++o) {
    uint64_t first = (uint64_t(o) * uint64_t(t.shape[size_t(dim)]) + uint64_t(begin)) * uint64_t(inner);
    read_bytes(raw.data(), data_start_ + t.begin + first * es, raw.size(), name);
    convert_to_f32(raw.data(), t.dtype, size_t(run), out.data() + size_t(o) * run);
  }
  // Weights are finite: a NaN or inf would reach every output silently.
  for (size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i])) throw UserError(cat(what, ": holds a non-finite value (", out[i], ") at element ", i, " of the read"));
  return out;
}

// ---- SafetensorsCheckpoint ---------------------------------------------------------

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    json::Value v = json::parse_file(index.string());
    const std::string what = cat(index.string(), ": weight_map");
    for (const auto& [name, file] : v.at("weight_map", index.string()).as_object(what)) {
      const std::string& f = file.as_string(cat(what, " '", name, "'"));
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        throw UserError(cat(what, " '", name, "': file '", f, "' must be a plain file name in ", dir));
      weight_map_[name] = f;
    }
  } else if (fs::exists(single)) {
    auto file = std::make_unique<SafetensorsFile>(single.string());
    for (const auto& t : file->tensors()) weight_map_[t.name] = "model.safetensors";
    files_["model.safetensors"] = std::move(file);
  } else {
    throw UserError(cat(dir, ": neither model.safetensors nor model.safetensors.index.json found"));
  }
}

SafetensorsCheckpoint::~SafetensorsCheckpoint() = default;

bool SafetensorsCheckpoint::has(const std::string& name) const { return weight_map_.count(name) > 0; }

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : weight_map_) out.push_back(n);
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) throw UserError(cat(dir_, ": no tensor '", name, "' in the checkpoint"));
  auto& slot = files_[it->second];
  if (!slot) slot = std::make_unique<SafetensorsFile>((std::filesystem::path(dir_) / it->second).string());
  if (!slot->find(name))
    throw UserError(cat(slot->path(), ": tensor '", name, "' listed in the index but not in the file"));
  return *slot;
}

}  // namespace vlm
