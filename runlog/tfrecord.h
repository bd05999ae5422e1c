// TFRecord files, the container of TensorBoard event files (runlog/tb_events.h): a
// sequence of records, each
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) |
//   data[length]                  | uint32 masked_crc32c(data)
// with masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (as TensorFlow writes it).
// Invariants: the writer only appends whole records through a buffered stream (a reader
// may see a partial last record until flush()); the reader checks both checksums of every
// record and refuses a corrupt or truncated file with a UserError naming the file and the
// record index (0-based), never allocating more than the file holds (nor, for a large
// record, more than the memory available: base/memory_check.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "io/crc32c.h"

namespace vlm {

// TFRecord's masked CRC (io/crc32c.h) of n bytes.
uint32_t masked_crc32c(const void* data, size_t n);
// One whole record (header, data, checksums) as bytes.
std::string tfrecord_frame(const std::string& data);

// Appends records to a file. UserError naming the path when it cannot be opened or a
// write fails (checked after every record and on flush).
class TfRecordWriter {
 public:
  // Creates (truncates) `path`; `kind` names the file in messages ("TensorBoard event file").
  TfRecordWriter(std::string path, std::string kind);
  void write(const std::string& data);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void check(const char* what);
  std::string path_, kind_;
  std::ofstream out_;
};

// Reads the records of a file in order.
class TfRecordReader {
 public:
  explicit TfRecordReader(std::string path, std::string kind);
  // The next record's data; false at the end of the file (which must fall between records).
  bool next(std::string& data);
  // Index of the record next() returns next (= number of records read so far).
  int64_t index() const { return index_; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  std::string path_, kind_;
  std::ifstream in_;
  uint64_t size_ = 0, pos_ = 0;
  int64_t index_ = 0;
};

}  // namespace vlm
