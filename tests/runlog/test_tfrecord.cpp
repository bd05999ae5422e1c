// TFRecord framing (runlog/tfrecord.h): CRC-32C against published test vectors, the
// masked CRC against its formula, and a reader that refuses every single flipped byte
// and every truncation inside a record, naming the record.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runlog/tfrecord.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

using test::error_of;

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

TEST(Crc32c, KnownVectors) {
  // The check value of CRC-32C and the vectors of RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(""), 0u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string inc, dec;
  for (int i = 0; i < 32; ++i) inc.push_back(char(i)), dec.push_back(char(31 - i));
  EXPECT_EQ(crc_of(inc), 0x46DD794Eu);
  EXPECT_EQ(crc_of(dec), 0x113FDB5Cu);
}

TEST(Crc32c, ContinuesAcrossPieces) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= s.size(); ++cut)
    EXPECT_EQ(crc32c(s.data() + cut, s.size() - cut, crc32c(s.data(), cut)), crc_of(s)) << cut;
}

TEST(Crc32c, MaskFormula) {
  const std::string s = "123456789";
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c(s.data(), s.size()), uint32_t(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST(TfRecord, FrameLayout) {
  const std::string data = "abc";
  const std::string r = tfrecord_frame(data);
  ASSERT_EQ(r.size(), 8 + 4 + 3 + 4u);
  EXPECT_EQ(r.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  const uint32_t lc = masked_crc32c(r.data(), 8), dc = masked_crc32c("abc", 3);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(uint8_t(r[size_t(8 + i)]), uint8_t(lc >> (8 * i)));
    EXPECT_EQ(uint8_t(r[size_t(15 + i)]), uint8_t(dc >> (8 * i)));
  }
  EXPECT_EQ(r.substr(12, 3), data);
}

class TfRecordFile : public test::TempDirTest {
 protected:
  // Writes the records to <dir>/r.tfrecord; returns the path; ends_ = record end offsets.
  std::string write_records(const std::vector<std::string>& recs) {
    const std::string p = (dir_ / "r.tfrecord").string();
    TfRecordWriter w(p);
    size_t end = 0;
    for (const auto& r : recs) {
      w.write(r);
      ends_.push_back(end += r.size() + 16);
    }
    w.flush();
    return p;
  }
  static std::vector<std::string> read_all(const std::string& p) {
    TfRecordReader r(p, "test file");
    std::vector<std::string> out;
    std::string d;
    while (r.next(d)) out.push_back(d);
    return out;
  }
  // The record a byte offset falls in.
  int record_at(size_t off) const {
    int i = 0;
    while (off >= ends_[size_t(i)]) ++i;
    return i;
  }
  std::vector<size_t> ends_;
};

const std::vector<std::string> kRecords = {"", "x", std::string(300, 'q'), std::string("\0\1\2\3", 4)};

TEST_F(TfRecordFile, RoundTrip) {
  const std::string p = write_records(kRecords);
  EXPECT_EQ(read_all(p), kRecords);
  EXPECT_EQ(test::read_file(p).size(), ends_.back());
}

TEST_F(TfRecordFile, EveryFlippedByteIsRefusedNamingItsRecord) {
  const std::string p = write_records(kRecords);
  const std::string good = test::read_file(p);
  for (size_t off = 0; off < good.size(); ++off) {
    std::string bad = good;
    bad[off] = char(bad[off] ^ 0x20);
    test::write_file(p, bad);
    const std::string e = error_of([&] { read_all(p); });
    EXPECT_NE(e.find(p + ": record " + std::to_string(record_at(off)) + " of the test file: "), std::string::npos)
        << "offset " << off << ": " << e;
    EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  }
}

TEST_F(TfRecordFile, EveryTruncationInsideARecordIsRefused) {
  const std::string p = write_records(kRecords);
  const std::string good = test::read_file(p);
  for (size_t n = 0; n < good.size(); ++n) {
    test::write_file(p, good.substr(0, n));
    size_t whole = 0;
    while (whole < ends_.size() && ends_[whole] <= n) ++whole;
    const bool boundary = (whole == 0 ? 0 : ends_[whole - 1]) == n;
    if (boundary) {  // a file cut between records is a shorter valid file
      EXPECT_EQ(read_all(p), std::vector<std::string>(kRecords.begin(), kRecords.begin() + long(whole))) << n;
    } else {
      const std::string e = error_of([&] { read_all(p); });
      EXPECT_NE(e.find(p + ": record " + std::to_string(whole) + " of the test file: truncated"), std::string::npos)
          << "length " << n << ": " << e;
    }
  }
}

TEST_F(TfRecordFile, HugeLengthWithValidChecksumIsTruncationNotAllocation) {
  std::string head(8, '\xFF');
  head[7] = 0x7F;  // 2^63 - 1 bytes claimed
  const uint32_t c = masked_crc32c(head.data(), 8);
  for (int i = 0; i < 4; ++i) head.push_back(char(uint8_t(c >> (8 * i))));
  const std::string p = (dir_ / "huge.tfrecord").string();
  test::write_file(p, head + "tail");
  EXPECT_NE(error_of([&] { read_all(p); }).find(": record 0 of the test file: truncated"), std::string::npos);
}

TEST_F(TfRecordFile, MissingFileAndFolderAreNamed) {
  const std::string missing = (dir_ / "nope.tfrecord").string();
  EXPECT_NE(error_of([&] { read_all(missing); }).find(missing + ": not a test file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_all(dir_.string()); }).find(dir_.string() + ": not a test file"), std::string::npos);
  const std::string in_missing = (dir_ / "no" / "x.tfrecord").string();
  EXPECT_NE(error_of([&] { TfRecordWriter w(in_missing); })
                .find(in_missing + ": cannot open for writing (No such file or directory)"),
            std::string::npos);
}

}  // namespace
}  // namespace vlm
