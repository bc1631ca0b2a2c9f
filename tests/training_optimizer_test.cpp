// Optimizers: 10 AdamW steps reproduce torch.optim.AdamW (losses and final parameters from
// tools/reference/make_lm_fixtures.py, decay on matrices only), SGD/Adam follow their update rules, and
// state round-trips and refuses bad tensors by name.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/objectives/lm_objective.h"
#include "dew/training/optimizer.h"
#include "training_test_support.h"

namespace {
using namespace dew::training;

OptimConfig fixture_adamw(const nlohmann::json& settings) {
  OptimConfig c;
  c.name = "adamw";
  c.learning_rate = settings["lr"].get<double>();
  c.beta1 = settings["betas"][0].get<double>();
  c.beta2 = settings["betas"][1].get<double>();
  c.eps = settings["eps"].get<double>();
  c.weight_decay = settings["weight_decay"].get<double>();
  return c;
}

// Runs the fixture's 10 AdamW steps with `config` on `family`'s decoder; returns the parameters and the losses.
std::map<std::string, at::Tensor> ten_adamw_steps(const std::string& family, const OptimConfig& config,
                                                  std::vector<double>* losses) {
  auto dir = dew::test::fixtures() / "lm" / family;
  auto text = dew::formats::SafetensorsFile(dir / "io.safetensors").load("text");
  dew::objectives::LMObjective objective(dew::test::fixture_decoder(family), {.seq_len = text.size(1) - 1});
  auto params = dew::nn::parameter_map(objective.module());
  auto optimizer = make_optimizer(config, params);
  dew::data::Batch batch;
  batch.set("text", text);
  for (int i = 0; i < 10; ++i) {
    objective.module().zero_grad();
    auto loss = objective.loss(batch, i);
    auto mean = loss.sum / loss.count;
    mean.backward();
    losses->push_back(mean.item<double>());
    optimizer->step(config.learning_rate);
  }
  EXPECT_EQ(optimizer->steps(), 10);
  return params;
}

TEST(Optimizer, AdamWMatchesTorchForTenSteps) {
  dew::test::SingleThreaded threads;
  for (std::string family : {"qwen3", "llama"}) {
    auto dir = dew::test::fixtures() / "lm" / family;
    auto expected = nlohmann::json::parse(dew::read_file(dir / "adamw.json"));
    std::vector<double> losses;
    auto params = ten_adamw_steps(family, fixture_adamw(expected["settings"]), &losses);
    for (std::size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], expected["losses"][i].get<double>(), dew::test::kAdamWLossTolerance) << family << " step " << i;
    }
    // kAdamWRelativeTolerance says why this is a norm per tensor.
    dew::formats::SafetensorsFile final_params(dir / "adamw_final.safetensors"), initial(dir / "weights.safetensors");
    for (const auto& [name, p] : params) {
      double difference = dew::test::adamw_relative_difference(p, final_params.load(name), initial.load(name));
      EXPECT_LT(difference, dew::test::kAdamWRelativeTolerance) << family << " " << name;
      if (std::getenv("DEW_PRINT_ADAMW")) std::printf("%s %s %.3g\n", family.c_str(), name.c_str(), difference);
    }
  }
}

// The comparison above can fail: without weight decay every decayed matrix lands outside the bound.
TEST(Optimizer, AdamWComparisonCatchesAMissingWeightDecay) {
  dew::test::SingleThreaded threads;
  const std::string family = "llama";
  auto dir = dew::test::fixtures() / "lm" / family;
  auto expected = nlohmann::json::parse(dew::read_file(dir / "adamw.json"));
  OptimConfig no_decay = fixture_adamw(expected["settings"]);
  no_decay.weight_decay = 0;
  std::vector<double> losses;
  auto params = ten_adamw_steps(family, no_decay, &losses);
  dew::formats::SafetensorsFile final_params(dir / "adamw_final.safetensors"), initial(dir / "weights.safetensors");
  int matrices = 0;
  for (const auto& [name, p] : params) {
    if (p.dim() < 2) continue;
    ++matrices;
    double difference = dew::test::adamw_relative_difference(p, final_params.load(name), initial.load(name));
    EXPECT_GT(difference, dew::test::kAdamWRelativeTolerance) << name;
    if (std::getenv("DEW_PRINT_ADAMW")) std::printf("no decay %s %.3g\n", name.c_str(), difference);
  }
  EXPECT_GT(matrices, 3);
}

TEST(Optimizer, DecayOnlyTouchesMatrices) {
  dew::test::SingleThreaded threads;
  // Zero gradients: AdamW's moments stay zero, so the only change is decay, p *= 1 - lr * wd, on matrices.
  auto w = at::ones({2, 2}), b = at::ones({2});
  w.mutable_grad() = at::zeros({2, 2});
  b.mutable_grad() = at::zeros({2});
  auto optimizer = make_optimizer({.name = "adamw", .learning_rate = 0.5, .weight_decay = 0.2}, {{"w", w}, {"b", b}});
  optimizer->step(0.5);
  EXPECT_FLOAT_EQ(w[0][0].item<float>(), 0.9f);
  EXPECT_FLOAT_EQ(b[0].item<float>(), 1.0f);
}

TEST(Optimizer, SgdMomentumAndNesterovFollowTorchRules) {
  dew::test::SingleThreaded threads;
  auto run = [](bool nesterov, int steps) {
    auto p = at::ones({1});
    auto optimizer = make_optimizer({.name = "sgd", .weight_decay = 0, .momentum = 0.9, .nesterov = nesterov}, {{"p", p}});
    for (int i = 0; i < steps; ++i) {
      p.mutable_grad() = at::full({1}, 0.5);
      optimizer->step(0.1);
    }
    return p.item<double>();
  };
  EXPECT_NEAR(run(false, 1), 0.95, 1e-7);   // buffer = g
  EXPECT_NEAR(run(false, 2), 0.855, 1e-7);  // buffer = 0.9 * 0.5 + 0.5
  EXPECT_NEAR(run(true, 1), 0.905, 1e-7);   // d = g + 0.9 * buffer
}

TEST(Optimizer, AdamAddsL2DecayToTheGradient) {
  dew::test::SingleThreaded threads;
  // First Adam step moves each coordinate by lr * sign(g + wd * p) (up to eps): with g = 0 that is the
  // decay's sign for a matrix, and nothing for a vector.
  auto w = at::full({1, 1}, 2.0), b = at::full({1}, 2.0);
  w.mutable_grad() = at::zeros({1, 1});
  b.mutable_grad() = at::zeros({1});
  auto optimizer = make_optimizer({.name = "adam", .weight_decay = 0.1}, {{"w", w}, {"b", b}});
  optimizer->step(0.01);
  EXPECT_NEAR(w.item<double>(), 1.99, 1e-6);
  EXPECT_EQ(b.item<double>(), 2.0);
}

// The fused float32 CPU pass and ATen's _foreach_ path (which CUDA and bf16 parameters take) are the same
// update: a float64 copy of the parameters goes through _foreach_ ops in float64, and the float32 result
// agrees to float rounding. And a grad_scale is the gradient multiplied beforehand (bit for bit for AdamW).
TEST(Optimizer, FusedAdamMatchesTheForeachPathAndFoldsTheGradientScale) {
  dew::test::SingleThreaded threads;
  for (std::string name : {"adamw", "adam"}) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
    // Sizes across the fused pass's 32 K-element tasks: a large matrix split over tasks, small ones grouped.
    std::vector<std::vector<std::int64_t>> shapes{{300, 257}, {64}, {3, 5}, {40000}, {1}};
    std::map<std::string, at::Tensor> fused, reference, prescaled;
    std::vector<at::Tensor> grads;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      auto p = at::randn(shapes[i], generator);
      fused["p" + std::to_string(i)] = p.clone();
      prescaled["p" + std::to_string(i)] = p.clone();
      reference["p" + std::to_string(i)] = p.to(at::kDouble);
      grads.push_back(at::randn(shapes[i], generator));
    }
    OptimConfig config{.name = name, .learning_rate = 0.01, .weight_decay = 0.1};
    auto a = make_optimizer(config, fused), b = make_optimizer(config, reference), c = make_optimizer(config, prescaled);
    const double scale = 0.37;
    for (int step = 0; step < 3; ++step) {
      std::size_t i = 0;
      for (auto& [key, p] : fused) {
        (void)key;
        p.mutable_grad() = grads[i].clone();
        reference.at(key).mutable_grad() = grads[i].to(at::kDouble);
        prescaled.at(key).mutable_grad() = grads[i] * static_cast<float>(scale);
        ++i;
      }
      a->step(0.01, scale);
      b->step(0.01, scale);
      c->step(0.01);
    }
    for (const auto& [key, p] : fused) {
      // AdamW's gradient is grad * scale alone: the same product either way. Adam adds l2 * p, which the
      // compiler may fuse with either product, so there the two agree to rounding.
      if (name == "adamw") {
        EXPECT_TRUE(at::equal(p, prescaled.at(key))) << key;
      } else {
        EXPECT_LT((p - prescaled.at(key)).abs().max().item<double>(), 1e-6) << key;
      }
      // Three steps of float32 arithmetic on values of order 1: a few units of float32 rounding (2^-24
      // relative) per op, a dozen ops a step; 1e-5 absolute is far below one step's movement (~lr = 1e-2).
      EXPECT_LT((p.to(at::kDouble) - reference.at(key)).abs().max().item<double>(), 1e-5) << name << " " << key;
    }
  }
}

TEST(Optimizer, StateRoundTripsAndRefusesBadTensorsByName) {
  dew::test::SingleThreaded threads;
  auto p = at::ones({3, 2});
  p.mutable_grad() = at::full({3, 2}, 0.25);
  auto a = make_optimizer({.name = "adamw"}, {{"layer.weight", p}});
  a->step(0.1);
  auto state = a->state();
  ASSERT_TRUE(state.count("exp_avg/layer.weight"));
  ASSERT_TRUE(state.count("exp_avg_sq/layer.weight"));
  EXPECT_EQ(state.at("step").item<std::int64_t>(), 1);

  auto q = at::ones({3, 2});
  auto b = make_optimizer({.name = "adamw"}, {{"layer.weight", q}});
  b->load_state(state, "opt.safetensors");
  EXPECT_EQ(b->steps(), 1);
  EXPECT_TRUE(at::equal(b->state().at("exp_avg_sq/layer.weight"), state.at("exp_avg_sq/layer.weight")));

  auto missing = state;
  missing.erase("exp_avg_sq/layer.weight");
  try {
    b->load_state(missing, "opt.safetensors");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp_avg_sq/layer.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("opt.safetensors"), std::string::npos) << e.what();
  }
  auto misshaped = state;
  misshaped["exp_avg/layer.weight"] = at::zeros({2, 3});
  try {
    b->load_state(misshaped, "opt.safetensors");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp_avg/layer.weight"), std::string::npos) << e.what();
  }
  auto extra = state;
  extra["exp_avg/other"] = at::zeros({1});
  EXPECT_THROW(b->load_state(extra, "opt.safetensors"), dew::Error);
}

TEST(Optimizer, RefusesUnknownNames) {
  dew::test::SingleThreaded threads;
  EXPECT_THROW(make_optimizer({.name = "lion"}, {}), dew::Error);
  EXPECT_THROW(make_optimizer({.name = "sgd", .momentum = 0, .nesterov = true}, {}), dew::Error);
}

}  // namespace
