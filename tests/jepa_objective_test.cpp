// The I-JEPA objective (objectives/jepa/jepa_objective.h): the target encoder's EMA update against its
// formula, no gradient into the target, masks and target surviving a resume bit for bit, and diagnostics.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "dew/data/batch_source.h"
#include "dew/objectives/jepa/jepa_objective.h"
#include "dew/training/checkpoint.h"
#include "dew/training/trainer.h"
#include "test_support.h"
#include "training_test_support.h"

namespace {

using namespace dew::objectives::jepa;

dew::nn::vision::VisionTransformerConfig tiny() {
  dew::nn::vision::VisionTransformerConfig c;
  c.image_size = 16, c.patch_size = 2, c.dim = 16, c.depth = 1, c.heads = 2;  // an 8 x 8 patch grid
  c.predictor_dim = 8, c.predictor_depth = 1, c.predictor_heads = 2;
  return c;
}

// Random images addressed by position, so a resumed loader reads what an uninterrupted one would.
class RandomImages final : public dew::data::BatchSource {
 public:
  dew::data::Batch next_batch(std::int64_t rows) override {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(position_) + 11);
    position_ += rows;
    dew::data::Batch batch;
    batch.set("images", at::rand({rows, 1, 16, 16}, generator) * 2 - 1);
    return batch;
  }
  std::int64_t position() const override { return position_; }
  void set_position(std::int64_t position) override { position_ = position; }
  std::int64_t records() const override { return 1 << 20; }

 private:
  std::int64_t position_ = 0;
};

dew::data::Batch batch_of(std::int64_t rows) { return RandomImages().next_batch(rows); }

TEST(JepaObjective, TargetFollowsTheMomentumFormulaAndGetsNoGradient) {
  JepaObjectiveConfig config;
  config.momentum_start = 0.9, config.momentum_end = 1.0;
  JepaObjective objective(tiny(), config, 0);
  // Target starts as a copy of the encoder.
  auto& encoder = *objective.networks()->encoder;
  auto& target = *objective.target_encoder();
  for (std::size_t i = 0; i < encoder.parameters().size(); ++i) EXPECT_TRUE(at::equal(encoder.parameters()[i], target.parameters()[i]));

  auto loss = objective.loss(batch_of(4), 0);
  ASSERT_TRUE(std::isfinite(loss.sum.item<double>()));
  loss.sum.backward();
  for (const auto& p : target.named_parameters()) EXPECT_FALSE(p.value().grad().defined()) << p.key();
  for (const auto& p : objective.module().named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();

  // Move the encoder away, then one update at step 3 of 10: m = 0.9 + 0.1 * 3/10 = 0.93.
  {
    at::NoGradGuard no_grad;
    for (auto& p : encoder.parameters()) p.add_(0.5);
  }
  std::vector<at::Tensor> before;
  for (const auto& p : target.parameters()) before.push_back(p.detach().to(at::kDouble));
  EXPECT_DOUBLE_EQ(objective.momentum_at(3, 10), 0.93);
  EXPECT_DOUBLE_EQ(objective.momentum_at(30, 10), 1.0);  // held at the end after the ramp
  objective.after_step(3, 10);
  for (std::size_t i = 0; i < before.size(); ++i) {
    const auto want = 0.93 * before[i] + 0.07 * encoder.parameters()[i].detach().to(at::kDouble);
    // Two float32 roundings (the product, then the sum) on values of size ~1: 2^-23 relative, plus slack.
    EXPECT_LE((target.parameters()[i].to(at::kDouble) - want).abs().max().item<double>(), 4e-7 * (1 + want.abs().max().item<double>()));
  }
}

TEST(JepaObjective, ReportsCollapseDiagnosticsAndRefusesBadSettings) {
  JepaObjective objective(tiny(), {}, 0);
  auto stats = objective.evaluate(batch_of(8));
  EXPECT_GT(stats.mean("target_std"), 0.0);
  {
    // target_std is the batch standard deviation of each (patch, feature) of the layer-normed target
    // features, averaged: at::std's. Sums of 8 float32 terms, then a sqrt: within 1e-5 relative.
    at::NoGradGuard no_grad;
    auto features = objective.target_encoder()->forward(batch_of(8).get("images"));
    features = at::layer_norm(features, {features.size(-1)});
    const double want = features.std(0).mean().item<double>();
    EXPECT_NEAR(stats.mean("target_std"), want, 1e-5 * want);
  }
  EXPECT_GT(stats.mean("effective_rank"), 1.0);  // 8 different random images use more than one direction
  EXPECT_LE(stats.mean("effective_rank"), 8.0);  // at most the batch's (centred) rank
  EXPECT_EQ(stats.mean("loss"), objective.evaluate(batch_of(8)).mean("loss"));  // one fixed mask stream
  JepaObjectiveConfig bad;
  bad.loss = "cosine";
  EXPECT_NE(dew::test::error_of([&] { JepaObjective o(tiny(), bad, 0); }).find("jepa.loss"), std::string::npos);
  bad = {};
  bad.momentum_start = 1.5;
  EXPECT_NE(dew::test::error_of([&] { JepaObjective o(tiny(), bad, 0); }).find("jepa.momentum_start"), std::string::npos);
}

dew::training::TrainerConfig run_config(std::int64_t steps) {
  dew::training::TrainerConfig c;
  c.steps = steps;
  c.batch_size = 4;
  c.log_every = 1;
  c.eval_every = 0;
  c.checkpoint_every = 2;
  c.keep_checkpoints = 0;
  c.ema_decay = 0;
  c.device = "cpu";
  c.peak_flops = 1e9;
  return c;
}

void fit(JepaObjective& objective, const std::filesystem::path& run, std::int64_t steps) {
  RandomImages source;
  dew::training::OptimConfig optim{.name = "adamw", .learning_rate = 1e-3, .schedule = "constant", .warmup_steps = 0};
  dew::training::Trainer trainer(objective, optim, run_config(steps), run);
  trainer.set_output(nullptr);
  trainer.fit(source);
}

TEST(JepaObjective, ResumesBitForBitTargetAndMasksIncluded) {
  dew::test::SingleThreaded threads;
  dew::test::TempDir straight, stopped;
  // The ramp over a fixed 4 steps: the stopped run's first part (trainer.steps 2) must use the same momenta.
  JepaObjectiveConfig config;
  config.momentum_start = 0.9;
  config.momentum_steps = 4;
  JepaObjective a(tiny(), config, 0), b(tiny(), config, 0), c(tiny(), config, 0);
  fit(a, straight.path(), 4);
  fit(b, stopped.path(), 2);
  fit(c, stopped.path(), 4);  // a new objective resumed from step 2
  auto pa = a.module().named_parameters(), pc = c.module().named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(at::equal(p.value(), pc[p.key()])) << p.key();
  auto ta = a.target_encoder()->named_parameters(), tc = c.target_encoder()->named_parameters();
  for (const auto& p : ta) EXPECT_TRUE(at::equal(p.value(), tc[p.key()])) << p.key();
  // And the target did move: it is not the encoder after four steps of momentum 0.9..1.
  EXPECT_FALSE(at::equal(a.target_encoder()->parameters()[0], a.networks()->encoder->parameters()[0]));
}

}  // namespace
