// `vlm ablate`: the rows, their checks, training, evaluation and resume (ablate/ablate.h).
#include "ablate/ablate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "ablate/ablate_charts.h"
#include "ablate/ablate_eval.h"
#include "ablate/ablate_prefix.h"
#include "ablate/ablate_row.h"
#include "ablate/ablate_table.h"
#include "base/error.h"
#include "base/file_read.h"
#include "base/options.h"
#include "base/stop_signal.h"
#include "core/device_options.h"
#include "data/storage/dataset.h"
#include "io/atomic_file.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"
#include "runlog/run_log.h"
#include "scorers/placement/placement.h"
#include "train/train_options.h"
#include "train/trainer.h"
#include "vision/siglip_config.h"

namespace vlm {

namespace {

using Clock = std::chrono::steady_clock;

// The mean of v over each of `parts` consecutive equal slices (entries < 0 left out; -1
// for a slice without any).
std::vector<double> parts_mean(const std::vector<double>& v, int parts) {
  std::vector<double> out;
  for (int k = 0; k < parts && !v.empty(); ++k) {
    const size_t a = v.size() * size_t(k) / size_t(parts), b = v.size() * size_t(k + 1) / size_t(parts);
    double sum = 0;
    int n = 0;
    for (size_t i = a; i < b; ++i)
      if (v[i] >= 0) sum += v[i], ++n;
    out.push_back(n ? sum / n : -1.0);
  }
  return out;
}

// What an ablation will do, decided and checked on every rank before any row trains.
struct AblationPlan {
  AblateOptions a;
  std::vector<RowSpec> todo;      // the rows to train, in table order
  std::vector<AblationRow> done;  // the rows already in <out>/ablation.csv
  std::string fingerprint, csv_path, eval_split;
  int max_new = 0;  // eval.max_new: tokens per answer
};

// Reads and checks the options, the dataset and every row's model (a UserError names the
// first problem), and the rows of an earlier run of this ablation in <out>.
AblationPlan plan_ablation(const Config& cfg, int tp, int dp) {
  AblationPlan P;
  AblateOptions& a = P.a;
  a = read_ablate_options(cfg);
  VLM_REQUIRE(!a.budgets.empty(), "--budgets: expected a comma list of token budgets (64,100,200,400)");
  VLM_REQUIRE(a.test_break.empty() || std::find(placement_names().begin(), placement_names().end(), a.test_break) !=
              placement_names().end(), "--ablate.test_break: '", a.test_break, "' is not a placement");
  for (size_t i = 0; i < a.budgets.size(); ++i)
    VLM_REQUIRE(std::find(a.budgets.begin(), a.budgets.begin() + i, a.budgets[i]) == a.budgets.begin() + i,
                "--budgets: ", a.budgets[i], " is given twice");
  // The scorer options of every row, by their one check (ScorerOptions::validate), which
  // names the lists the rows take them from (the LOD policy does not enter it).
  const OptionSet<ScorerOptions>& S = scorer_options();
  const auto lod = [&](auto field) { return S.name_of(at(&ScorerOptions::lod, field)); };
  const int G = resolve_vision_config(cfg).grid();
  for (const std::string& p : a.placements)
    for (int64_t b : a.budgets) {
      const ScorerOptions o = read_scorer_options(*row_config(cfg, row_overrides({p, a.lods[0], b}, a, cfg, tp, dp)));
      std::map<std::string, std::string> as{
          {S.name_of(at(&ScorerOptions::scorers, &ScorerConfig::placement)), "--placements"},
          {lod(&LodConfig::max_tokens), "--budgets"},
          {lod(&LodConfig::fixed_budget), "--budgets"}};
      if (o.lod.min_tokens == b) as[lod(&LodConfig::min_tokens)] = "--budgets";  // lowered to the budget (row_overrides)
      o.validate(G, tp, as);
    }
  const DataOptions data = read_data_options(cfg);
  VLM_REQUIRE(!data.path.empty(), "--data.path: an image-text HDF5 file with caption boxes is required "
              "(vlm data build --data.from scenes)");
  const EvalOptions ev = read_eval_options(cfg);
  P.eval_split = ev.split, P.max_new = ev.max_new;
  VLM_REQUIRE(!P.eval_split.empty(), "--eval.split: the split the rows are evaluated on is required (e.g. test)");
  DatasetReader ds(data.path);
  VLM_REQUIRE(ds.has_boxes(), data.path, ": no caption boxes (/captions/box); the ablation measures answers and "
              "relevance on a scenes dataset (vlm data build --data.from scenes)");
  VLM_REQUIRE(!ds.split_captions(P.eval_split).empty(), data.path, ": split '", P.eval_split,
              "' has no captions (--eval.split)");
  const std::shared_ptr<const Tokenizer> tok = find_tokenizer(data, ds);
  P.fingerprint = fingerprint(cfg, a.steps);
  P.csv_path = a.out + "/ablation.csv";
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  VLM_REQUIRE(!ec, a.out, ": cannot create the --out folder (", ec.message(), ")");
  if (std::filesystem::exists(P.csv_path)) {
    P.done = parse_ablation_csv(read_file_bounded(P.csv_path, uint64_t(64) << 20, "ablation table"), P.csv_path);
    for (const AblationRow& r : P.done)
      VLM_REQUIRE(r.config == P.fingerprint, P.csv_path, ": row '", r.key(), "' was made with other options (fingerprint ",
                  r.config, ", this run ", P.fingerprint, "); use another --out, or the options of that ablation");
  }
  for (const std::string& p : a.placements)
    for (const std::string& l : a.lods)
      for (int64_t b : a.budgets)
        for (int64_t seed : a.seeds) {
          const RowSpec r{p, l, b, seed};
          AblationRow k;
          k.placement = p, k.lod = l, k.budget = b, k.seed = seed, k.tp = tp, k.dp = dp;
          if (std::any_of(P.done.begin(), P.done.end(), [&](const AblationRow& d) { return d.key() == k.key(); }))
            continue;
          const auto row = row_config(cfg, row_overrides(r, a, cfg, tp, dp));
          const TrainOptions t = read_train_options(*row);
          t.check(dp);
          resolve_vlm_config(*row, t, *tok, tp);  // the model of the row (UserError naming its options)
          P.todo.push_back(r);
        }
  return P;
}

// The command line printed under the table: the lists as given.
std::string ablation_command(const AblateOptions& a, const Config& cfg) {
  const auto list = [](const auto& v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    return os.str();
  };
  std::ostringstream cmd;
  cmd << "vlm ablate --placements " << list(a.placements) << " --lod " << list(a.lods) << " --budgets "
      << list(a.budgets);
  if (a.seeds.size() > 1 || a.seeds.front() != int64_t(read_device_options(cfg).seed)) cmd << " --seeds " << list(a.seeds);
  if (a.steps > 0) cmd << " --steps " << a.steps;
  return cmd.str();
}

// Trains row `spec` (from the shared prefix's last step when it has one), answers
// eval.split with it, and returns its figures (the layout's maxima over the ranks).
AblationRow run_row(const Config& cfg, Runtime& rt, const AblationPlan& P, const RowSpec& spec,
                    SharedPrefixes& prefixes, const std::string& progress) {
  const AblateOptions& a = P.a;
  const int tp = rt.topology().tp(), dp = rt.topology().dp();
  const std::string own = row_overrides(spec, a, cfg, tp, dp);
  const int64_t shared = a.share_prefix ? shared_prefix_steps(*row_config(cfg, own)) : 0;
  const std::string key = cat(spec.placement, "-s", spec.seed, "-tp", tp, "dp", dp);
  const std::string resume =
      shared > 0 ? prefixes.resume_options(key, shared, [&](const std::string& x) { return row_config(cfg, own, x); })
                 : "";
  const auto row = row_config(cfg, own, resume);
  AblationRow r;
  r.placement = spec.placement, r.lod = spec.lod, r.budget = spec.budget, r.seed = spec.seed, r.tp = tp, r.dp = dp;
  r.config = P.fingerprint;
  if (rt.root()) {
    std::printf("vlm ablate: row %s: %s%s\n", progress.c_str(), r.key().c_str(),
                shared > 0 ? cat(" (from the shared prefix's step ", shared, ")").c_str() : "");
    std::fflush(stdout);
  }
  const auto t0 = Clock::now();
  Trainer trainer(*row, rt);
  const TrainReport rep = shared > 0 ? joined(prefixes.report(key), trainer.run()) : trainer.run();
  LoaderOptions lo = trainer.loader_options(P.eval_split);
  lo.limit = a.eval_samples;
  Loader eval(lo);
  Stream& s = rt.backend().default_stream();
  const AnswerReport ans = answer_accuracy(trainer.model(), s, rt.groups().dp(), eval, trainer.rule(),
                                           trainer.tokenizer(), P.max_new);
  const double mem = double(rep.peak_arena_bytes);
  const std::vector<double> mx =
      all_reduce_values(rt.groups().world(), s, {mem, rep.tp_bytes_per_step, rep.dp_bytes_per_step}, ReduceOp::Max);
  r.early_losses.assign(rep.losses.begin(), rep.losses.begin() + std::min<size_t>(rep.losses.size(), size_t(a.check_steps)));
  r.steps = rep.steps, r.tokens_per_image = ans.tokens_per_image();
  r.train_precision = parts_mean(rep.relevance_precision, kTrainingParts);
  r.scorer_grad = parts_mean(rep.scorer_grad_norms, kTrainingParts);
  r.first_loss = rep.first_loss, r.loss = rep.last_loss, r.val_loss = rep.val_loss;
  r.accuracy = ans.accuracy(), r.answered = ans.samples;
  r.precision = ans.precision(), r.precision_chance = ans.chance();
  r.detail = ans.detail.detail(), r.detailed_accuracy = ans.detailed_accuracy();
  r.step_ms = 1e3 * rep.step_seconds, r.images_per_s = rep.images_per_s;
  r.mem_mib = mx[0] / (1 << 20), r.tp_bytes = mx[1], r.dp_bytes = mx[2];
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace

int run_ablation(const Config& cfg, Runtime& rt) {
  const int tp = rt.topology().tp(), dp = rt.topology().dp();
  AblationPlan P;
  rt.on_every_rank("inputs", [&] { P = plan_ablation(cfg, tp, dp); });
  const AblateOptions& a = P.a;
  std::vector<AblationRow>& done = P.done;
  const size_t skipped = a.placements.size() * a.lods.size() * a.budgets.size() * a.seeds.size() - P.todo.size();
  const std::string command = ablation_command(a, cfg);
  if (rt.root()) {
    std::printf("vlm ablate: %zu rows to run, %zu already in %s | tp=%d dp=%d\n", P.todo.size(), skipped,
                P.csv_path.c_str(), tp, dp);
    std::fflush(stdout);
  }
  // The table, its pictures and the equal-loss check over `rows`; the number of mismatches.
  auto write_files = [&](std::vector<AblationRow>& rows, bool report) {
    fill_random_precision(rows);
    const std::vector<std::string> bad = check_placements(rows, a.tol);
    if (rt.root()) {
      write_file_atomic(a.out + "/ablation.csv", ablation_csv(rows));
      write_file_atomic(a.out + "/ablation.md", ablation_markdown(rows, command, a.tol));
      write_file_atomic(a.out + "/ablation.png", ablation_chart_png(rows));
      write_file_atomic(a.out + "/training.png", training_chart_png(rows));
      if (report)
        for (const std::string& b : bad) std::fprintf(stderr, "vlm ablate: %s\n", b.c_str());
    }
    return bad.size();
  };
  const auto t_all = Clock::now();
  SharedPrefixes prefixes(a.out, P.fingerprint, rt);
  for (size_t i = 0; i < P.todo.size(); ++i) {
    const std::string progress = cat(i + 1, "/", P.todo.size());
    AblationRow r;
    try {
      r = run_row(cfg, rt, P, P.todo[i], prefixes, progress);
    } catch (const Interrupted& e) {  // a signal (train.on_signal): the rows done stay in the table
      if (rt.root())
        std::printf("vlm ablate: %s in row %s; the %zu rows done are kept in %s/ablation.csv, and the same "
                    "command runs the others (this one from its start)\n",
                    e.what(), progress.c_str(), done.size(), a.out.c_str());
      throw;
    }
    done.push_back(r);
    write_files(done, false);
    if (rt.root()) {
      const double el = std::chrono::duration<double>(Clock::now() - t_all).count();
      const double eta = el / double(i + 1) * double(P.todo.size() - i - 1);
      std::printf("vlm ablate: row %s done in %s: %s | %.1f tok/img | val loss %.4f | accuracy %.1f%% | "
                  "relevance precision %.3f (chance %.3f) | detail %.3f | ETA %s\n",
                  progress.c_str(), format_duration(r.seconds).c_str(), r.key().c_str(), r.tokens_per_image,
                  r.val_loss, 100.0 * r.accuracy, r.precision, r.precision_chance, r.detail, format_duration(eta).c_str());
      std::fflush(stdout);
    }
  }
  const size_t bad = write_files(done, true);
  if (rt.root()) {
    std::printf("vlm ablate: %zu rows in %s/ablation.{csv,md,png}%s\n", done.size(), a.out.c_str(),
                bad ? " | placements with unequal losses: see stderr and the loss_check column" : "");
    std::fflush(stdout);
  }
  return bad ? 1 : 0;
}

}  // namespace vlm
