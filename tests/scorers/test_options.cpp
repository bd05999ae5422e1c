// The scorer and LOD options: defaults, reading, and every refused combination as one
// line naming the option (the command exits 2 with it, docs/errors.md).
#include <gtest/gtest.h>

#include <map>

#include "scorers/options.h"
#include "tests/support/errors.h"

namespace vlm::test {
namespace {

ScorerOptions read(const std::vector<std::string>& args) {
  Config cfg;
  register_scorer_options(cfg);
  parse_args(cfg, args);
  return read_scorer_options(cfg);
}

std::string refused(const std::vector<std::string>& args, int G = 32, int tp = 1) {
  return error_of([&] { read(args).validate(G, tp); });
}

void expect_one_line(const std::string& msg, const std::string& option) {
  EXPECT_NE(msg.find(option), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ScorerOptions, DefaultsAndReading) {
  ScorerOptions o = read({});
  EXPECT_EQ(o.lod.region, 4);
  EXPECT_EQ(o.lod.min_tokens, 64);
  EXPECT_EQ(o.lod.max_tokens, 400);
  EXPECT_EQ(o.lod.fixed_budget, 0);
  EXPECT_EQ(o.lod.levels(), 3);
  EXPECT_EQ(o.scorers.placement, "replicated");
  EXPECT_EQ(o.lod.order, LodOrder::Rounds);
  EXPECT_EQ(o.lod.gate, LodGate::Token);
  EXPECT_EQ(o.lod.explore, 0.0);
  EXPECT_EQ(o.lod.anneal, 0.0);
  EXPECT_NO_THROW(o.validate(32, 8));
  o = read({"--lod.order", "depth", "--lod.gate", "detail", "--lod.explore", "0.5", "--lod.explore_until", "0.25",
            "--lod.anneal", "0.5", "--lod.budget", "100"});
  EXPECT_EQ(o.lod.order, LodOrder::Depth);
  EXPECT_EQ(o.lod.gate, LodGate::Detail);
  EXPECT_EQ(o.lod.explore, 0.5);
  EXPECT_EQ(o.lod.explore_until, 0.25);
  EXPECT_EQ(o.lod.anneal, 0.5);
  EXPECT_NO_THROW(o.validate(32, 1));
  o = read({"--lod.budget", "100", "--lod.policy", "random", "--scorers.placement", "batch-split", "--scorers.k", "5",
            "--scorers.hidden", "16", "--lod.region", "8", "--lod.min_tokens", "16"});
  EXPECT_EQ(o.lod.fixed_budget, 100);
  EXPECT_EQ(o.lod.policy, LodPolicy::Random);
  EXPECT_EQ(o.scorers.placement, "batch-split");
  EXPECT_EQ(o.scorers.k, 5);
  EXPECT_EQ(o.scorers.hidden, 16);
  EXPECT_EQ(o.lod.levels(), 4);
  EXPECT_NO_THROW(o.validate(32, 2));
}

TEST(ScorerOptions, BadCombinationsNameTheOption) {
  expect_one_line(refused({"--lod.region", "3"}), "lod.region=3");
  expect_one_line(refused({"--lod.region", "8"}, 28), "lod.region=8 does not divide the grid G = 28");
  expect_one_line(refused({"--lod.region", "64", "--lod.min_tokens", "1", "--lod.max_tokens", "1"}, 32),
                  "lod.region=64 does not divide the grid G = 32 = vision.image_size / vision.patch");
  expect_one_line(refused({"--lod.min_tokens", "300", "--lod.max_tokens", "200"}), "lod.min_tokens=300 is above lod.max_tokens=200");
  expect_one_line(refused({"--lod.min_tokens", "32"}), "lod.min_tokens=32 is below the number of regions");
  expect_one_line(refused({"--lod.max_tokens", "2000"}), "lod.max_tokens=2000 is above G*G = 1024");
  expect_one_line(refused({"--lod.budget", "50"}), "lod.budget=50");
  expect_one_line(error_of([] { read({"--lod.budget", "lots"}); }), "lod.budget=lots");
  expect_one_line(refused({"--scorers.k", "4"}), "scorers.k=4");
  expect_one_line(refused({"--lod.anneal", "0.5"}), "lod.anneal=0.5 anneals towards a fixed budget");
  expect_one_line(error_of([] { read({"--lod.explore", "1.5"}); }), "lod.explore");
  expect_one_line(error_of([] { read({"--lod.order", "sideways"}); }), "lod.order");
  expect_one_line(error_of([] { read({"--lod.gate", "open"}); }), "lod.gate");
  expect_one_line(refused({"--lod.gate", "soft"}), "lod.max_tokens=400 with lod.gate=soft: expected G*G = 1024");
  EXPECT_EQ(refused({"--lod.gate", "soft", "--lod.max_tokens", "1024"}), "");
  expect_one_line(error_of([] { read({"--lod.soft_temperature", "0"}); }), "lod.soft_temperature");
  expect_one_line(refused({"--scorers.placement", "tp2"}, 32, 3), "scorers.placement=tp2 needs an even parallel.tp");
  EXPECT_EQ(refused({"--scorers.placement", "tp2"}, 32, 4), "");
  expect_one_line(refused({"--scorers.placement", "tp2", "--scorers.hidden", "5"}, 32, 4), "scorers.hidden=5");
  expect_one_line(error_of([] { read({"--scorers.placement", "everywhere"}); }), "scorers.placement");
}

// A caller that set values from lists of its own (vlm ablate) has them named by the list;
// the other options keep their own names.
TEST(ScorerOptions, RefusedValuesNamedByTheCallersList) {
  const std::map<std::string, std::string> as{{"lod.max_tokens", "--budgets"}, {"scorers.placement", "--placements"}};
  auto refused_as = [&](const std::vector<std::string>& args, int tp = 1) {
    return error_of([&] { read(args).validate(32, tp, as); });
  };
  expect_one_line(refused_as({"--lod.max_tokens", "2000"}), "--budgets: 2000 is above G*G = 1024");
  expect_one_line(refused_as({"--scorers.placement", "tp2"}, 3), "--placements: tp2 needs an even parallel.tp");
  expect_one_line(refused_as({"--lod.min_tokens", "32"}), "lod.min_tokens=32 is below the number of regions");
  EXPECT_EQ(refused_as({"--lod.max_tokens", "1024"}), "");
}

}  // namespace
}  // namespace vlm::test
