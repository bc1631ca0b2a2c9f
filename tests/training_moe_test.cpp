// Training a mixture-of-experts decoder through the Trainer: the routers' losses reach the loss and the
// run's metrics (tracking/scalars.jsonl), the routers learn from them, and a stopped and resumed run equals an
// uninterrupted one bit for bit.
#include <gtest/gtest.h>

#include "dew/data/token_windows.h"
#include "dew/objectives/lm_objective.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/training/trainer.h"
#include "training_test_support.h"

namespace {
namespace fs = std::filesystem;
using namespace dew::training;
using dew::objectives::LMObjective;
using dew::test::TempDir;

constexpr std::int64_t kSeqLen = 8;

dew::nn::CausalTransformerConfig moe_config(double aux_coef) {
  auto c = dew::test::tiny_decoder_config();
  c.num_experts = 4, c.experts_per_token = 2, c.expert_features = 16;
  c.router_aux_loss_coef = aux_coef, c.router_z_loss_coef = 1e-3;
  return c;
}

LMObjective moe_objective(double aux_coef = 0.01) { return LMObjective(dew::nn::CausalTransformer(moe_config(aux_coef)), {.seq_len = kSeqLen}); }

FitResult train(const fs::path& data, const fs::path& run, std::int64_t steps, LMObjective& objective) {
  TrainerConfig c;
  c.steps = steps, c.batch_size = 4, c.log_every = 1, c.eval_every = 0, c.checkpoint_every = 3, c.keep_checkpoints = 0;
  c.ema_decay = 0.9, c.device = "cpu", c.peak_flops = 1e9;
  dew::data::TokenLoaderOptions options;
  options.seed = 3;
  dew::data::TokenWindows source(data, kSeqLen, options);
  OptimConfig optim{.name = "adamw", .learning_rate = 1e-2, .schedule = "cosine", .warmup_steps = 2};
  Trainer trainer(objective, optim, c, run);
  trainer.set_output(nullptr);
  return trainer.fit(source, nullptr);
}

TEST(MoeTraining, RouterLossesAreMetricsAndTrainTheRouter) {
  dew::test::SingleThreaded threads;
  TempDir data;
  dew::test::write_tiny_tokens(data.path());
  dew::data::TokenLoaderOptions options;
  dew::data::TokenWindows windows(data.path(), kSeqLen, options);
  auto batch = windows.next_batch(4);
  // The loss is the cross entropy plus coef * aux + z_coef * z, per token.
  auto with = moe_objective(0.5), without = moe_objective(0.0);
  auto a = with.loss(batch, 0), b = without.loss(batch, 0);
  EXPECT_NEAR(a.metrics.mean("ce"), b.metrics.mean("ce"), 1e-6);
  const double aux = a.metrics.mean("moe/aux_loss"), z = a.metrics.mean("moe/z_loss");
  // At initialisation the routers' weights are N(0, 0.02) on RMS-normed inputs of 32 features: logits of about
  // 0.1, so each mean probability P_e is 1/4 within 0.05, and aux = 4 sum_e f_e P_e (sum_e f_e = 2, the top-k)
  // is 2 within 4 * 2 * 0.05 = 0.4.
  EXPECT_NEAR(aux, 2.0, 0.4);
  EXPECT_NEAR(a.sum.item<double>() / a.count - b.sum.item<double>() / b.count, 0.5 * aux, 1e-5);
  EXPECT_NEAR(b.sum.item<double>() / b.count - b.metrics.mean("ce"), 1e-3 * z, 1e-6);
  EXPECT_LE(a.metrics.mean("moe/expert_load_min"), 0.25);
  EXPECT_GE(a.metrics.mean("moe/expert_load_max"), 0.25);
  // The aux loss reaches the routers: their gradient differs with and without it.
  a.sum.backward(), b.sum.backward();
  const auto& ga = with.model()->model->layers[0]->as<dew::nn::DecoderBlockImpl>()->moe->gate->weight.grad();
  const auto& gb = without.model()->model->layers[0]->as<dew::nn::DecoderBlockImpl>()->moe->gate->weight.grad();
  EXPECT_GT((ga - gb).abs().max().item<double>(), 1e-6);
}

TEST(MoeTraining, ResumedRunMatchesAnUninterruptedOneAndLogsRouterMetrics) {
  dew::test::SingleThreaded threads;
  TempDir data, straight, stopped;
  dew::test::write_tiny_tokens(data.path());
  auto a = moe_objective(), half = moe_objective(), b = moe_objective();
  EXPECT_EQ(train(data.path(), straight.path(), 6, a).step, 6);
  EXPECT_EQ(train(data.path(), stopped.path(), 3, half).step, 3);
  EXPECT_EQ(train(data.path(), stopped.path(), 6, b).step, 6);  // a new trainer, objective and loader
  auto pa = dew::nn::parameter_map(a.module()), pb = dew::nn::parameter_map(b.module());
  for (const auto& [name, p] : pa) EXPECT_TRUE(at::equal(p, pb.at(name))) << name;
  auto ra = dew::telemetry::read_scalars(straight.path() / "tracking" / "scalars.jsonl");
  auto rb = dew::telemetry::read_scalars(stopped.path() / "tracking" / "scalars.jsonl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    for (const char* metric : {"loss", "moe/aux_loss", "moe/z_loss", "moe/expert_load_max", "moe/expert_load_min"}) {
      ASSERT_TRUE(ra[i].scalars.count(metric)) << metric;
      EXPECT_EQ(ra[i].scalars.at(metric), rb[i].scalars.at(metric)) << metric << " step " << i + 1;
    }
  }
}

}  // namespace
