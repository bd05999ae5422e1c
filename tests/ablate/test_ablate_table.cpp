// The pieces of `vlm ablate` on hand-made inputs: the relevance and detail precision of
// hand-made maps and allocations (ablate/ablate_eval.h); the summary over seeds, the
// equal-loss check and the CSV round trip on hand-made rows (ablate/ablate_table.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ablate/ablate_eval.h"
#include "ablate/ablate_table.h"
#include "base/error.h"
#include "scorers/lod_allocator.h"

namespace vlm {
namespace {

// summarize on hand-made rows: groups over seeds, means, standard errors by the formula.
TEST(AblateTable, SummaryOverSeeds) {
  std::vector<AblationRow> rows;
  for (int s = 0; s < 3; ++s) {
    AblationRow r;
    r.placement = "replicated", r.lod = "relevance", r.budget = 31, r.seed = s, r.steps = 10, r.answered = 1000;
    r.accuracy = 0.5 + 0.1 * s, r.precision = 0.2 + 0.1 * s, r.tokens_per_image = 31;
    r.detail = 0.6 + 0.2 * s, r.detailed_accuracy = s == 1 ? -1.0 : 0.9 + 0.05 * s;  // seed 1: none detailed
    r.train_precision = {0.1 * s, -1.0};
    rows.push_back(r);
  }
  AblationRow u = rows[0];
  u.lod = "uniform", u.accuracy = 0.3;
  rows.push_back(u);
  const std::vector<AblationSummary> m = summarize(rows);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].seeds, 3);
  EXPECT_NEAR(m[0].accuracy, 0.6, 1e-12);
  EXPECT_NEAR(m[0].accuracy_se, std::sqrt(0.01 / 3 + 0.6 * 0.4 / 1000), 1e-12);  // var_seeds = 0.01
  EXPECT_NEAR(m[0].precision_se, std::sqrt(0.01 / 3), 1e-12);
  EXPECT_NEAR(m[0].detail, 0.8, 1e-12);
  EXPECT_NEAR(m[0].detail_se, std::sqrt(0.04 / 3), 1e-12);
  EXPECT_NEAR(m[0].detailed_accuracy, (0.9 + 1.0) / 2, 1e-12);  // over the seeds that have one
  ASSERT_EQ(m[0].train_precision.size(), 2u);
  EXPECT_NEAR(m[0].train_precision[0], 0.1, 1e-12);
  EXPECT_EQ(m[0].train_precision[1], -1.0);  // no measured part
  EXPECT_EQ(m[1].seeds, 1);
  EXPECT_NEAR(m[1].accuracy_se, std::sqrt(0.3 * 0.7 / 1000), 1e-12);  // one seed: the questions only
}

// Hand-made maps on a 4x4 grid of a 16-pixel image (cells of 4 pixels, centres at 2, 6,
// 10, 14): the box [4, 12) x [4, 12) holds the centres of the 4 middle cells.
TEST(AblateEval, RelevancePrecisionOfHandMadeMaps) {
  const float box[4] = {4, 4, 12, 12};
  std::vector<float> inside(16, 0.f), outside(16, 0.f);
  for (int c : {5, 6, 9, 10}) inside[size_t(c)] = 1.f;
  for (int c : {0, 3, 12, 15}) outside[size_t(c)] = 1.f;
  AnswerReport a, b, c;
  add_relevance_precision(inside.data(), 4, 16, box, a);
  add_relevance_precision(outside.data(), 4, 16, box, b);
  EXPECT_EQ(a.boxed, 1);
  EXPECT_EQ(a.top_cells, 4.0);
  EXPECT_EQ(a.precision(), 1.0);
  EXPECT_EQ(b.precision(), 0.0);
  EXPECT_EQ(a.chance(), 4.0 / 16.0);
  // Equal relevance everywhere: the first 4 cells in raster order (row 0), none inside.
  std::vector<float> flat(16, 0.5f);
  add_relevance_precision(flat.data(), 4, 16, box, c);
  EXPECT_EQ(c.precision(), 0.0);
  // A box without a cell centre is not counted.
  const float tiny[4] = {3, 3, 5, 5};
  AnswerReport d;
  add_relevance_precision(inside.data(), 4, 16, tiny, d);
  EXPECT_EQ(d.boxed, 0);
  EXPECT_EQ(d.top_cells, 0.0);
}

// Detail precision on the same 4x4 grid, regions of 2x2 cells (quadrants; finest level
// 1): hand-made levels, then an allocation of the LOD allocator itself.
TEST(AblateEval, DetailPrecisionOfHandMadeAllocations) {
  const float middle[4] = {4, 4, 12, 12};  // cells 5, 6, 9, 10: one in each quadrant
  const float corner[4] = {0, 0, 8, 8};    // cells 0, 1, 4, 5: the first quadrant
  ImageLod one, all;
  one.level = {1, 0, 0, 0}, all.level = {1, 1, 1, 1};
  one.per_level = {3, 1}, all.per_level = {0, 4};  // levels 0 and 1
  DetailPrecision a, b, c;
  EXPECT_FALSE(add_detail_precision(one, 4, 2, 16, middle, a));
  EXPECT_EQ(a.box_cells, 4.0);
  EXPECT_EQ(a.detail(), 0.25);
  EXPECT_TRUE(add_detail_precision(all, 4, 2, 16, middle, b));
  EXPECT_EQ(b.detail(), 1.0);
  EXPECT_TRUE(add_detail_precision(one, 4, 2, 16, corner, c));  // adds up over images
  EXPECT_FALSE(add_detail_precision(one, 4, 2, 16, middle, c));
  EXPECT_EQ(c.detail(), 5.0 / 8.0);
  const float tiny[4] = {3, 3, 5, 5};  // no cell centre: not counted
  DetailPrecision d;
  EXPECT_FALSE(add_detail_precision(all, 4, 2, 16, tiny, d));
  EXPECT_EQ(d.box_cells, 0.0);
  // The allocator at budget 7 in depth order details the quadrant of the most relevant
  // cell (15: the last quadrant) and nothing else.
  LodConfig cfg;
  cfg.region = 2, cfg.min_tokens = 4, cfg.max_tokens = 16, cfg.fixed_budget = 7, cfg.order = LodOrder::Depth;
  std::vector<float> r(16, 0.1f);
  r[15] = 0.9f;
  const ImageLod lod = LodAllocator(cfg, 4).allocate(r.data(), 0);
  const float last[4] = {12, 12, 16, 16}, first[4] = {0, 0, 4, 4};
  DetailPrecision e, f;
  EXPECT_TRUE(add_detail_precision(lod, 4, 2, 16, last, e));
  EXPECT_FALSE(add_detail_precision(lod, 4, 2, 16, first, f));
  EXPECT_EQ(e.detail(), 1.0);
  EXPECT_EQ(f.detail(), 0.0);
}

AblationRow row(const std::string& placement, int64_t budget, std::vector<double> early) {
  AblationRow r;
  r.placement = placement, r.lod = "relevance", r.budget = budget, r.steps = 100, r.config = "f";
  r.first_loss = early.front(), r.loss = early.back(), r.val_loss = 1.5;
  r.early_losses = std::move(early);
  return r;
}

// The reference is the replicated row wherever it stands; groups are per budget; the
// early losses decide (at 1e-5 relative), the final validation loss only informs.
TEST(AblateTable, EqualLossCheckOnHandMadeRows) {
  std::vector<AblationRow> rows = {row("dedicated", 8, {2.0, 1.9, 1.8}), row("replicated", 8, {2.0, 1.9, 1.8}),
                                   row("batch-split", 8, {2.0, 1.9 * (1 + 2e-5), 1.8}),
                                   row("tp2", 8, {2.0, 1.9 * (1 + 5e-6), 1.8}), row("dedicated", 16, {3.0, 2.0})};
  rows[0].val_loss = 1.6;
  const std::vector<std::string> bad = check_placements(rows, 1e-5);
  EXPECT_EQ(rows[1].loss_check, "ref");
  EXPECT_EQ(rows[0].loss_check, "ok");
  EXPECT_NEAR(rows[0].val_diff, 0.1 / 1.6, 1e-12);
  EXPECT_EQ(rows[2].loss_check, "MISMATCH");
  EXPECT_NEAR(rows[2].early_diff, 2e-5 / (1 + 2e-5), 1e-12);
  EXPECT_EQ(rows[3].loss_check, "ok");
  EXPECT_EQ(rows[4].loss_check, "-");  // alone at its budget
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("batch-split relevance 8 seed=0 tp=1 dp=1 against replicated relevance 8 seed=0 tp=1 dp=1: step 2"),
            std::string::npos) << bad[0];
  // The CSV round trip keeps every figure; a foreign header or a short line is refused.
  const std::string csv = ablation_csv(rows);
  std::vector<AblationRow> back = parse_ablation_csv(csv, "t.csv");
  ASSERT_EQ(back.size(), rows.size());
  EXPECT_EQ(back[2].early_losses, rows[2].early_losses);
  EXPECT_EQ(back[0].val_loss, rows[0].val_loss);
  check_placements(back, 1e-5);  // the derived columns are recomputed, never read
  EXPECT_EQ(ablation_csv(back), csv);
  EXPECT_THROW(parse_ablation_csv("a,b\n", "t.csv"), UserError);
  EXPECT_THROW(parse_ablation_csv(csv.substr(0, csv.find('\n') + 1) + "replicated,relevance\n", "t.csv"), UserError);
  // A figure the writer cannot have written (an edited row) is refused, naming it.
  const auto edited = [&](double AblationRow::*column, double v) {
    std::vector<AblationRow> one = {rows[0]};
    one[0].*column = v;
    try {
      parse_ablation_csv(ablation_csv(one), "t.csv");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(edited(&AblationRow::accuracy, 7), "t.csv:2: column accuracy = '7' is outside [0, 1]");
  EXPECT_EQ(edited(&AblationRow::tokens_per_image, -5), "t.csv:2: column tokens_per_image = '-5' is outside [0, inf]");
  EXPECT_EQ(edited(&AblationRow::precision, 1e308), "t.csv:2: column precision = '1e+308' is outside [0, 1]");
  EXPECT_EQ(edited(&AblationRow::mem_mib, -1), "t.csv:2: column mem_mib_per_rank = '-1' is outside [0, inf]");
  EXPECT_EQ(edited(&AblationRow::val_loss, -0.5), "t.csv:2: column val_loss = '-0.5' is negative");
  EXPECT_EQ(edited(&AblationRow::detailed_accuracy, 0.75), "<accepted>");
}

}  // namespace
}  // namespace vlm
