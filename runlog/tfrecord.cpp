// TFRecord framing (see tfrecord.h).
#include "runlog/tfrecord.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "base/error.h"
#include "base/memory_check.h"

namespace vlm {

namespace {

void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(const std::string& data) {
  std::string r;
  r.reserve(data.size() + 16);
  put_le(r, data.size(), 8);
  put_le(r, masked_crc32c(r.data(), 8), 4);
  r += data;
  put_le(r, masked_crc32c(data.data(), data.size()), 4);
  return r;
}

// ---- writer ----

TfRecordWriter::TfRecordWriter(std::string path) : out_(std::move(path), true) {}

TfRecordWriter::~TfRecordWriter() {
  try {
    flush();
  } catch (const UserError&) {  // the file keeps its whole records (io/append_file.h)
  }
}

void TfRecordWriter::write(const std::string& data) { pending_ += tfrecord_frame(data); }

void TfRecordWriter::flush() {
  out_.append(pending_);
  pending_.clear();
}

// ---- reader ----

TfRecordReader::TfRecordReader(std::string path, std::string kind)
    : path_(std::move(path)), kind_(std::move(kind)) {
  std::error_code ec;
  VLM_REQUIRE(std::filesystem::is_regular_file(path_, ec), path_, ": not a ", kind_,
              " (no such file, or not a regular file)");
  size_ = std::filesystem::file_size(path_, ec);
  VLM_REQUIRE(!ec, path_, ": cannot read the size of the ", kind_, ": ", ec.message());
  in_.open(path_, std::ios::binary);
  VLM_REQUIRE(in_.is_open(), path_, ": cannot open ", kind_);
}

void TfRecordReader::fail(const std::string& what) const {
  throw UserError(cat(path_, ": record ", index_, " of the ", kind_, ": ", what));
}

bool TfRecordReader::next(std::string& data) {
  if (pos_ == size_) return false;
  const uint64_t left = size_ - pos_;
  if (left < 12) fail(cat("truncated (the file ends inside the record header, ", left, " bytes left)"));
  char head[12];
  if (!in_.read(head, 12)) fail("read error");
  if (uint32_t(get_le(head + 8, 4)) != masked_crc32c(head, 8)) fail("length checksum mismatch (corrupt file)");
  const uint64_t n = get_le(head, 8);
  if (n > left - 12 || left - 12 - n < 4)
    fail(cat("truncated (the record holds ", n, " data bytes and a checksum, the file has ", left - 12, " left)"));
  // The file holds the bytes; large records are also checked against free memory
  // (small ones skip the /proc/meminfo read).
  if (n > (uint64_t(1) << 24)) require_allocatable(n, cat(path_, ": record ", index_, " of the ", kind_));
  data.resize(size_t(n));
  char tail[4];
  if (!in_.read(data.data(), std::streamsize(n)) || !in_.read(tail, 4)) fail("read error");
  if (uint32_t(get_le(tail, 4)) != masked_crc32c(data.data(), data.size())) fail("data checksum mismatch (corrupt file)");
  pos_ += 16 + n;
  ++index_;
  return true;
}

}  // namespace vlm
