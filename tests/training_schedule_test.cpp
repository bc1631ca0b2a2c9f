// Learning-rate schedules, global-norm clipping and the EMA, with hand-computed numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "dew/core/error.h"
#include "dew/training/ema.h"
#include "dew/training/grad_clip.h"
#include "dew/training/lr_schedule.h"

namespace {
using namespace dew::training;

TEST(LrSchedule, WarmupThenCosine) {
  OptimConfig c{.learning_rate = 1.0, .schedule = "cosine", .warmup_steps = 2, .final_lr_fraction = 0.1};
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 0, 12), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 1, 12), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 2, 12), 1.0);  // first step after warmup at the peak
  // step 6: t = 4 / 9, lr = 0.1 + 0.9 * (1 + cos(80 degrees)) / 2
  EXPECT_NEAR(learning_rate_at(c, 6, 12), 0.1 + 0.9 * (1 + 0.17364817766693041) / 2, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 11, 12), 0.1, 1e-12);  // last step at the final fraction
  EXPECT_NEAR(learning_rate_at(c, 50, 12), 0.1, 1e-12);  // past the end stays there
}

TEST(LrSchedule, LinearAndConstant) {
  OptimConfig linear{.learning_rate = 2.0, .schedule = "linear", .warmup_steps = 0, .final_lr_fraction = 0.0};
  EXPECT_DOUBLE_EQ(learning_rate_at(linear, 0, 11), 2.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(linear, 5, 11), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(linear, 10, 11), 0.0);
  OptimConfig constant{.learning_rate = 3e-4, .schedule = "constant", .warmup_steps = 4};
  EXPECT_DOUBLE_EQ(learning_rate_at(constant, 0, 100), 0.75e-4);
  EXPECT_DOUBLE_EQ(learning_rate_at(constant, 99, 100), 3e-4);
}

// optim.decay_steps fixes the schedule's length: a run of 20 steps with decay_steps 10 follows the 10-step
// schedule, then stays at the final rate, so extending trainer.steps does not change the steps already taken.
TEST(LrSchedule, DecayStepsFixesTheScheduleLength) {
  OptimConfig c{.learning_rate = 1.0, .schedule = "cosine", .warmup_steps = 2, .final_lr_fraction = 0.1};
  c.decay_steps = 10;
  EXPECT_EQ(c.schedule_steps(20), 10);
  EXPECT_EQ(c.schedule_steps(5), 10);
  for (std::int64_t step = 0; step < 10; ++step) {
    EXPECT_DOUBLE_EQ(learning_rate_at(c, step, c.schedule_steps(20)), learning_rate_at(c, step, 10)) << step;
  }
  EXPECT_NEAR(learning_rate_at(c, 9, c.schedule_steps(20)), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 15, c.schedule_steps(20)), 0.1, 1e-12);
  c.decay_steps = 0;
  EXPECT_EQ(c.schedule_steps(20), 20);
  c.decay_steps = -1;
  EXPECT_THROW(c.validate(), dew::Error);
}

TEST(LrSchedule, ConfigValidationNamesTheField) {
  OptimConfig c;
  c.schedule = "exponential";
  try {
    c.validate();
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim.schedule"), std::string::npos);
  }
}

TEST(GradClip, ScalesToTheGlobalNormAndReturnsTheNormBefore) {
  auto a = at::zeros({1}), b = at::zeros({1}), untouched = at::zeros({1});
  a.mutable_grad() = at::full({1}, 3.0);
  b.mutable_grad() = at::full({1}, 4.0);
  EXPECT_NEAR(clip_grad_norm({a, b, untouched}, 10.0), 5.0, 1e-6);  // under the limit: unchanged
  EXPECT_FLOAT_EQ(a.grad().item<float>(), 3.0f);
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().item<double>(), 3.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(b.grad().item<double>(), 4.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(clip_grad_norm({a, b}, 0.0), 1.0, 1e-5);  // 0 = off: only measures
  b.mutable_grad() = at::full({1}, NAN);
  EXPECT_TRUE(std::isnan(clip_grad_norm({a, b}, 1.0)));
}

TEST(Ema, AveragesInFp32AndSwapsForEvaluation) {
  auto p = at::zeros({2}, at::kBFloat16);
  Ema ema(0.5, {{"p", p}});
  p.fill_(2.0);
  ema.update(0);  // 0.5 * 0 + 0.5 * 2
  EXPECT_EQ(ema.state().at("p").scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(ema.state().at("p")[0].item<float>(), 1.0f);
  p.fill_(4.0);
  ema.update(1);  // 0.5 * 1 + 0.5 * 4
  EXPECT_FLOAT_EQ(ema.state().at("p")[0].item<float>(), 2.5f);
  {
    EmaScope scope(&ema);
    EXPECT_FLOAT_EQ(p[0].item<float>(), 2.5f);
  }
  EXPECT_FLOAT_EQ(p[0].item<float>(), 4.0f);

  Ema off(0.0, {{"p", p}});
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.state().empty());
  EXPECT_THROW(Ema(1.0, {{"p", p}}), dew::Error);
  EXPECT_THROW(ema.load_state({{"p", at::zeros({3})}}, "ema.safetensors"), dew::Error);
}

TEST(Ema, WarmupRampsTheDecayUpToItsValue) {
  auto p = at::zeros({1});
  Ema ema(0.999, {{"p", p}}, /*warmup=*/true);
  EXPECT_DOUBLE_EQ(ema.decay_at(0), 0.1);            // (1 + 0) / (10 + 0)
  EXPECT_DOUBLE_EQ(ema.decay_at(90), 91.0 / 100.0);
  EXPECT_DOUBLE_EQ(ema.decay_at(100000), 0.999);     // capped
  p.fill_(10.0);
  ema.update(0);  // 0.1 * 0 + 0.9 * 10
  EXPECT_FLOAT_EQ(ema.state().at("p")[0].item<float>(), 9.0f);
  EXPECT_DOUBLE_EQ(Ema(0.999, {{"p", p}}).decay_at(0), 0.999);  // no warmup: constant
}

}  // namespace
