// GrpoObjective through the Trainer on a tiny random decoder with byte ids: a learnable reward rises,
// equal rewards leave only the KL term (zero at step 0), a resumed run with grpo.epochs = 2 stopped
// mid-group matches an uninterrupted one bit for bit, and a changed batch mid-group is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "dew/data/prompt_rows.h"
#include "dew/data/repeated_batches.h"
#include "dew/data/tokenizers/byte_tokenizer.h"
#include "dew/nn/parameters.h"
#include "dew/objectives/grpo_objective.h"
#include "dew/runs/engine_rollouts.h"
#include "dew/training/checkpoint.h"
#include "dew/training/trainer.h"
#include "training_test_support.h"

namespace {
namespace fs = std::filesystem;
using namespace dew::training;
using dew::objectives::GrpoObjective;
using dew::objectives::GrpoSetup;
using dew::objectives::rewards::Reward;
using dew::objectives::rewards::RewardInput;
using dew::test::TempDir;

constexpr std::uint64_t kModelSeed = 11;
constexpr std::int64_t kPrompts = 12;

// The fraction of a completion's characters that are digits: dense enough for a tiny model to climb.
class DigitReward final : public Reward {
 public:
  std::string name() const override { return "digits"; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override {
    std::vector<double> out;
    for (const auto& in : batch) {
      double digits = 0;
      for (char c : in.completion) digits += (c >= '0' && c <= '9') ? 1 : 0;
      out.push_back(in.completion.empty() ? 0.0 : digits / static_cast<double>(in.completion.size()));
    }
    return out;
  }
};

class ConstantReward final : public Reward {
 public:
  std::string name() const override { return "constant"; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override { return std::vector<double>(batch.size(), 0.5); }
};

dew::nn::CausalTransformer tiny_model(std::uint64_t seed = kModelSeed) {
  dew::nn::CausalTransformer model(dew::test::tiny_decoder_config());
  model->init_parameters(seed);
  return model;
}

const dew::data::ByteTokenizer& bytes() {
  static const dew::data::ByteTokenizer tokenizer;
  return tokenizer;
}

// Prompts of bytes below 64 (digits, + * - =), so every id is inside the tiny model's vocabulary of 64.
GrpoSetup setup(std::unique_ptr<Reward> reward, std::int64_t epochs = 1, double beta = 0.04,
                std::uint64_t reference_seed = kModelSeed) {
  GrpoSetup s;
  s.policy = tiny_model();
  s.rollout = dew::runs::engine_rollouts();
  if (beta > 0) s.reference = tiny_model(reference_seed);
  s.tokenizer = &bytes();
  for (std::int64_t i = 0; i < kPrompts; ++i) {
    const std::string text = std::to_string(i) + (i % 2 ? "+" : "*") + std::to_string(7 - i) + "=";
    s.prompts.push_back({bytes().encode(text), text, "", nullptr, nullptr});
  }
  s.rewards.push_back(std::move(reward));
  s.config.group_size = 4;
  s.config.max_new_tokens = 8;
  s.config.beta = beta;
  s.config.epochs = epochs;
  s.seed = 5;
  return s;
}

TrainerConfig grpo_run(std::int64_t steps, std::int64_t batch_size = 4, std::int64_t grad_accum = 1) {
  TrainerConfig c;
  c.steps = steps;
  c.batch_size = batch_size;
  c.grad_accum = grad_accum;
  c.log_every = 1;
  c.eval_every = 0;
  c.checkpoint_every = 1;
  c.keep_checkpoints = 0;
  c.seed = 5;
  c.device = "cpu";
  c.peak_flops = 1e9;  // skip the start-up matmul measurement
  return c;
}

OptimConfig grpo_optim(double lr = 1e-2) {
  return {.name = "adamw", .learning_rate = lr, .weight_decay = 0, .schedule = "constant"};
}

// Fits `objective` on the prompts served `epochs` steps in a row (as the grpo kind wires them); records
// every step's scalars.
FitResult fit(GrpoObjective& objective, const fs::path& run, const TrainerConfig& config, std::int64_t epochs,
              std::vector<std::map<std::string, double>>* steps = nullptr, double lr = 1e-2) {
  auto prompts = std::make_unique<dew::data::PromptRows>(kPrompts, 0, dew::data::TokenLoaderOptions{.seed = config.seed});
  dew::data::RepeatedBatches source(std::move(prompts), epochs, config.grad_accum);
  Trainer trainer(objective, grpo_optim(lr), config, run);
  trainer.set_output(nullptr);
  trainer.use_current_parameters();  // the policy starts as the reference (a post-training run)
  if (steps) trainer.set_step_callback([steps](std::int64_t, const std::map<std::string, double>& s) { steps->push_back(s); });
  return trainer.fit(source);
}

dew::data::Batch prompt_batch(std::vector<std::int64_t> index) {
  dew::data::Batch batch;
  batch.set("prompt_index", at::tensor(index, at::kLong));
  return batch;
}

TEST(GrpoObjective, RewardRisesWhenItCanBeLearned) {
  dew::test::SingleThreaded threads;
  TempDir run;
  GrpoObjective objective(setup(std::make_unique<DigitReward>()));
  std::vector<std::map<std::string, double>> steps;
  fit(objective, run.path(), grpo_run(30), 1, &steps, 2e-2);
  ASSERT_EQ(steps.size(), 30u);
  auto mean_of = [&](std::size_t from, std::size_t to) {
    double sum = 0;
    for (std::size_t s = from; s < to; ++s) sum += steps[s].at("reward/mean");
    return sum / static_cast<double>(to - from);
  };
  const double first = mean_of(0, 5), last = mean_of(25, 30);
  std::printf("digit reward: first 5 steps %.3f, last 5 steps %.3f\n", first, last);
  // A random 64-token model writes a digit about 10/64 of the time; learning shows as a large rise.
  EXPECT_GT(last, first + 0.2) << "first " << first << ", last " << last;
  for (const char* name : {"reward/mean", "reward/std", "reward/digits", "kl", "clip_fraction", "completion_length", "loss"}) {
    EXPECT_TRUE(steps.back().count(name)) << name;
  }
  EXPECT_DOUBLE_EQ(steps.back().at("reward/digits"), steps.back().at("reward/mean"));  // the only reward
  EXPECT_DOUBLE_EQ(steps.back().at("completion_length"), 8.0);  // no stop id: every completion is full
  EXPECT_GT(steps.back().at("kl"), 0.0);  // the policy moved away from the reference
}

TEST(GrpoObjective, EqualRewardsLeaveOnlyTheKlTermWhichIsZeroAtTheStart) {
  dew::test::SingleThreaded threads;
  auto gradient_norm = [](GrpoObjective& objective) {
    double sq = 0;
    for (auto& p : objective.module().parameters()) {
      if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
    }
    return std::sqrt(sq);
  };
  {
    // Policy == reference, equal rewards: advantages 0 and k3 KL 0, so the loss and every gradient are 0.
    GrpoObjective objective(setup(std::make_unique<ConstantReward>()));
    auto loss = objective.loss(prompt_batch({0, 1, 2}), 0);
    EXPECT_EQ(loss.count, 3 * 4 * 8);  // prompts x group_size x max_new_tokens completion tokens
    EXPECT_EQ(loss.sum.item<double>(), 0.0);
    EXPECT_EQ(loss.metrics.mean("kl"), 0.0);
    EXPECT_EQ(loss.metrics.mean("reward/std"), 0.0);
    loss.sum.backward();
    EXPECT_EQ(gradient_norm(objective), 0.0);
  }
  {
    // The same with rewards that differ: advantages are not 0 and the gradient is not either.
    GrpoObjective objective(setup(std::make_unique<DigitReward>()));
    auto loss = objective.loss(prompt_batch({0, 1, 2}), 0);
    loss.sum.backward();
    EXPECT_GT(gradient_norm(objective), 1e-3);
  }
  {
    // A reference that differs from the policy, equal rewards: the loss is beta * KL, token by token.
    // Both sides are float32 sums of the same 96 terms in another order: ~96 * 6e-8 relative.
    GrpoObjective objective(setup(std::make_unique<ConstantReward>(), 1, 0.04, /*reference_seed=*/12));
    auto loss = objective.loss(prompt_batch({3, 4, 5}), 0);
    const double kl = loss.metrics.mean("kl");
    EXPECT_GT(kl, 1e-3);
    EXPECT_NEAR(loss.sum.item<double>() / loss.count, 0.04 * kl, 0.04 * kl * 1e-5);
  }
}

TEST(GrpoObjective, ResumedMidGroupMatchesAnUninterruptedRunBitForBit) {
  dew::test::SingleThreaded threads;
  constexpr std::int64_t kEpochs = 2;
  TempDir whole, parts;
  {
    GrpoObjective objective(setup(std::make_unique<DigitReward>(), kEpochs));
    fit(objective, whole.path(), grpo_run(6, 4, 2), kEpochs);
  }
  {
    GrpoObjective objective(setup(std::make_unique<DigitReward>(), kEpochs));
    auto result = fit(objective, parts.path(), grpo_run(3, 4, 2), kEpochs);  // step 3 = the 2nd pass of a group
    ASSERT_EQ(result.step, 3);
  }
  // The cached rollout of the unfinished group is in checkpoint 3; after a finished group (4) nothing is.
  ASSERT_TRUE(fs::exists(parts.path() / "3" / "objective.safetensors"));
  EXPECT_FALSE(fs::exists(whole.path() / "4" / "objective.safetensors"));
  EXPECT_TRUE(fs::exists(whole.path() / "5" / "objective.safetensors"));
  {
    GrpoObjective objective(setup(std::make_unique<DigitReward>(), kEpochs));
    auto result = fit(objective, parts.path(), grpo_run(6, 4, 2), kEpochs);
    ASSERT_EQ(result.step, 6);
  }
  auto a = dew::training::Checkpoint::tensors(dew::training::Checkpoint(whole.path() / "6").params());
  auto b = dew::training::Checkpoint::tensors(dew::training::Checkpoint(parts.path() / "6").params());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(t.equal(b.at(name))) << name;
  // And the run did train: step 6 differs from the start.
  auto start = dew::nn::parameter_map(*tiny_model());
  EXPECT_FALSE(a.at("model.embed_tokens.weight").equal(start.at("model.embed_tokens.weight")));
  // The same comparison catches a resume that samples the group's second pass anew: drop the cached rollout.
  for (auto step : {4, 5, 6}) fs::remove_all(parts.path() / std::to_string(step));
  fs::remove(parts.path() / "3" / "objective.safetensors");
  GrpoObjective objective(setup(std::make_unique<DigitReward>(), kEpochs));
  auto error = dew::test::error_of([&] { fit(objective, parts.path(), grpo_run(6, 4, 2), kEpochs); });
  EXPECT_NE(error.find("GRPO step 4 optimises the rollouts sampled at step 3 again"), std::string::npos) << error;
  EXPECT_NE(error.find("has no objective.safetensors"), std::string::npos) << error;
}

TEST(GrpoObjective, ABatchChangedMidGroupIsRefused) {
  dew::test::SingleThreaded threads;
  TempDir run;
  {
    GrpoObjective objective(setup(std::make_unique<DigitReward>(), 2));
    fit(objective, run.path(), grpo_run(1, 4), 2);
  }
  GrpoObjective objective(setup(std::make_unique<DigitReward>(), 2));
  auto error = dew::test::error_of([&] { fit(objective, run.path(), grpo_run(2, 2), 2); });
  EXPECT_NE(error.find("reads other prompts than the rollout of step 1"), std::string::npos) << error;
}

TEST(GrpoObjective, RolloutSeedsDifferByStepAndMicroBatch) {
  using dew::objectives::rollout_seed;
  EXPECT_EQ(rollout_seed(1, 2, 3), rollout_seed(1, 2, 3));
  EXPECT_NE(rollout_seed(1, 2, 3), rollout_seed(1, 2, 4));
  EXPECT_NE(rollout_seed(1, 2, 3), rollout_seed(1, 3, 3));
  EXPECT_NE(rollout_seed(1, 2, 3), rollout_seed(2, 2, 3));
  EXPECT_NE(rollout_seed(0, 0, 1), rollout_seed(0, 1, 0));
}

TEST(GrpoObjectiveConfig, RewardSpecsSplitAtCommasOutsideARegex) {
  dew::objectives::GrpoObjectiveConfig c;
  c.reward = "last_number,regex:a{1,3}b,exact_match";
  EXPECT_EQ(c.reward_specs(), (std::vector<std::string>{"last_number", "regex:a{1,3}b", "exact_match"}));
  c.reward = "";
  EXPECT_TRUE(c.reward_specs().empty());
  EXPECT_NE(dew::test::error_of([&] { c.validate(); }).find("GRPO needs a reward"), std::string::npos);
  c.reward = "bogus";
  EXPECT_NE(dew::test::error_of([&] { c.validate(); }).find("bogus"), std::string::npos);
  c.reward = "";
  c.reward_cmd = "cat";
  EXPECT_EQ(dew::test::error_of([&] { c.validate(); }), "(no error)");
}

}  // namespace
