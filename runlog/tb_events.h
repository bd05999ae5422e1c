// TensorBoard event files: the writer the trainer logs scalars and images with, and a
// reader for tests and tools. The files and their layout: docs/training.md,
// "TensorBoard".
// A file is a TFRecord file (runlog/tfrecord.h) of serialized `tensorflow.Event` protobuf
// messages, encoded here by hand (no protobuf dependency), with proto3's rules (fields
// at their default value are left out, oneof members always written):
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; Summary summary = 5;
//                          SessionLog session_log = 7; } }
//   SessionLog { Status status = 1; }             // START = 1
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; oneof value { float simple_value = 2; Image image = 4; } }
//   Image   { int32 height = 1; int32 width = 2; int32 colorspace = 3;
//             bytes encoded_image_string = 4; }    // colorspace = channels 1..4
// Invariants: the first record of every file is the file_version event "brain.Event:2";
// each later record holds one Summary.Value, or is a SessionLog START at step s: on it
// TensorBoard drops the points of step s and later read before it, from every file of
// the run folder (a run that resumes from a checkpoint of step s - 1 writes it, as
// PyTorch's SummaryWriter(purge_step=s) does; runlog/run_log.h). A TensorBoard file is append-only and read
// while it grows, so it is written in place (runlog/tfrecord.h, io/append_file.h; no
// AtomicFile): records reach the disk on flush() (the trainer flushes once per log
// period), a flush that fails (a full disk) is undone and ends the run with a UserError
// naming the file, and a run killed during a flush leaves whole records plus at most one
// partial record that TensorBoard ignores (read_tb_events refuses it: it checks whole files).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runlog/tfrecord.h"

namespace vlm {

inline constexpr const char* kTbFileVersion = "brain.Event:2";

// The serialized Event messages EventWriter writes (public for the golden tests).
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
std::string encode_image_event(double wall_time, int64_t step, const std::string& tag, int height, int width,
                               int channels, const std::string& png);
std::string encode_session_start_event(double wall_time, int64_t step);

// Writes one event file into a run folder. Not thread-safe: one thread logs through it.
class EventWriter {
 public:
  // Creates `dir` (and its parents) and the file
  //   <dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>
  // (n counts the writers of this process; the pid and n, as PyTorch's SummaryWriter
  // adds them, keep two writers apart within one second), then writes the file_version
  // record and flushes. UserError naming the folder or file when it cannot be created.
  explicit EventWriter(const std::string& dir);
  // One scalar; TensorBoard stores simple_value as float, so `value` is rounded to float.
  void scalar(const std::string& tag, int64_t step, double value);
  // One image: `png` holds the PNG bytes of a height x width image with `channels`
  // channels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA), e.g. from encode_png
  // (data/image/png.h).
  void image(const std::string& tag, int64_t step, int height, int width, int channels, const std::string& png);
  // A SessionLog START at `step`: TensorBoard drops the points of `step` and later that
  // it read before this record (an earlier attempt's, which this run writes again).
  void session_start(int64_t step);
  // Pushes the buffered records to the file (UserError naming it if that fails).
  void flush();
  const std::string& path() const { return out_.path(); }

 private:
  TfRecordWriter out_;
};

// ---- reading (tests, tools) ----

// One Summary.Value.
struct TbValue {
  enum class Kind { kScalar, kImage, kOther };  // kOther: histogram, tensor, audio, ...
  Kind kind = Kind::kOther;
  std::string tag;
  float simple_value = 0;  // kScalar
  int image_height = 0, image_width = 0, image_colorspace = 0;  // kImage
  std::string image_png;                                         // kImage: the encoded bytes
};

// One record.
struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;     // non-empty in a file_version event
  bool session_start = false;   // a SessionLog START event
  std::vector<TbValue> values;  // the summary's values (empty for other events)
};

// Every record of an event file, decoded (unknown fields are skipped, so files of other
// writers read too). UserError naming the file and the record index when a checksum does
// not match, the file is truncated or a record is not a well-formed Event.
std::vector<TbEvent> read_tb_events(const std::string& path);

}  // namespace vlm
