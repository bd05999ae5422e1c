// The rows of an ablation (ablate/ablate_row.h).
#include "ablate/ablate_row.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "core/device_options.h"
#include "train/train_options.h"

namespace vlm {

std::string row_overrides(const RowSpec& r, const AblateOptions& a, const Config& base, int tp, int dp) {
  const ScorerOptions sc = read_scorer_options(base);
  double lr = read_train_options(base).optim.lr;
  if (!a.test_break.empty() && a.test_break == r.placement) lr *= 1.1;  // test only (docs/ablations.md)
  const OptionSet<ScorerOptions>& S = scorer_options();
  const OptionSet<TrainOptions>& T = train_options();
  const OptionSet<EvalOptions>& E = eval_options();
  const auto lod = [](auto field) { return at(&ScorerOptions::lod, field); };
  const auto quoted = [](const std::string& v) { return "\"" + v + "\""; };
  std::ostringstream os;
  os.precision(17);  // the learning rate reads back exactly
  const auto set = [&](const std::string& name, const auto& value) { os << name << " = " << value << "\n"; };
  set(device_options().name_of(&DeviceOptions::seed), r.seed);
  set(S.name_of(lod(&LodConfig::policy)), r.lod);
  set(S.name_of(lod(&LodConfig::fixed_budget)), r.budget);
  // lod.anneal trains from lod.max_tokens down to the budget: the row keeps that maximum.
  set(S.name_of(lod(&LodConfig::max_tokens)), sc.lod.anneal > 0 ? std::max(sc.lod.max_tokens, r.budget) : r.budget);
  set(S.name_of(lod(&LodConfig::min_tokens)), std::min(sc.lod.min_tokens, r.budget));
  set(S.name_of(at(&ScorerOptions::scorers, &ScorerConfig::placement)), r.placement);
  if (a.steps > 0) set(T.name_of(&TrainOptions::steps), a.steps);
  set(T.name_of(at(&TrainOptions::optim, &OptimOptions::lr)), lr);
  set(T.name_of(&TrainOptions::run), cat(r.placement, "-", r.lod, "-", r.budget, "-s", r.seed, "-tp", tp, "dp", dp));
  set(T.name_of(&TrainOptions::out_dir), quoted(a.out + "/runs"));
  set(T.name_of(&TrainOptions::ckpt_dir), quoted(""));
  set(T.name_of(&TrainOptions::save_every), -1);
  set(T.name_of(&TrainOptions::resume), quoted(""));
  set(T.name_of(&TrainOptions::eval_every), 0);
  set(E.name_of(&EvalOptions::split), quoted(""));
  set(E.name_of(&EvalOptions::pictures), 0);
  return os.str();
}

std::unique_ptr<Config> row_config(const Config& base, const std::string& overrides, const std::string& extra) {
  auto c = std::make_unique<Config>("vlm ablate");
  register_ablate_options(*c);
  c->read_ini_text(base.dump_ini(true), "the options of vlm ablate");
  c->read_ini_text(overrides, "the options of the ablation row");
  if (!extra.empty()) c->read_ini_text(extra, "the options of the shared prefix");
  return c;
}

// Skipped: the row's own options, the layout (parallel.*, scheduler.*), the run's
// bookkeeping and the ablate.* lists; kept: the ablate.* options that change a row's
// figures.
std::string fingerprint(const Config& base, int64_t steps) {
  const OptionSet<ScorerOptions>& S = scorer_options();
  const OptionSet<TrainOptions>& T = train_options();
  const OptionSet<DataOptions>& D = data_options();
  const OptionSet<EvalOptions>& E = eval_options();
  const OptionSet<AblateOptions>& A = ablate_options();
  const auto lod = [](auto field) { return at(&ScorerOptions::lod, field); };
  const std::vector<std::string> skip = {
      S.name_of(lod(&LodConfig::policy)),         S.name_of(lod(&LodConfig::fixed_budget)),
      S.name_of(lod(&LodConfig::min_tokens)),     S.name_of(lod(&LodConfig::max_tokens)),
      S.name_of(at(&ScorerOptions::scorers, &ScorerConfig::placement)),
      T.name_of(&TrainOptions::run),              T.name_of(&TrainOptions::out_dir),
      T.name_of(&TrainOptions::ckpt_dir),         T.name_of(&TrainOptions::resume),
      T.name_of(&TrainOptions::save_every),       T.name_of(&TrainOptions::keep_last),
      T.name_of(&TrainOptions::log_every),        T.name_of(&TrainOptions::eval_every),
      T.name_of(&TrainOptions::save_on_signal),   T.name_of(&TrainOptions::time_limit_min),
      D.name_of(&DataOptions::threads),           D.name_of(&DataOptions::prefetch),
      E.name_of(&EvalOptions::pictures),          E.name_of(&EvalOptions::split),
      T.name_of(&TrainOptions::steps),           device_options().name_of(&DeviceOptions::seed)};
  std::stringstream in(base.dump_ini(false));
  std::string line, sec, kept;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      sec = line.substr(1, line.size() - 2);
      continue;
    }
    const std::string name = (sec.empty() ? "" : sec + ".") + line.substr(0, line.find(" = "));
    const bool own = name == A.name_of(&AblateOptions::eval_samples) ||
                     name == A.name_of(&AblateOptions::test_break);  // they change the figures
    if ((sec == "ablate" && !own) || sec == "parallel" || sec == "scheduler" || name == "trace" ||
        std::find(skip.begin(), skip.end(), name) != skip.end())
      continue;
    kept += name + line.substr(line.find(" = ")) + "\n";
  }
  kept += T.name_of(&TrainOptions::steps) + " = " +
          std::to_string(steps > 0 ? steps : read_train_options(base).steps) + "\n";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : kept) h = (h ^ c) * 1099511628211ull;
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)h);
  return b;
}

}  // namespace vlm
