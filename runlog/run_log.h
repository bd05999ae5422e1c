// RunLog: what a training run reports, on world rank 0 only (other ranks hold an inert
// log): the progress line every train.log_every steps, and the files of the run folder
// <train.out_dir>/<train.run>/ (docs/training.md, "What a run prints and writes"):
//   config.ini      every option of the run (written whole under a temporary name, then
//                   renamed: io/atomic_file.h)
//   metrics.jsonl   one JSON object per line: {"step":N,"tag":value,...}; appended (a
//                   resumed run continues it: start_after), each line written whole or not at all
//                   (io/append_file.h), so a crash loses at most the line in flight and a
//                   full disk ends the run with "<file>: write failed (...)" and the file
//                   as it was before that line
//   events.out.tfevents.*  the same scalars for TensorBoard (runlog/tb_events.h), under
//                   "<group>/<tag>" (group train, val or eval), and the relevance
//                   pictures as images; flushed with every JSONL line
// Progress line: "step 120/1000 | loss 1.2345 | lr 9.5e-04 | gnorm 0.812 | 1234 tok/s |
// 45.6 img/s | 37.2 vis tok/img | 181 ms/step | ETA 2m39s | mem 1.23 GiB | MFU 12.3%"
// (memory: the peak resident set on CPU, the peak device memory on GPU; MFU: world rank
// 0's, train/mfu.h, only when a peak is known: on a GPU of the table or with
// train.peak_tflops; metrics.jsonl and TensorBoard then log it as "mfu", a fraction).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vlm {

class AppendFile;
class EventWriter;

struct StepLine {
  int64_t step = 0, total = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double step_s = 0, elapsed_s = 0;  // this step; since this process's first step began
  double tokens_per_s = 0, images_per_s = 0, visual_per_image = 0;
  double mem_bytes = 0;  // peak RSS on CPU, peak device arena bytes on a GPU
  std::optional<double> mfu;  // a fraction; none when no peak is known (train/mfu.h)
  int64_t first = 1;          // this process's first step (after a checkpoint's when resumed)
  int64_t last = 0;           // the step this process stops after (train.stop_after), 0 = total
};

// "2m39s", "1h02m", "45s".
std::string format_duration(double seconds);
// The time left: the mean time of this process's steps so far times the steps to the
// last this process runs (`last`, else `total`).
double eta_seconds(const StepLine& s);
// Peak resident set size of this process in bytes (getrusage).
double peak_rss_bytes();

class RunLog {
 public:
  // root: whether this rank writes (world rank 0). config: the dump of config.ini.
  RunLog(const std::string& dir, bool root, const std::string& config);
  ~RunLog();
  bool root() const { return root_; }
  const std::string& dir() const { return dir_; }

  // Where this process's steps begin: after `step`, its checkpoint's, or 0 for a fresh
  // start. The folder then shows one history, the one that led to this run's weights:
  //  - a resume runs the steps after its checkpoint again, so metrics.jsonl keeps its
  //    lines of steps up to `step` and drops the later ones (an earlier attempt's, and a
  //    line left partial by a crash); with `final_again` (no step left: the final
  //    validation and evaluation run again) it drops the val and eval lines of `step`
  //    too. The event file gets a SessionLog START at step + 1 (runlog/tb_events.h);
  //    the val and eval scalars and pictures of a `step` whose lines were dropped are
  //    already in it (written with them), so they go to metrics.jsonl only.
  //  - a fresh start moves an earlier run's metrics.jsonl to metrics.earlier.jsonl
  //    (replacing one there) and starts TensorBoard's history anew (START at step 1).
  // The kept lines are rewritten under a temporary name and renamed (io/atomic_file.h).
  void start_after(int64_t step, bool final_again);

  // Prints the progress line (rank 0) when print, and always appends the scalars.
  void step(const StepLine& s, bool print);
  // One metrics.jsonl line {"step":step, tag:value...} (tag prefixed "<group>_" outside
  // the train group), and the TensorBoard scalars "<group>/<tag>".
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
               const std::string& group = "train");
  // A TensorBoard image (packed RGB rows [h, w, 3]).
  void image(const std::string& tag, int64_t step, const std::vector<uint8_t>& rgb, int h, int w);

 private:
  std::string dir_;
  bool root_;
  std::unique_ptr<AppendFile> jsonl_;
  std::unique_ptr<EventWriter> tb_;
  int64_t tb_has_final_ = -1;  // start_after: the step whose val/eval entries the event file holds
};

}  // namespace vlm
