// `vlm ablate` as a user runs it (the binary, real mpirun), on a tiny scenes dataset built
// by `vlm data build --data.from scenes` and configs/tiny.cfg (a 4x4 grid of 2x2-cell
// regions: 4 regions, 4..16 visual tokens):
//  - every placement at TP = 2 x two LOD policies x three budgets: ablation.csv has the
//    columns and one row per combination, ablation.md the table, ablation.png decodes;
//    the visual tokens per image follow the LOD rule (4 + 3 per upgraded region); rows
//    that differ only by placement have equal losses at every step (each row's
//    metrics.jsonl) to 1e-5 relative, and the tool marks them ok;
//  - a rerun with the same --out trains nothing and leaves ablation.csv byte-identical;
//  - --seeds: one row per seed (other losses), the summary's mean and standard error
//    over seeds and questions equal to the formula on the CSV's rows; every row carries
//    its training curves (relevance precision, scorer gradient norm: 10 parts each);
//  - a placement broken on purpose (--ablate.test_break) is flagged (exit status 1, a
//    line on stderr, MISMATCH in both tables); resuming that folder with other options
//    is refused;
//  - under lod.anneal_from, the rows' shared full-detail prefix is trained once per
//    placement and seed and every row resumes from it: every figure of ablation.csv but
//    the times equals that of the rows trained from step 1 (--ablate.share_prefix=false),
//    also for rows added by a later command, which reuses the prefix;
//  - bad arguments exit 2 with one line;
//  - detail precision: 0 at the smallest budget, 1 at G*G (where the accuracy on the
//    detailed questions is the accuracy).
// The pieces on hand-made rows and maps: tests/ablate/test_ablate_table.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ablate/ablate_table.h"
#include "data/image/image_pipeline.h"
#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;
using Result = test::CommandResult;

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b)); }

class AblateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("ablate_cli");
    for (const std::string& c :
         {vlm() + " data build --data.from scenes --data.limit 40 --data.scene_size 96 --data.stamp_fraction 0 "
                  "--data.val_fraction 0.2 --data.test_fraction 0.2 --data.out " + dir_ + "/s.h5",
          vlm() + " data tokenizer --data.train " + dir_ + "/s.h5 --data.vocab 300 --data.out " + dir_ + "/tok.json"}) {
      const Result r = test::run_command(c, dir_);
      ASSERT_EQ(r.status, 0) << c << "\n" << r.err;
    }
  }
  static std::string ablate(const std::string& out, const std::string& extra) {
    return vlm() + " ablate --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + dir_ +
           "/s.h5 --data.tokenizer " + dir_ + "/tok.json --eval.split test --eval.max_new 4 --ablate.eval_samples 16 "
           "--steps 3 --out " + dir_ + "/" + out + " " + extra;
  }
  static inline std::string dir_;
};

TEST_F(AblateCli, PlacementsGiveEqualLossesAndRerunsSkipFinishedRows) {
  const std::string cmd = mpirun(2) + ablate("all", "--tp 2 --placements replicated,batch-split,dedicated,tp2 "
                                                    "--lod relevance,random --budgets 4,8,16");
  const Result r = test::run_command(cmd, dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string out = dir_ + "/all";
  const auto rows = test::read_csv(out + "/ablation.csv");
  ASSERT_EQ(rows.size(), 24u);
  for (const char* c : {"placement", "lod", "budget", "tp", "dp", "steps", "tokens_per_image", "first_loss", "loss",
                        "val_loss", "accuracy", "answered", "precision", "precision_random", "precision_chance",
                        "detail", "detailed_accuracy", "step_ms", "images_per_s", "mem_mib_per_rank", "tp_bytes_per_step", "dp_bytes_per_step",
                        "loss_check", "early_diff", "val_diff", "early_losses"})
    EXPECT_TRUE(rows[0].count(c)) << "column " << c;
  std::map<std::string, const std::map<std::string, std::string>*> ref;  // lod/budget -> replicated row
  for (const auto& row : rows)
    if (row.at("placement") == "replicated") ref[row.at("lod") + "/" + row.at("budget")] = &row;
  ASSERT_EQ(ref.size(), 6u);
  for (const auto& row : rows) {
    const std::string key = row.at("placement") + " " + row.at("lod") + " " + row.at("budget");
    const int64_t B = std::stoll(row.at("budget"));
    EXPECT_EQ(std::stod(row.at("tokens_per_image")), double(4 + 3 * ((B - 4) / 3))) << key;
    EXPECT_EQ(row.at("tp"), "2");
    EXPECT_EQ(row.at("steps"), "3");
    EXPECT_EQ(row.at("answered"), "16") << key;
    const double acc = std::stod(row.at("accuracy")), prec = std::stod(row.at("precision"));
    EXPECT_TRUE(acc >= 0 && acc <= 1 && prec >= 0 && prec <= 1) << key;
    EXPECT_FALSE(row.at("precision_random").empty()) << key;
    // Detail precision: nothing at full detail at the smallest budget, everything at G*G.
    const double detail = std::stod(row.at("detail"));
    if (B == 4) {
      EXPECT_EQ(detail, 0.0) << key;
      EXPECT_EQ(row.at("detailed_accuracy"), "") << key;
    }
    if (B == 16) {
      EXPECT_EQ(detail, 1.0) << key;
      EXPECT_EQ(row.at("detailed_accuracy"), row.at("accuracy")) << key;
    }
    EXPECT_TRUE(detail >= 0 && detail <= 1) << key;
    const auto& R = *ref.at(row.at("lod") + "/" + row.at("budget"));
    EXPECT_EQ(row.at("loss_check"), &row == &R ? "ref" : "ok") << key;
    for (const char* c : {"first_loss", "loss", "val_loss"})
      EXPECT_LE(rel(std::stod(row.at(c)), std::stod(R.at(c))), 1e-5) << key << " " << c;
    const auto run = [&](const std::map<std::string, std::string>& x) {
      return out + "/runs/" + x.at("placement") + "-" + x.at("lod") + "-" + x.at("budget") + "-s1-tp2dp1/metrics.jsonl";
    };
    const std::vector<double> a = test::jsonl_values(run(row), "loss"), b = test::jsonl_values(run(R), "loss");
    ASSERT_EQ(a.size(), b.size()) << key;
    ASSERT_GE(a.size(), 3u) << key;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(rel(a[i], b[i]), 1e-5) << key << " loss " << i;
    const std::vector<std::string> early = test::split(row.at("early_losses"), ';');  // the check's steps
    ASSERT_EQ(early.size(), a.size()) << key;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(rel(std::stod(early[i]), a[i]), 1e-8) << key << " step " << i;
    EXPECT_EQ(row.at("seed"), "1");  // tiny.cfg's
    EXPECT_EQ(test::split(row.at("train_precision"), ';').size(), size_t(kTrainingParts)) << key;
    EXPECT_EQ(test::split(row.at("scorer_grad"), ';').size(), size_t(kTrainingParts)) << key;
  }
  const std::string md = test::read_file(out + "/ablation.md");
  EXPECT_EQ(md.find("MISMATCH"), std::string::npos);
  size_t table = 0;
  for (const std::string& l : test::split(md, '\n')) table += l.rfind("| ", 0) == 0;
  EXPECT_EQ(table, 50u);  // the header and 24 rows, then the summary over seeds (one seed each)
  const std::string png = test::read_file(out + "/ablation.png");
  const RgbImage img = decode_rgb(reinterpret_cast<const uint8_t*>(png.data()), png.size());
  ASSERT_FALSE(img.empty());
  EXPECT_EQ(img.width, 720);
  EXPECT_EQ(img.height, 480);

  // The same command again, with the options of a stop (a preempted ablation goes on
  // with them; they change no row): nothing to train, the table unchanged.
  const std::string csv = test::read_file(out + "/ablation.csv");
  const Result again = test::run_command(cmd + " --train.time_limit 600 --train.on_signal exit", dir_);
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("0 rows to run, 24 already in"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("vlm train:"), std::string::npos) << again.out;
  EXPECT_EQ(test::read_file(out + "/ablation.csv"), csv);
}

TEST_F(AblateCli, BrokenPlacementIsFlagged) {
  const Result r = test::run_command(
      ablate("broken", "--placements replicated,batch-split --lod relevance --budgets 8 --ablate.test_break batch-split"),
      dir_);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("vlm ablate: loss mismatch: batch-split relevance 8 seed=1 tp=1 dp=1"), std::string::npos) << r.err;
  const auto rows = test::read_csv(dir_ + "/broken/ablation.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("loss_check"), "ref");
  EXPECT_EQ(rows[1].at("loss_check"), "MISMATCH");
  EXPECT_NE(test::read_file(dir_ + "/broken/ablation.md").find("**MISMATCH**"), std::string::npos);
  // Resuming that folder with other options is refused.
  test::expect_one_error_line(
      test::run_command(ablate("broken", "--placements replicated --lod uniform --budgets 8 --train.lr 1e-3"), dir_),
      "vlm ablate", "was made with other options");
}

TEST_F(AblateCli, SeedsGiveRowsAndASummaryWithStandardErrors) {
  const Result r = test::run_command(ablate("seeds", "--placements replicated --lod relevance --budgets 8 --seeds 1,2"),
                                     dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto rows = test::read_csv(dir_ + "/seeds/ablation.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("seed"), "1");
  EXPECT_EQ(rows[1].at("seed"), "2");
  EXPECT_NE(rows[0].at("first_loss"), rows[1].at("first_loss"));  // another initialisation
  // The summary: mean accuracy and sqrt(var_seeds / S + p (1 - p) / n).
  const double a = std::stod(rows[0].at("accuracy")), b = std::stod(rows[1].at("accuracy"));
  const double p = (a + b) / 2, var = (a - p) * (a - p) + (b - p) * (b - p);  // sample variance, S - 1 = 1
  const double se = std::sqrt(var / 2 + p * (1 - p) / std::stod(rows[0].at("answered")));
  char want[64];
  std::snprintf(want, sizeof want, "| %.1f%% +- %.1f |", 100 * p, 100 * se);
  const std::string md = test::read_file(dir_ + "/seeds/ablation.md");
  EXPECT_NE(md.find("| replicated | relevance | 8 | 1 x 1 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find(want), std::string::npos) << want << "\n" << md;
  EXPECT_NE(md.find("--seeds 1,2"), std::string::npos) << md;
  for (const char* f : {"/seeds/ablation.png", "/seeds/training.png"}) {
    const std::string png = test::read_file(dir_ + f);
    EXPECT_FALSE(decode_rgb(reinterpret_cast<const uint8_t*>(png.data()), png.size()).empty()) << f;
  }
  test::expect_one_error_line(test::run_command(ablate("bad", "--seeds 1,x"), dir_), "vlm ablate",
                              "--seeds: 'x' is not a seed");
  test::expect_one_error_line(test::run_command(ablate("bad", "--seeds 3,3"), dir_), "vlm ablate",
                              "--seeds: 3 is given twice");
}

TEST_F(AblateCli, SharedPrefixGivesTheFiguresOfRowsTrainedFromTheStart) {
  const std::string rows = "--placements replicated,dedicated --lod relevance,uniform,random --steps 6 "
                           "--lod.anneal_from 0.5 --lod.anneal 0.75 --lod.explore 0.5 --lod.order depth "
                           "--lod.gate detail --lod.max_tokens 16";
  const Result whole = test::run_command(ablate("whole", rows + " --budgets 7,16 --ablate.share_prefix=false"), dir_);
  ASSERT_EQ(whole.status, 0) << whole.out << whole.err;
  EXPECT_EQ(whole.out.find("shared prefix"), std::string::npos) << whole.out;
  const auto count = [](const std::string& out, const std::string& what) {
    size_t n = 0;
    for (size_t p = out.find(what); p != std::string::npos; p = out.find(what, p + 1)) ++n;
    return n;
  };
  // Budget 7 first, then 16 added by a second command: its rows reuse the prefixes.
  const Result first = test::run_command(ablate("shared", rows + " --budgets 7"), dir_);
  ASSERT_EQ(first.status, 0) << first.out << first.err;
  EXPECT_EQ(count(first.out, "trained once"), 2u) << first.out;  // one prefix per placement
  EXPECT_EQ(count(first.out, "(from the shared prefix's step 3)"), 6u) << first.out;
  const Result second = test::run_command(ablate("shared", rows + " --budgets 7,16"), dir_);
  ASSERT_EQ(second.status, 0) << second.out << second.err;
  EXPECT_EQ(count(second.out, "trained once"), 0u) << second.out;
  EXPECT_EQ(count(second.out, "reused from"), 2u) << second.out;
  EXPECT_EQ(count(second.out, "(from the shared prefix's step 3)"), 6u) << second.out;
  const auto a = test::read_csv(dir_ + "/whole/ablation.csv"), b = test::read_csv(dir_ + "/shared/ablation.csv");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), a.size());
  const auto key = [](const std::map<std::string, std::string>& r) {
    return r.at("placement") + " " + r.at("lod") + " " + r.at("budget");
  };
  std::map<std::string, const std::map<std::string, std::string>*> by_key;
  for (const auto& r : b) by_key[key(r)] = &r;
  for (const auto& r : a) {
    ASSERT_TRUE(by_key.count(key(r))) << key(r);
    for (const auto& [column, value] : r) {
      if (column != "step_ms" && column != "images_per_s" && column != "seconds") {
        EXPECT_EQ(by_key.at(key(r))->at(column), value) << key(r) << " " << column;
      }
    }
  }
  // The rows' own losses (metrics.jsonl) are the steps after the prefix, equal to the whole row's.
  const std::vector<double> w = test::jsonl_values(dir_ + "/whole/runs/replicated-relevance-7-s1-tp1dp1/metrics.jsonl",
                                                   "loss"),
                            s = test::jsonl_values(dir_ + "/shared/runs/replicated-relevance-7-s1-tp1dp1/metrics.jsonl",
                                                   "loss");
  ASSERT_EQ(w.size(), 6u);
  ASSERT_EQ(s.size(), 3u);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], w[i + 3]) << "step " << i + 4;
}

TEST_F(AblateCli, BadArgumentsExitWithOneLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"--placements replicated,sideways", "--placements: 'sideways' is not one of replicated, batch-split"},
      {"--placements tp2", "--placements: tp2 needs an even parallel.tp (pairs of ranks), got parallel.tp=1"},
      {"--lod relevance,best", "--lod: 'best' is not one of"},
      {"--budgets 3", "--budgets: 3 is below the number of regions (G/R)^2 = (4/2)^2 = 4"},
      {"--budgets 8,17", "--budgets: 17 is above G*G = 16"},
      {"--budgets 8,10,8", "--budgets: 8 is given twice"},
      {"--ablate.test_break nowhere", "--ablate.test_break: 'nowhere' is not a placement"},
  };
  for (const auto& [args, what] : cases)
    test::expect_one_error_line(test::run_command(ablate("bad", args), dir_), "vlm ablate", what);
}

}  // namespace
}  // namespace vlm
