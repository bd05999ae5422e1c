// Event protobuf encoding/decoding and the event-file writer (see tb_events.h).
#include "runlog/tb_events.h"

#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "base/error.h"

namespace vlm {

namespace {

// ---- protobuf wire format (varint = 0, 64-bit = 1, length-delimited = 2, 32-bit = 5) ----

enum Wire : int { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
constexpr uint64_t kSessionStart = 1;  // SessionLog.Status START

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  s.push_back(char(v));
}
void put_key(std::string& s, int field, Wire w) { put_varint(s, uint64_t(field) << 3 | uint64_t(w)); }
void put_fixed(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
}
void put_bytes(std::string& s, int field, std::string_view b) {
  put_key(s, field, kBytes);
  put_varint(s, b.size());
  s.append(b);
}
// int32/int64 fields: negative values are sign-extended to 10 varint bytes.
void put_int(std::string& s, int field, int64_t v) {
  if (v == 0) return;  // proto3 default
  put_key(s, field, kVarint);
  put_varint(s, uint64_t(v));
}

// Event { wall_time, step, <what> } with <what> already encoded.
std::string event(double wall_time, int64_t step, const std::string& what) {
  std::string e;
  if (std::bit_cast<uint64_t>(wall_time) != 0) {
    put_key(e, 1, kFixed64);
    put_fixed(e, std::bit_cast<uint64_t>(wall_time), 8);
  }
  put_int(e, 2, step);
  return e + what;
}

// Event.summary = Summary { value: [v] }.
std::string summary_of(const std::string& value) {
  std::string summary, what;
  put_bytes(summary, 1, value);
  put_bytes(what, 5, summary);
  return what;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf);
  for (char& c : h)
    if (c == '/' || c == '\\') c = '_';
  return h;
}

std::string new_event_file(const std::string& dir) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  VLM_REQUIRE(!ec && std::filesystem::is_directory(dir), dir,
              ": cannot create the TensorBoard run folder (", ec ? ec.message() : "not a directory", ")");
  const auto secs = int64_t(unix_now());
  const std::string stem = cat(dir, "/events.out.tfevents.", secs, ".", hostname(), ".", getpid(), ".");
  std::string path;
  do path = cat(stem, counter++);
  while (std::filesystem::exists(path, ec));
  return path;
}

// ---- decoding ----

struct Malformed {
  std::string what;
};

struct Reader {
  std::string_view s;
  size_t p = 0;

  bool done() const { return p == s.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p == s.size()) throw Malformed{"truncated varint"};
      const auto b = uint8_t(s[p++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw Malformed{"varint longer than 10 bytes"};
  }
  uint64_t fixed(int bytes) {
    if (s.size() - p < size_t(bytes)) throw Malformed{"truncated fixed-size field"};
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(s[p + size_t(i)])) << (8 * i);
    p += size_t(bytes);
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > s.size() - p) throw Malformed{"length-delimited field longer than its message"};
    const std::string_view r = s.substr(p, size_t(n));
    p += size_t(n);
    return r;
  }
  // The next key; the field's wire type must be `want` when it is a known field.
  int key(int& wire) {
    const uint64_t k = varint();
    wire = int(k & 7);
    if (k >> 3 == 0 || k >> 3 > (uint64_t(1) << 29)) throw Malformed{"bad field number"};
    return int(k >> 3);
  }
  void expect(int field, int wire, Wire want, const char* msg) {
    if (wire != want) throw Malformed{cat(msg, " field ", field, " has wire type ", wire, ", expected ", int(want))};
  }
  void skip(int wire) {
    switch (wire) {
      case kVarint: varint(); break;
      case kFixed64: fixed(8); break;
      case kBytes: bytes(); break;
      case kFixed32: fixed(4); break;
      default: throw Malformed{cat("unsupported wire type ", wire)};
    }
  }
};

// Calls f(reader) at each field `field` of the message `s` (its wire type must be `want`),
// the reader then at the field's value; other fields are skipped.
template <typename F>
void each_field(std::string_view s, int field, Wire want, const char* msg, F&& f) {
  Reader r{s};
  while (!r.done()) {
    int wire = 0;
    if (r.key(wire) != field) {
      r.skip(wire);
      continue;
    }
    r.expect(field, wire, want, msg);
    f(r);
  }
}

void decode_image(std::string_view s, TbValue& v) {
  Reader r{s};
  v.kind = TbValue::Kind::kImage;
  while (!r.done()) {
    int wire = 0;
    const int f = r.key(wire);
    if (f >= 1 && f <= 3) {
      r.expect(f, wire, kVarint, "Summary.Image");
      (f == 1 ? v.image_height : f == 2 ? v.image_width : v.image_colorspace) = int(int32_t(r.varint()));
    } else if (f == 4) {
      r.expect(f, wire, kBytes, "Summary.Image");
      v.image_png = std::string(r.bytes());
    } else {
      r.skip(wire);
    }
  }
}

TbValue decode_value(std::string_view s) {
  Reader r{s};
  TbValue v;
  while (!r.done()) {
    int wire = 0;
    const int f = r.key(wire);
    if (f == 1) {
      r.expect(f, wire, kBytes, "Summary.Value");
      v.tag = std::string(r.bytes());
    } else if (f == 2) {
      r.expect(f, wire, kFixed32, "Summary.Value");
      v.kind = TbValue::Kind::kScalar;
      v.simple_value = std::bit_cast<float>(uint32_t(r.fixed(4)));
    } else if (f == 4) {
      r.expect(f, wire, kBytes, "Summary.Value");
      decode_image(r.bytes(), v);
    } else {
      r.skip(wire);
    }
  }
  return v;
}

TbEvent decode_event(std::string_view s) {
  Reader r{s};
  TbEvent e;
  while (!r.done()) {
    int wire = 0;
    const int f = r.key(wire);
    if (f == 1) {
      r.expect(f, wire, kFixed64, "Event");
      e.wall_time = std::bit_cast<double>(r.fixed(8));
    } else if (f == 2) {
      r.expect(f, wire, kVarint, "Event");
      e.step = int64_t(r.varint());
    } else if (f == 3) {
      r.expect(f, wire, kBytes, "Event");
      e.file_version = std::string(r.bytes());
    } else if (f == 7) {
      r.expect(f, wire, kBytes, "Event");
      each_field(r.bytes(), 1, kVarint, "SessionLog",
                 [&](Reader& log) { e.session_start = log.varint() == kSessionStart; });
    } else if (f == 5) {
      r.expect(f, wire, kBytes, "Event");
      each_field(r.bytes(), 1, kBytes, "Summary",
                 [&](Reader& summary) { e.values.push_back(decode_value(summary.bytes())); });
    } else {
      r.skip(wire);
    }
  }
  return e;
}

}  // namespace

// ---- encoding ----

std::string encode_file_version_event(double wall_time) {
  std::string what;
  put_bytes(what, 3, kTbFileVersion);
  return event(wall_time, 0, what);
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;
  if (!tag.empty()) put_bytes(v, 1, tag);
  put_key(v, 2, kFixed32);  // oneof member: written even when 0
  put_fixed(v, std::bit_cast<uint32_t>(value), 4);
  return event(wall_time, step, summary_of(v));
}

std::string encode_image_event(double wall_time, int64_t step, const std::string& tag, int height, int width,
                               int channels, const std::string& png) {
  std::string image, v;
  put_int(image, 1, height);
  put_int(image, 2, width);
  put_int(image, 3, channels);
  if (!png.empty()) put_bytes(image, 4, png);
  if (!tag.empty()) put_bytes(v, 1, tag);
  put_bytes(v, 4, image);  // oneof member: written even when empty
  return event(wall_time, step, summary_of(v));
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string log, what;
  put_int(log, 1, int64_t(kSessionStart));
  put_bytes(what, 7, log);
  return event(wall_time, step, what);
}

// ---- writer ----

EventWriter::EventWriter(const std::string& dir) : out_(new_event_file(dir)) {
  out_.write(encode_file_version_event(unix_now()));
  out_.flush();
}

void EventWriter::scalar(const std::string& tag, int64_t step, double value) {
  VLM_ASSERT(!tag.empty(), "a TensorBoard scalar needs a tag");
  out_.write(encode_scalar_event(unix_now(), step, tag, float(value)));
}

void EventWriter::image(const std::string& tag, int64_t step, int height, int width, int channels,
                        const std::string& png) {
  VLM_ASSERT(!tag.empty() && height > 0 && width > 0 && channels >= 1 && channels <= 4 && !png.empty(),
             "TensorBoard image '", tag, "': ", height, "x", width, "x", channels, ", ", png.size(), " PNG bytes");
  out_.write(encode_image_event(unix_now(), step, tag, height, width, channels, png));
}

void EventWriter::session_start(int64_t step) { out_.write(encode_session_start_event(unix_now(), step)); }

void EventWriter::flush() { out_.flush(); }

// ---- reader ----

std::vector<TbEvent> read_tb_events(const std::string& path) {
  TfRecordReader in(path, "TensorBoard event file");
  std::vector<TbEvent> events;
  std::string data;
  while (true) {
    const int64_t index = in.index();
    if (!in.next(data)) break;
    try {
      events.push_back(decode_event(data));
    } catch (const Malformed& m) {
      throw UserError(cat(path, ": record ", index, " of the TensorBoard event file: not a valid Event message (",
                          m.what, ")"));
    }
  }
  return events;
}

}  // namespace vlm
