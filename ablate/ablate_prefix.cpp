// The shared prefix of ablation rows (ablate/ablate_prefix.h).
#include "ablate/ablate_prefix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "ablate/ablate_table.h"
#include "base/config.h"
#include "base/error.h"
#include "base/file_read.h"
#include "checkpoint/checkpoint.h"
#include "io/atomic_file.h"
#include "parallel/runtime.h"
#include "scorers/options.h"
#include "train/train_options.h"
#include "vision/siglip_config.h"

namespace vlm {

int64_t shared_prefix_steps(const Config& row) {
  const LodConfig lod = read_scorer_options(row).lod;
  const int64_t steps = read_train_options(row).steps;
  const int G = resolve_vision_config(row).grid();
  if (lod.anneal <= 0 || lod.anneal_from <= 0 || lod.fixed_budget <= 0 || steps <= 0 ||
      lod.max_tokens != int64_t(G) * G)
    return 0;
  // LodConfig::step_at: the budget is lod.max_tokens up to step max(1, anneal_from x steps).
  const auto last_full = int64_t(std::floor(std::max(1.0, lod.anneal_from * double(steps))));
  for (int64_t s = 1; s <= last_full; ++s)  // the rule as step_at applies it, not a copy of it
    if (lod.step_at(s, steps).budget != lod.max_tokens) return 0;
  return last_full < steps ? last_full : 0;
}

TrainReport joined(const TrainReport& prefix, const TrainReport& rest) {
  TrainReport r = rest;
  const auto append = [](std::vector<double> a, const std::vector<double>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  r.first_loss = prefix.first_loss;
  r.losses = append(prefix.losses, rest.losses);
  r.relevance_precision = append(prefix.relevance_precision, rest.relevance_precision);
  r.scorer_grad_norms = append(prefix.scorer_grad_norms, rest.scorer_grad_norms);
  const double np = double(prefix.losses.size()), nr = double(rest.losses.size()), n = std::max(1.0, np + nr);
  const double tp = prefix.train_seconds, tr = rest.train_seconds, t = tp + tr;
  const auto per_step = [&](double a, double b) { return (a * np + b * nr) / n; };
  const auto per_second = [&](double a, double b) { return t > 0 ? (a * tp + b * tr) / t : b; };
  r.train_seconds = t;
  r.step_seconds = t / n;
  r.images_per_s = per_second(prefix.images_per_s, rest.images_per_s);
  r.tokens_per_s = per_second(prefix.tokens_per_s, rest.tokens_per_s);
  r.loader_stall = per_second(prefix.loader_stall, rest.loader_stall);
  r.visual_tokens_per_image = per_step(prefix.visual_tokens_per_image, rest.visual_tokens_per_image);
  r.tp_bytes_per_step = per_step(prefix.tp_bytes_per_step, rest.tp_bytes_per_step);
  r.dp_bytes_per_step = per_step(prefix.dp_bytes_per_step, rest.dp_bytes_per_step);
  r.peak_arena_bytes = std::max(prefix.peak_arena_bytes, rest.peak_arena_bytes);
  return r;
}

// report.txt: one "name value" line per figure; a series is one field (ablate_table.h).
void SharedPrefixes::store(const std::string& key, int64_t steps) const {
  const TrainReport& r = done_.at(key);
  std::ostringstream os;
  os.precision(17);
  os << "fingerprint " << fingerprint_ << "\nsteps " << steps << "\nfirst_loss " << r.first_loss
     << "\ntrain_seconds " << r.train_seconds << "\nimages_per_s " << r.images_per_s << "\ntokens_per_s "
     << r.tokens_per_s << "\nloader_stall " << r.loader_stall << "\nvisual_tokens_per_image "
     << r.visual_tokens_per_image << "\ntp_bytes_per_step " << r.tp_bytes_per_step << "\ndp_bytes_per_step "
     << r.dp_bytes_per_step << "\npeak_arena_bytes " << r.peak_arena_bytes << "\nlosses " << series_text(r.losses, 17)
     << "\nrelevance_precision " << series_text(r.relevance_precision, 17) << "\nscorer_grad_norms "
     << series_text(r.scorer_grad_norms, 17) << "\n";
  write_file_atomic(dir(key) + "/report.txt", os.str());
}

bool SharedPrefixes::load(const std::string& key, int64_t steps) {
  const std::string path = dir(key) + "/report.txt";
  if (!std::filesystem::exists(path) || !std::filesystem::exists(dir(key) + "/" + kLatestName)) return false;
  std::map<std::string, std::string> f;
  std::stringstream in(read_file_bounded(path, uint64_t(64) << 20, "shared prefix report"));
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) f[line.substr(0, sp)] = line.substr(sp + 1);
  }
  if (f["fingerprint"] != fingerprint_ || f["steps"] != std::to_string(steps)) return false;
  TrainReport r;
  try {
    r.steps = steps;
    r.first_loss = std::stod(f.at("first_loss")), r.train_seconds = std::stod(f.at("train_seconds"));
    r.images_per_s = std::stod(f.at("images_per_s")), r.tokens_per_s = std::stod(f.at("tokens_per_s"));
    r.loader_stall = std::stod(f.at("loader_stall"));
    r.visual_tokens_per_image = std::stod(f.at("visual_tokens_per_image"));
    r.tp_bytes_per_step = std::stod(f.at("tp_bytes_per_step"));
    r.dp_bytes_per_step = std::stod(f.at("dp_bytes_per_step"));
    r.peak_arena_bytes = size_t(std::stoull(f.at("peak_arena_bytes")));
    r.losses = series_values(f.at("losses"), path, "losses");
    r.relevance_precision = series_values(f.at("relevance_precision"), path, "relevance_precision");
    r.scorer_grad_norms = series_values(f.at("scorer_grad_norms"), path, "scorer_grad_norms");
  } catch (const std::exception&) {
    return false;  // not a report this code wrote: the prefix is trained again
  }
  if (r.losses.size() != size_t(steps)) return false;
  done_[key] = std::move(r);
  return true;
}

std::string SharedPrefixes::resume_options(const std::string& key, int64_t steps, const MakeConfig& make) {
  const std::string d = dir(key);
  if (!done_.count(key) && load(key, steps) && rt_.root()) {
    std::printf("vlm ablate: shared prefix %s: steps 1..%lld, reused from %s\n", key.c_str(), (long long)steps,
                d.c_str());
    std::fflush(stdout);
  }
  if (!done_.count(key)) {
    if (rt_.root()) {
      std::printf("vlm ablate: shared prefix %s: steps 1..%lld, trained once for the rows of this placement and "
                  "seed (checkpoint in %s)\n",
                  key.c_str(), (long long)steps, d.c_str());
      std::fflush(stdout);
    }
    const OptionSet<TrainOptions>& T = train_options();
    const std::string extra = cat(T.name_of(&TrainOptions::run), " = prefix-", key, "\n",
                                  T.name_of(&TrainOptions::ckpt_dir), " = \"", d, "\"\n",
                                  T.name_of(&TrainOptions::save_every), " = 0\n",
                                  T.name_of(&TrainOptions::keep_last), " = 1\n",
                                  T.name_of(&TrainOptions::stop_after), " = ", steps, "\n");
    const std::unique_ptr<Config> cfg = make(extra);
    Trainer trainer(*cfg, rt_);
    TrainReport rep = trainer.run();
    VLM_ASSERT(rep.steps == steps, "the shared prefix ", key, " ended at step ", rep.steps, ", expected ", steps);
    done_[key] = std::move(rep);
    if (rt_.root()) store(key, steps);
  }
  return cat(train_options().name_of(&TrainOptions::resume), " = \"", d, "\"\n");
}

}  // namespace vlm
