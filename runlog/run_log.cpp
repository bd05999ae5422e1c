// RunLog (runlog/run_log.h).
#include "runlog/run_log.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

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
  jsonl_ = std::make_unique<AppendFile>(dir_ + "/metrics.jsonl", false);
  tb_ = std::make_unique<EventWriter>(dir_);
}

RunLog::~RunLog() = default;

void RunLog::image(const std::string& tag, int64_t step, const std::vector<uint8_t>& rgb, int h, int w) {
  if (!root_) return;
  tb_->image(tag, step, h, w, 3, encode_png(rgb.data(), h, w, 3));
  tb_->flush();
}

void RunLog::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                     const std::string& group) {
  if (!root_) return;
  for (const auto& [k, v] : values) tb_->scalar(group + "/" + k, step, v);
  tb_->flush();
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
