// RunLog (runlog/run_log.h).
#include "runlog/run_log.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "data/image/png.h"
#include "io/append_file.h"
#include "io/atomic_file.h"
#include "runlog/tb_events.h"

namespace vlm {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)t);
  return buf;
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // Linux: kilobytes
}

RunLog::RunLog(const std::string& dir, bool root, const std::string& config) : dir_(dir), root_(root) {
  if (!root_) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  VLM_REQUIRE(!ec, dir_, ": cannot create the run folder (", ec.message(), ")");
  write_file_atomic(dir_ + "/config.ini", config);
  tb_ = std::make_unique<EventWriter>(dir_);
}

RunLog::~RunLog() = default;

namespace {

// The step of a metrics.jsonl line ({"step":N,...}), or nullopt for a line this log did
// not write (kept as it is).
std::optional<int64_t> step_of(const std::string& line) {
  static constexpr std::string_view kPrefix = "{\"step\":";
  if (line.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  const char* p = line.c_str() + kPrefix.size();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(p, &end, 10);
  if (end == p || errno != 0 || (*end != ',' && *end != '}')) return std::nullopt;
  return int64_t(n);
}

bool is_val_or_eval(const std::string& line) {
  return line.find(",\"val_") != std::string::npos || line.find(",\"eval_") != std::string::npos;
}

}  // namespace

void RunLog::start_after(int64_t step, bool final_again) {
  if (!root_) return;
  VLM_ASSERT(!jsonl_, "RunLog::start_after twice");
  const std::string path = dir_ + "/metrics.jsonl";
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > 0 && step == 0) {
    const std::string earlier = dir_ + "/metrics.earlier.jsonl";
    std::filesystem::rename(path, earlier, ec);
    VLM_REQUIRE(!ec, path, ": cannot move an earlier run's lines to ", earlier, " (", ec.message(), ")");
    std::printf("%s: an earlier run's lines, moved to %s\n", path.c_str(), earlier.c_str());
  } else if (!ec && size > 0) {
    // Which lines stay, then (only when some go) the file rewritten with them. A final
    // line (final_again: the val and eval lines of `step`) goes, and its TensorBoard
    // entries stay where they are (tb_has_final_).
    const auto final_line = [&](const std::string& line) {
      return final_again && step_of(line) == step && is_val_or_eval(line);
    };
    const auto keep = [&](const std::string& line, bool whole) {
      const std::optional<int64_t> n = step_of(line);
      return whole && (!n || *n < step || (*n == step && !final_line(line)));
    };
    const auto each_line = [&](const auto& f) {
      std::ifstream in(path, std::ios::binary);
      VLM_REQUIRE(in, path, ": cannot open for reading");
      std::string line;
      while (std::getline(in, line)) f(line, !in.eof());  // no newline: cut by a crash
      VLM_REQUIRE(in.eof(), path, ": read failed");
    };
    bool rewrite = false;
    each_line([&](const std::string& line, bool whole) {
      rewrite = rewrite || !keep(line, whole);
      if (whole && final_line(line)) tb_has_final_ = step;
    });
    if (rewrite) {
      AtomicFile out(path);
      out.write("");  // the file, even when no line stays
      each_line([&](const std::string& line, bool whole) {
        if (keep(line, whole)) out.write(line + "\n");
      });
      out.commit();
    }
  }
  jsonl_ = std::make_unique<AppendFile>(path, false);
  tb_->session_start(step + 1);
  tb_->flush();
}

void RunLog::image(const std::string& tag, int64_t step, const std::vector<uint8_t>& rgb, int h, int w) {
  if (!root_ || step == tb_has_final_) return;  // pictures are the validation's
  tb_->image(tag, step, h, w, 3, encode_png(rgb.data(), h, w, 3));
  tb_->flush();
}

void RunLog::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                     const std::string& group) {
  if (!root_) return;
  VLM_ASSERT(jsonl_, "RunLog::scalars before start_after");
  if (group == "train" || step != tb_has_final_) {
    for (const auto& [k, v] : values) tb_->scalar(group + "/" + k, step, v);
    tb_->flush();
  }
  std::string line = "{\"step\":" + std::to_string(step);
  char buf[64];
  for (const auto& [key, v] : values) {
    const std::string k = group == "train" ? key : group + "_" + key;
    if (std::isfinite(v))
      std::snprintf(buf, sizeof buf, "%.17g", v);
    else
      std::snprintf(buf, sizeof buf, "\"%s\"", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    line += ",\"" + k + "\":" + buf;
  }
  line += "}\n";
  jsonl_->append(line);
}

double eta_seconds(const StepLine& s) {
  const double per_step = s.elapsed_s / double(std::max<int64_t>(1, s.step - s.first + 1));
  const int64_t end = s.last > 0 ? std::min(s.last, s.total) : s.total;
  return per_step * double(std::max<int64_t>(0, end - s.step));
}

void RunLog::step(const StepLine& s, bool print) {
  if (!root_) return;
  std::vector<std::pair<std::string, double>> v = {{"loss", s.loss},
                                                    {"lr", s.lr},
                                                    {"grad_norm", s.grad_norm},
                                                    {"tokens_per_s", s.tokens_per_s},
                                                    {"images_per_s", s.images_per_s},
                                                    {"visual_tokens_per_image", s.visual_per_image},
                                                    {"step_ms", s.step_s * 1e3}};
  if (s.mfu) v.push_back({"mfu", *s.mfu});
  scalars(s.step, v);
  if (!print) return;
  char mfu[32] = "";
  if (s.mfu) std::snprintf(mfu, sizeof mfu, " | MFU %.1f%%", 100.0 * *s.mfu);
  std::printf("step %lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | %.1f img/s | %.1f vis tok/img | "
              "%.0f ms/step | ETA %s | mem %.2f GiB%s\n",
              (long long)s.step, (long long)s.total, s.loss, s.lr, s.grad_norm, s.tokens_per_s, s.images_per_s,
              s.visual_per_image, s.step_s * 1e3, format_duration(eta_seconds(s)).c_str(),
              s.mem_bytes / double(1 << 30), mfu);
  std::fflush(stdout);
}

}  // namespace vlm
