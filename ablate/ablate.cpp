// `vlm ablate`: the rows, their checks, training, evaluation and resume (ablate/ablate.h).
#include "ablate/ablate.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "ablate/ablate_eval.h"
#include "ablate/ablate_prefix.h"
#include "ablate/ablate_table.h"
#include "base/error.h"
#include "base/file_read.h"
#include "base/options.h"
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

const std::vector<std::string> kPolicies = {"relevance", "uniform", "random"};

std::vector<std::string> names(const std::string& list, const std::string& option,
                               const std::vector<std::string>& known) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string w;
  while (std::getline(ss, w, ',')) {
    std::string all;
    for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
    VLM_REQUIRE(std::find(known.begin(), known.end(), w) != known.end(), "--", option, ": '", w,
                "' is not one of ", all);
    VLM_REQUIRE(std::find(out.begin(), out.end(), w) == out.end(), "--", option, ": '", w, "' is given twice");
    out.push_back(w);
  }
  VLM_REQUIRE(!out.empty(), "--", option, ": expected a comma list of ", known.front(), ", ...");
  return out;
}

struct RowSpec {
  std::string placement, lod;
  int64_t budget = 0, seed = 0;
};

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

std::vector<int64_t> seed_list(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string w;
  while (std::getline(ss, w, ',')) {
    int64_t v = -1;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    VLM_REQUIRE(ec == std::errc() && p == w.data() + w.size() && v >= 0, "--seeds: '", w,
                "' is not a seed (expected a comma list of integers >= 0)");
    VLM_REQUIRE(std::find(out.begin(), out.end(), v) == out.end(), "--seeds: ", v, " is given twice");
    out.push_back(v);
  }
  return out;
}

// The options a row sets (read after the base options, so they win), one
// "name = value" line each.
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

// The base options, then the row's, then `extra` (the shared prefix's, ablate/ablate_prefix.h).
std::unique_ptr<Config> row_config(const Config& base, const std::string& overrides, const std::string& extra = "") {
  auto c = std::make_unique<Config>("vlm ablate");
  register_ablate_options(*c);
  c->read_ini_text(base.dump_ini(true), "the options of vlm ablate");
  c->read_ini_text(overrides, "the options of the ablation row");
  if (!extra.empty()) c->read_ini_text(extra, "the options of the shared prefix");
  return c;
}

// Every option but those a row, the layout or the bookkeeping set: rows of one ablation
// share it (FNV-1a 64 of the filtered dump, hex).
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

}  // namespace

const OptionSet<AblateOptions>& ablate_options() {
  static const OptionSet<AblateOptions> set([](OptionSet<AblateOptions>& s) {
    using A = AblateOptions;
    std::string all;
    for (const std::string& p : placement_names()) all += (all.empty() ? "" : ", ") + p;
    s.option("ablate.placements", &A::placements, "comma list of scorer placements: " + all + " (tp2 needs parallel.tp=2)")
        .parse(placement_names().front(), [](const std::string& v) { return names(v, "placements", placement_names()); })
        .alias("placements");
    s.option("ablate.lod", &A::lods, "comma list of LOD policies: relevance, uniform, random")
        .parse("relevance,uniform,random", [](const std::string& v) { return names(v, "lod", kPolicies); })
        .alias("lod");
    s.option("ablate.budgets", &A::budgets,
             "visual tokens per image at most (each at least the number of regions, at most G*G)")
        .range(1, int64_t(1) << 30)
        .alias("budgets");
    s.option("ablate.seeds", &A::seeds, "comma list of run seeds: every row once per seed (empty = the option seed)")
        .parse("", [](const std::string& v) { return seed_list(v); })
        .alias("seeds");
    s.option("ablate.steps", &A::steps, "optimizer steps of every row (0 = train.steps / train.epochs)")
        .range(0, int64_t(1) << 40)
        .alias("steps");
    s.option("ablate.out", &A::out, "folder of ablation.csv/.md/.png and the rows' run folders (resumed)")
        .alias("out");
    s.option("ablate.tol", &A::tol, "relative tolerance of the equal losses of rows that differ only by placement")
        .range(0.0, 1.0);
    s.option("ablate.eval_samples", &A::eval_samples, "samples of eval.split answered per row (0 = the whole split)")
        .range(0, int64_t(1) << 40);
    s.option("ablate.share_prefix", &A::share_prefix,
             "train the steps that rows of one placement and seed share (lod.anneal_from at full detail) once, and "
             "resume every row from them (docs/ablations.md, \"Shared prefix\")");
    s.option("ablate.check_steps", &A::check_steps,
             "steps whose losses the equal-loss check compares (docs/ablations.md)")
        .range(1, 1 << 20);
    s.option("ablate.test_break", &A::test_break, "TEST ONLY: trains the rows of this placement with train.lr x 1.1, "
             "so that the equal-loss check must flag them");
  });
  return set;
}

void register_ablate_options(Config& cfg) {
  register_all_train_options(cfg);
  ablate_options().add_to(cfg);
}

AblateOptions read_ablate_options(const Config& cfg) {
  AblateOptions a = ablate_options().read(cfg);
  if (a.seeds.empty()) a.seeds = {int64_t(read_device_options(cfg).seed)};
  return a;
}

int run_ablation(const Config& cfg, Runtime& rt) {
  const int tp = rt.topology().tp(), dp = rt.topology().dp();
  AblateOptions a;
  std::vector<RowSpec> todo;
  std::vector<AblationRow> done;
  std::string fp, csv_path, eval_split;
  int max_new = 24;
  rt.on_every_rank("inputs", [&] {
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
    eval_split = ev.split, max_new = ev.max_new;
    VLM_REQUIRE(!eval_split.empty(), "--eval.split: the split the rows are evaluated on is required (e.g. test)");
    DatasetReader ds(data.path);
    VLM_REQUIRE(ds.has_boxes(), data.path, ": no caption boxes (/captions/box); the ablation measures answers and "
                "relevance on a scenes dataset (vlm data build --data.from scenes)");
    VLM_REQUIRE(!ds.split_captions(eval_split).empty(), data.path, ": split '", eval_split,
                "' has no captions (--eval.split)");
    const std::shared_ptr<const Tokenizer> tok = find_tokenizer(data, ds);
    fp = fingerprint(cfg, a.steps);
    csv_path = a.out + "/ablation.csv";
    std::error_code ec;
    std::filesystem::create_directories(a.out, ec);
    VLM_REQUIRE(!ec, a.out, ": cannot create the --out folder (", ec.message(), ")");
    if (std::filesystem::exists(csv_path)) {
      done = parse_ablation_csv(read_file_bounded(csv_path, uint64_t(64) << 20, "ablation table"), csv_path);
      for (const AblationRow& r : done)
        VLM_REQUIRE(r.config == fp, csv_path, ": row '", r.key(), "' was made with other options (fingerprint ",
                    r.config, ", this run ", fp, "); use another --out, or the options of that ablation");
    }
    for (const std::string& p : a.placements)
      for (const std::string& l : a.lods)
        for (int64_t b : a.budgets)
          for (int64_t seed : a.seeds) {
            const RowSpec r{p, l, b, seed};
            AblationRow k;
            k.placement = p, k.lod = l, k.budget = b, k.seed = seed, k.tp = tp, k.dp = dp;
            if (std::any_of(done.begin(), done.end(), [&](const AblationRow& d) { return d.key() == k.key(); }))
              continue;
            const auto row = row_config(cfg, row_overrides(r, a, cfg, tp, dp));
            const TrainOptions t = read_train_options(*row);
            t.check(dp);
            resolve_vlm_config(*row, t, *tok, tp);  // the model of the row (UserError naming its options)
            todo.push_back(r);
          }
  });
  const size_t skipped = a.placements.size() * a.lods.size() * a.budgets.size() * a.seeds.size() - todo.size();
  std::ostringstream cmd;  // the command line of the table (the lists as given)
  const auto list = [](const auto& v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    return os.str();
  };
  cmd << "vlm ablate --placements " << list(a.placements) << " --lod " << list(a.lods) << " --budgets "
      << list(a.budgets);
  if (a.seeds.size() > 1 || a.seeds.front() != int64_t(read_device_options(cfg).seed)) cmd << " --seeds " << list(a.seeds);
  if (a.steps > 0) cmd << " --steps " << a.steps;
  const std::string command = cmd.str();
  if (rt.root()) {
    std::printf("vlm ablate: %zu rows to run, %zu already in %s | tp=%d dp=%d\n", todo.size(), skipped,
                csv_path.c_str(), tp, dp);
    std::fflush(stdout);
  }
  Stream& s = rt.backend().default_stream();
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
  SharedPrefixes prefixes(a.out, fp, rt);
  for (size_t i = 0; i < todo.size(); ++i) {
    const RowSpec& spec = todo[i];
    const std::string own = row_overrides(spec, a, cfg, tp, dp);
    const int64_t shared = a.share_prefix ? shared_prefix_steps(*row_config(cfg, own)) : 0;
    const std::string key = cat(spec.placement, "-s", spec.seed, "-tp", tp, "dp", dp);
    const std::string resume =
        shared > 0 ? prefixes.resume_options(key, shared, [&](const std::string& x) { return row_config(cfg, own, x); })
                   : "";
    const auto row = row_config(cfg, own, resume);
    AblationRow r;
    r.placement = spec.placement, r.lod = spec.lod, r.budget = spec.budget, r.seed = spec.seed, r.tp = tp, r.dp = dp;
    r.config = fp;
    if (rt.root()) {
      std::printf("vlm ablate: row %zu/%zu: %s%s\n", i + 1, todo.size(), r.key().c_str(),
                  shared > 0 ? cat(" (from the shared prefix's step ", shared, ")").c_str() : "");
      std::fflush(stdout);
    }
    const auto t0 = Clock::now();
    Trainer trainer(*row, rt);
    const TrainReport rep = shared > 0 ? joined(prefixes.report(key), trainer.run()) : trainer.run();
    LoaderOptions lo = trainer.loader_options(eval_split);
    lo.limit = a.eval_samples;
    Loader eval(lo);
    const AnswerReport ans = answer_accuracy(trainer.model(), s, rt.groups().dp(), eval, trainer.rule(),
                                             trainer.tokenizer(), max_new);
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
    done.push_back(r);
    write_files(done, false);
    if (rt.root()) {
      const double el = std::chrono::duration<double>(Clock::now() - t_all).count();
      const double eta = el / double(i + 1) * double(todo.size() - i - 1);
      std::printf("vlm ablate: row %zu/%zu done in %s: %s | %.1f tok/img | val loss %.4f | accuracy %.1f%% | "
                  "relevance precision %.3f (chance %.3f) | detail %.3f | ETA %s\n",
                  i + 1, todo.size(), format_duration(r.seconds).c_str(), r.key().c_str(), r.tokens_per_image,
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
