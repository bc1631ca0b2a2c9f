// I-JEPA's multi-block masks (objectives/jepa/multiblock_mask.h) against the reference logic run in Python
// with the same seeds (tests/fixtures/jepa/masks.json from tools/reference/make_jepa_mask_fixtures.py): the
// same block sizes and the same patch indices, exactly; plus the rules every batch obeys.
#include <gtest/gtest.h>

#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "dew/objectives/jepa/multiblock_mask.h"
#include "test_support.h"

namespace {

using dew::objectives::jepa::MultiBlockMaskConfig;
using dew::objectives::jepa::sample_block_masks;

MultiBlockMaskConfig config_of(const nlohmann::json& s) {
  MultiBlockMaskConfig c;
  c.num_targets = s.at("npred");
  c.num_context = s.at("nenc");
  c.target_scale = {s.at("pred_scale")[0], s.at("pred_scale")[1]};
  c.context_scale = {s.at("enc_scale")[0], s.at("enc_scale")[1]};
  c.aspect = {s.at("aspect")[0], s.at("aspect")[1]};
  c.min_keep = s.at("min_keep");
  c.allow_overlap = s.at("allow_overlap");
  return c;
}

std::vector<std::vector<std::vector<std::int64_t>>> as_lists(const at::Tensor& t) {
  std::vector<std::vector<std::vector<std::int64_t>>> out(static_cast<std::size_t>(t.size(0)));
  for (std::int64_t b = 0; b < t.size(0); ++b) {
    for (std::int64_t m = 0; m < t.size(1); ++m) {
      auto row = t[b][m].contiguous();
      out[static_cast<std::size_t>(b)].emplace_back(row.data_ptr<std::int64_t>(), row.data_ptr<std::int64_t>() + row.numel());
    }
  }
  return out;
}

TEST(JepaMasks, MatchTheReferenceSamplerIndexForIndex) {
  const auto cases = nlohmann::json::parse(dew::test::read_text(dew::test::fixtures() / "jepa" / "masks.json"));
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    const auto& s = c.at("settings");
    auto generator = at::make_generator<at::CPUGeneratorImpl>(c.at("seed").get<std::uint64_t>());
    const auto masks = sample_block_masks(config_of(s), s.at("height"), s.at("width"), s.at("batch"), generator);
    const std::string where = "seed " + c.at("seed").dump() + " on " + s.at("height").dump() + "x" + s.at("width").dump();
    EXPECT_EQ(masks.target_height, c.at("pred_size")[0].get<std::int64_t>()) << where;
    EXPECT_EQ(masks.target_width, c.at("pred_size")[1].get<std::int64_t>()) << where;
    EXPECT_EQ(masks.context_height, c.at("enc_size")[0].get<std::int64_t>()) << where;
    EXPECT_EQ(as_lists(masks.targets), c.at("targets").get<std::vector<std::vector<std::vector<std::int64_t>>>>()) << where;
    EXPECT_EQ(as_lists(masks.context), c.at("context").get<std::vector<std::vector<std::vector<std::int64_t>>>>()) << where;
  }
}

// The rules, on seeds the fixture does not hold: increasing indices on the grid, rectangular batches, more
// than min_keep patches, and (without overlap, before any relaxation) context disjoint from the targets.
TEST(JepaMasks, ObeyTheRulesOnOtherSeeds) {
  MultiBlockMaskConfig config;
  std::int64_t disjoint = 0, images = 0;
  for (std::uint64_t seed = 100; seed < 140; ++seed) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto m = sample_block_masks(config, 14, 14, 8, generator);
    ASSERT_EQ(m.targets.dim(), 3);
    EXPECT_EQ(m.targets.size(1), 4);
    EXPECT_GT(m.context.size(2), config.min_keep);
    EXPECT_LE(m.targets.size(2), m.target_height * m.target_width);
    EXPECT_GE(m.targets.min().item<std::int64_t>(), 0);
    EXPECT_LT(m.targets.max().item<std::int64_t>(), 14 * 14);
    EXPECT_TRUE(at::equal(m.context, std::get<0>(m.context.sort(-1))));
    for (std::int64_t b = 0; b < 8; ++b, ++images) {
      const auto t = m.targets[b].flatten().contiguous();
      std::set<std::int64_t> target(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
      const auto ctx = m.context[b].flatten().contiguous();
      bool overlap = false;
      for (std::int64_t i = 0; i < ctx.numel(); ++i) overlap = overlap || target.count(ctx.data_ptr<std::int64_t>()[i]) > 0;
      disjoint += overlap ? 0 : 1;
    }
  }
  // Relaxation (dropping target exclusions after 20 failed draws) is rare on a 14x14 grid: almost all disjoint.
  EXPECT_GE(disjoint, images * 9 / 10) << disjoint << " of " << images;
}

TEST(JepaMasks, RefusesImpossibleSettings) {
  MultiBlockMaskConfig config;
  config.min_keep = 20;  // 3x3 target blocks on 7x7 can never keep 21 patches: refused, not an endless loop
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  EXPECT_NE(dew::test::error_of([&] { sample_block_masks(config, 7, 7, 2, generator); }).find("jepa.min_keep = 20"), std::string::npos);
  config = {};
  config.num_targets = 0;
  EXPECT_NE(dew::test::error_of([&] { sample_block_masks(config, 7, 7, 2, generator); }).find("jepa.num_targets"), std::string::npos);
  config = {};
  config.target_scale = {0.3, 0.2};
  EXPECT_NE(dew::test::error_of([&] { sample_block_masks(config, 7, 7, 2, generator); }).find("jepa.target_scale"), std::string::npos);
}

}  // namespace
