// TFRecord files, the container of TensorBoard event files (runlog/tb_events.h): a
// sequence of records, each
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) |
//   data[length]                  | uint32 masked_crc32c(data)
// with masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (as TensorFlow writes it).
// Invariants: the writer keeps the records of write() in memory and appends them to the
// file on flush(), all of them or none (io/append_file.h: a failed write, a full disk for
// instance, is truncated away), so the file holds whole records only; the reader checks both checksums of every
// record and refuses a corrupt or truncated file with a UserError naming the file and the
// record index (0-based), never allocating more than the file holds (nor, for a large
// record, more than the memory available: base/memory_check.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "io/append_file.h"
#include "io/crc32c.h"

namespace vlm {

// TFRecord's masked CRC (io/crc32c.h) of n bytes.
uint32_t masked_crc32c(const void* data, size_t n);
// One whole record (header, data, checksums) as bytes.
std::string tfrecord_frame(const std::string& data);

// Appends records to a file. UserError naming the path when it cannot be created or a
// flush fails ("<path>: write failed (<strerror>)"; the file then keeps the records of
// the earlier flushes, and one that never held a record is removed).
class TfRecordWriter {
 public:
  // Creates (truncates) `path`.
  explicit TfRecordWriter(std::string path);
  // Appends what is still buffered, without reporting a failure (flush() reports it).
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;
  void write(const std::string& data);  // buffers one record
  void flush();                          // appends the buffered records
  const std::string& path() const { return out_.path(); }

 private:
  AppendFile out_;
  std::string pending_;  // whole records not yet in the file
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
