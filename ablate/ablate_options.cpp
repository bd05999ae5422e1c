// The ablate.* options (ablate/ablate_options.h): their declaration, registration and
// reading.
#include "ablate/ablate_options.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "base/error.h"
#include "core/device_options.h"
#include "scorers/placement/placement.h"
#include "train/train_options.h"

namespace vlm {

namespace {

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

}  // namespace vlm
