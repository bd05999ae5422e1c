// Safetensors files (the Hugging Face weight format): reader with per-rank slices,
// sharded checkpoints (model.safetensors.index.json), and a writer.
//
// File layout: u64 little-endian N | N bytes of JSON header | data area.
// Header: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end)}, ...,
//          "__metadata__": {"k": "v"}} with offsets relative to the data area.
//
// Invariants enforced when a file is opened (UserError naming the file and tensor), the
// format's own rules:
//  - 8 <= file size; N <= kMaxHeaderBytes (100 MB) and N <= file size - 8;
//  - the header starts with '{' and is a strict JSON object (base/json.h: UTF-8, no
//    duplicate names), padding after it is whitespace; each entry has exactly dtype,
//    shape and data_offsets; the dtype is a known safetensors dtype;
//  - shape entries are >= 0 (at most 64 of them) and their product does not overflow;
//  - begin <= end <= data-area size, end - begin == numel * dtype size;
//  - the byte ranges tile the data area: sorted by offset, each starts where the
//    previous ends, the first at 0, the last at the end (no overlap, no hole, no
//    unindexed trailing bytes);
//  - __metadata__, when present, maps strings to strings.
// Reading converts F64/F32/F16/BF16 to f32; integer dtypes are listed but refused for
// f32 reads. Only the bytes of the requested slice are read (pread), so each TP rank
// touches only its part of a tensor.
// The writer stores f32 or bf16 tensors, header keys sorted by name, the data area
// starting at an 8-byte aligned offset (header padded with spaces), tensors packed
// without holes (f32 before bf16 so each stays aligned to its element size), written
// to a temporary name and renamed when complete.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace vlm {

constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t(100) << 20;  // 100 MB

enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
const char* st_dtype_name(StDType t);
size_t st_dtype_size(StDType t);

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data area
  int64_t numel() const;
};

// One .safetensors file, opened read-only; the header is parsed and validated in the
// constructor, tensor data is read on demand.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const StTensorInfo* find(const std::string& name) const;  // nullptr when absent
  const StTensorInfo& info(const std::string& name) const;  // UserError when absent

  // The whole tensor as f32, row-major.
  std::vector<float> read_f32(const std::string& name) const;
  // Indices [begin, end) of dimension `dim` (all of the other dimensions), as f32 in
  // row-major order of the sliced shape. E.g. dim 1 of an [out, in] matrix gives the
  // [out, end-begin] block of columns.
  std::vector<float> read_slice_f32(const std::string& name, int dim, int64_t begin,
                                    int64_t end) const;

 private:
  void parse_header(uint64_t file_size);
  void read_bytes(void* dst, uint64_t offset, uint64_t bytes, const std::string& tensor) const;

  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + N
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: model.safetensors.index.json (weight_map: tensor -> file) when
// present, else model.safetensors. Files of a sharded checkpoint are opened on first use;
// a weight_map entry whose file lacks the tensor is a UserError.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& dir);
  ~SafetensorsCheckpoint();

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  // The file holding `name` (UserError "<dir>: no tensor 'name'" when absent).
  const SafetensorsFile& file_of(const std::string& name) const;
  const StTensorInfo& info(const std::string& name) const { return file_of(name).info(name); }
  std::vector<float> read_f32(const std::string& name) const { return file_of(name).read_f32(name); }
  std::vector<float> read_slice_f32(const std::string& name, int dim, int64_t begin,
                                    int64_t end) const {
    return file_of(name).read_slice_f32(name, dim, begin, end);
  }

 private:
  std::string dir_;
  std::map<std::string, std::string> weight_map_;  // tensor -> file name (in dir_)
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
};

// A tensor to write: f32 values, stored as `dtype` (F32 or BF16, rounded to nearest even).
struct StWriteTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // numel(shape) values, row-major
  DType dtype = DType::F32;
};

// Writes `tensors` (unique names, not "__metadata__") to `path`.
void write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace vlm
