// TensorBoard event files (runlog/tb_events.h) and the PNG encoder they carry
// (data/image/png.h): records byte for byte equal to the real protobuf's serialization
// framed with TensorBoard's own CRC (golden hex below); writer -> reader round trips
// bitwise; malformed messages refused naming the record; PNG headers and pixels checked
// against the PNG format and the decoder of image_pipeline.h.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "data/image/image_pipeline.h"
#include "data/image/png.h"
#include "runlog/tb_events.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

using test::error_of;

std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
  return s;
}

// Made with TensorBoard 2.21's protobuf classes and its CRC (no code of ours):
//   from tensorboard.compat.proto import event_pb2, summary_pb2
//   from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
//   frame(b) = pack("<Q", len(b)) + pack("<I", masked_crc32c(that)) + b + pack("<I", masked_crc32c(b))
//   frame(Event(wall_time=..., step=..., file_version=... | summary=Summary(value=[...])
//               | session_log=SessionLog(status=START)).SerializeToString())
TEST(TbGolden, RecordsMatchTheRealProtobuf) {
  // Event(wall_time=1700000000.25, file_version="brain.Event:2")
  EXPECT_EQ(tfrecord_frame(encode_file_version_event(1700000000.25)),
            unhex("1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e743a32338d2fe9"));
  // step=42, Value(tag="loss/train", simple_value=2.71828)
  EXPECT_EQ(tfrecord_frame(encode_scalar_event(1700000001.5, 42, "loss/train", 2.71828f)),
            unhex("200000000000000029eda9500900006040fc54d941102a2a130a110a0a6c6f73732f747261696e154df82d40ca75cf23"));
  // step=7, Value(tag="lr", simple_value=0.0): the oneof member is written although 0
  EXPECT_EQ(tfrecord_frame(encode_scalar_event(1700000001.75, 7, "lr", 0.0f)),
            unhex("1800000000000000a37f4b220900007040fc54d94110072a0b0a090a026c72150000000058c902df"));
  // step=10**12, Value(tag="samples/0", image=Image(height=2, width=3, colorspace=3,
  // encoded_image_string=b"\x89PNG-not-really"))
  EXPECT_EQ(tfrecord_frame(encode_image_event(1700000002.0, 1000000000000, "samples/0", 2, 3, 3, "\x89PNG-not-really")),
            unhex("3800000000000000a3797d570900008040fc54d9411080a094a58d1d2a260a240a0973616d706c65732f3022170802100318"
                  "03220f89504e472d6e6f742d7265616c6c7959c485b9"));
  // step=-3 (ten varint bytes), Value(tag="neg", simple_value=-1.5)
  EXPECT_EQ(tfrecord_frame(encode_scalar_event(1700000003.0, -3, "neg", -1.5f)),
            unhex("220000000000000078113dfd090000c040fc54d94110fdffffffffffffffff012a0c0a0a0a036e6567150000c0bf0f147329"));
  // step=501, session_log=SessionLog(status=START)
  EXPECT_EQ(tfrecord_frame(encode_session_start_event(1700000004.5, 501)),
            unhex("100000000000000095fbfe180900002041fc54d94110f5033a02080134b594e8"));
}

class TbFile : public test::TempDirTest {};

// The reader on the same golden records (the real protobuf's bytes, not our encoder's).
TEST_F(TbFile, ReaderDecodesTheRealProtobuf) {
  const std::string path = (dir_ / "events.out.tfevents.golden").string();
  test::write_file(path, unhex("1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e743a32338d2fe9"
                               "220000000000000078113dfd090000c040fc54d94110fdffffffffffffffff012a0c0a0a0a036e65671500"
                               "00c0bf0f147329"
                               "3800000000000000a3797d570900008040fc54d9411080a094a58d1d2a260a240a0973616d706c65732f30"
                               "221708021003180322"
                               "0f89504e472d6e6f742d7265616c6c7959c485b9"
                               "100000000000000095fbfe180900002041fc54d94110f5033a02080134b594e8"));
  const auto ev = read_tb_events(path);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_FALSE(ev[0].session_start || ev[1].session_start || ev[2].session_start);
  EXPECT_TRUE(ev[3].session_start);
  EXPECT_EQ(ev[3].step, 501);
  EXPECT_TRUE(ev[3].values.empty());
  EXPECT_EQ(ev[0].wall_time, 1700000000.25);
  EXPECT_EQ(ev[0].step, 0);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_EQ(ev[1].wall_time, 1700000003.0);
  EXPECT_EQ(ev[1].step, -3);
  ASSERT_EQ(ev[1].values.size(), 1u);
  EXPECT_EQ(ev[1].values[0].kind, TbValue::Kind::kScalar);
  EXPECT_EQ(ev[1].values[0].tag, "neg");
  EXPECT_EQ(ev[1].values[0].simple_value, -1.5f);
  EXPECT_EQ(ev[2].step, 1000000000000);
  ASSERT_EQ(ev[2].values.size(), 1u);
  const TbValue& im = ev[2].values[0];
  EXPECT_EQ(im.kind, TbValue::Kind::kImage);
  EXPECT_EQ(im.tag, "samples/0");
  EXPECT_EQ(im.image_height, 2);
  EXPECT_EQ(im.image_width, 3);
  EXPECT_EQ(im.image_colorspace, 3);
  EXPECT_EQ(im.image_png, "\x89PNG-not-really");
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// A small RGB gradient as the trainer would log it.
std::vector<uint8_t> gradient(int h, int w, int c) {
  std::vector<uint8_t> px(size_t(h * w * c));
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t((i * 37 + i / 7) & 0xFF);
  return px;
}

TEST_F(TbFile, WriterReaderRoundTrip) {
  const char* keep = std::getenv("VLM_KEEP_TB");  // keep the file for tools/check_tensorboard.py
  const std::string run = keep ? std::string(keep) : (dir_ / "runs" / "demo").string();
  const std::vector<double> values = {2.5, 0.1, -0.0, 1e-42, 3.4e38, 1e300, -7.25,
                                      std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()};
  const int H = 5, W = 7;
  const std::vector<uint8_t> px = gradient(H, W, 3);
  const std::string png = encode_png(px.data(), H, W, 3);
  const double t0 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string path;
  {
    EventWriter w(run);
    path = w.path();
    for (size_t i = 0; i < values.size(); ++i) {
      w.scalar("train/loss", int64_t(i) * 10, values[i]);
      w.scalar("train/lr", int64_t(i) * 10, 1e-3 * double(i));
    }
    w.image("samples/texture", 80, H, W, 3, png);
    w.scalar("big_step", int64_t(1) << 40, 1.0);
    w.flush();
  }
  const double t1 = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(run));
  EXPECT_EQ(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;

  const std::vector<TbEvent> ev = read_tb_events(path);
  ASSERT_EQ(ev.size(), 1 + 2 * values.size() + 2);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_TRUE(ev[0].values.empty());
  for (const TbEvent& e : ev) {
    EXPECT_GE(e.wall_time, std::floor(t0));
    EXPECT_LE(e.wall_time, t1 + 1);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    for (int k = 0; k < 2; ++k) {
      const TbEvent& e = ev[1 + 2 * i + size_t(k)];
      ASSERT_EQ(e.values.size(), 1u);
      const TbValue& v = e.values[0];
      EXPECT_EQ(e.step, int64_t(i) * 10);
      EXPECT_EQ(v.kind, TbValue::Kind::kScalar);
      EXPECT_EQ(v.tag, k == 0 ? "train/loss" : "train/lr");
      EXPECT_EQ(bits(v.simple_value), bits(float(k == 0 ? values[i] : 1e-3 * double(i)))) << i;
    }
  }
  const TbEvent& im = ev[ev.size() - 2];
  ASSERT_EQ(im.values.size(), 1u);
  EXPECT_EQ(im.step, 80);
  EXPECT_EQ(im.values[0].kind, TbValue::Kind::kImage);
  EXPECT_EQ(im.values[0].tag, "samples/texture");
  EXPECT_EQ(im.values[0].image_height, H);
  EXPECT_EQ(im.values[0].image_width, W);
  EXPECT_EQ(im.values[0].image_colorspace, 3);
  EXPECT_EQ(im.values[0].image_png, png);
  EXPECT_EQ(ev.back().step, int64_t(1) << 40);
  EXPECT_EQ(ev.back().values.at(0).simple_value, 1.0f);
}

TEST_F(TbFile, FileIsReadableAfterEachFlush) {
  EventWriter w((dir_ / "r").string());
  EXPECT_EQ(read_tb_events(w.path()).size(), 1u);  // the constructor flushed the file_version record
  for (int s = 1; s <= 3; ++s) {
    w.scalar("x", s, s);
    w.flush();
    const auto ev = read_tb_events(w.path());
    ASSERT_EQ(ev.size(), size_t(1 + s));
    EXPECT_EQ(ev.back().step, s);
  }
}

TEST_F(TbFile, TwoWritersInOneFolderGetTwoFiles) {
  EventWriter a(dir_.string()), b(dir_.string());
  EXPECT_NE(a.path(), b.path());
  a.scalar("a", 1, 1);
  b.scalar("b", 1, 2);
  a.flush();
  b.flush();
  EXPECT_EQ(read_tb_events(a.path()).back().values.at(0).tag, "a");
  EXPECT_EQ(read_tb_events(b.path()).back().values.at(0).tag, "b");
}

TEST_F(TbFile, RunFolderThatIsAFileIsNamed) {
  const std::string f = write("taken", "x");
  EXPECT_NE(error_of([&] { EventWriter w(f); }).find(f + ": cannot create the TensorBoard run folder"),
            std::string::npos);
}

TEST_F(TbFile, FlippedByteAndTruncationNameTheRecord) {
  std::string path;
  {
    EventWriter w(dir_.string());
    path = w.path();
    w.scalar("a", 1, 1.0);
    w.scalar("b", 2, 2.0);
  }
  const std::string good = test::read_file(path);
  // The second scalar is the last record: its data sits in the last bytes before the CRC.
  std::string bad = good;
  bad[bad.size() - 6] = char(bad[bad.size() - 6] ^ 1);
  test::write_file(path, bad);
  EXPECT_NE(error_of([&] { read_tb_events(path); }).find(path + ": record 2 of the TensorBoard event file: data checksum"),
            std::string::npos);
  test::write_file(path, good.substr(0, good.size() - 1));
  EXPECT_NE(error_of([&] { read_tb_events(path); }).find(path + ": record 2 of the TensorBoard event file: truncated"),
            std::string::npos);
}

TEST_F(TbFile, MalformedEventIsRefusedUnknownFieldsSkipped) {
  const std::string path = (dir_ / "events.out.tfevents.0.test").string();
  {
    TfRecordWriter w(path);
    w.write(encode_file_version_event(1.0));
    // Event with unknown fields around a scalar: graph_def (4, bytes), Value.node_name
    // (7, bytes) and Value.metadata (9, bytes), a varint field 15 and a fixed32 field 16.
    std::string value = std::string("\x3a\x02nn", 4) + "\x0a\x01t" + std::string("\x4a\x00", 2) +
                        std::string("\x15\x00\x00\x80\x3f", 5);
    std::string summary(1, '\x0a'), event("\x10\x05\x22\x03gdf\x78\x96\x01\x85\x01\x01\x02\x03\x04", 16);
    summary += char(value.size());
    summary += value;
    event += '\x2a';
    event += char(summary.size());
    event += summary;
    w.write(event);
    w.write(std::string("\x10\x80", 2));  // step with a truncated varint
    w.flush();
  }
  const std::string e = error_of([&] { read_tb_events(path); });
  EXPECT_NE(e.find(path + ": record 2 of the TensorBoard event file: not a valid Event message (truncated varint)"),
            std::string::npos)
      << e;
  // Without the bad record the unknown fields are skipped.
  const std::string good = test::read_file(path);
  test::write_file(path, good.substr(0, good.size() - 18));
  const auto ev = read_tb_events(path);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].step, 5);
  ASSERT_EQ(ev[1].values.size(), 1u);
  EXPECT_EQ(ev[1].values[0].tag, "t");
  EXPECT_EQ(ev[1].values[0].simple_value, 1.0f);
}

// ---- PNG (data/image/png.h) ----

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint8_t(s[at + 3]);
}

TEST(Png, HeaderAndPixelsRoundTrip) {
  const int H = 9, W = 13;
  for (int c : {1, 3, 4}) {
    std::vector<uint8_t> px = gradient(H, W, c);
    if (c == 4)
      for (size_t i = 3; i < px.size(); i += 4) px[i] = 255;  // opaque: decode_rgb then keeps RGB as is
    const std::string png = encode_png(px.data(), H, W, c);
    // Signature and IHDR (PNG specification, 5.2 and 11.2.2): size, 8-bit, colour type.
    ASSERT_GT(png.size(), 33u);
    EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
    EXPECT_EQ(png.substr(12, 4), "IHDR");
    EXPECT_EQ(be32(png, 16), uint32_t(W));
    EXPECT_EQ(be32(png, 20), uint32_t(H));
    EXPECT_EQ(png[24], 8);
    EXPECT_EQ(int(png[25]), c == 1 ? 0 : c == 3 ? 2 : 6) << c;
    const RgbImage rgb = decode_rgb(reinterpret_cast<const uint8_t*>(png.data()), png.size());
    ASSERT_FALSE(rgb.empty());
    ASSERT_EQ(rgb.height, H);
    ASSERT_EQ(rgb.width, W);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int k = 0; k < 3; ++k)
          ASSERT_EQ(rgb.view().row(y)[3 * x + k], px[size_t((y * W + x) * c + (c == 1 ? 0 : k))])
              << "c=" << c << " y=" << y << " x=" << x << " k=" << k;
  }
}

}  // namespace
}  // namespace vlm
