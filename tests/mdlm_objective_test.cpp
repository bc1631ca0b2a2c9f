// Masked diffusion (objectives/masked_diffusion): the MDLM negative ELBO and its gradients equal an
// independent computation of the formula through transformers' Llama with an all-visible mask (fixture);
// the schedules' weights; the corruption draw (strata, only real tokens, a pure function of its seed); the
// chunked cross entropy with the mask token excluded equals the plain one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <numbers>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/parameters.h"
#include "dew/objectives/masked_diffusion/mdlm_objective.h"
#include "dew/objectives/token_cross_entropy.h"
#include "test_support.h"

namespace {
namespace md = dew::objectives::masked_diffusion;
namespace processes = dew::processes;
using dew::test::error_of;

dew::nn::CausalTransformer fixture_model() {
  dew::nn::CausalTransformerConfig config;
  auto dir = dew::test::fixtures() / "mdlm";
  dew::config::from_json(dew::config::parse_json_file(dir / "config.json"), config, "config.json");
  dew::nn::CausalTransformer model(config);
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dir / "weights.safetensors"));
  return model;
}

TEST(MaskedDiffusionObjective, MatchesTheReferenceNelboAndGradients) {
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "mdlm" / "io.safetensors");
  auto text = io.load("text");
  md::MaskedDiffusionObjective objective(fixture_model(), {.seq_len = text.size(1), .loss = {.loss_chunk_tokens = 0}}, 0);
  dew::data::Batch batch;
  batch.set("text", text);
  batch.set("text_segment_ids", io.load("segment_ids"));
  const md::Corruption corruption{io.load("t"), io.load("is_masked").to(at::kBool)};
  for (std::int64_t chunk : {0, 5}) {  // whole and chunked head
    md::MaskedDiffusionObjective chunked(fixture_model(), {.seq_len = text.size(1), .loss = {.loss_chunk_tokens = chunk}}, 0);
    chunked.module().zero_grad();
    auto loss = chunked.loss_under(batch, corruption);
    loss.sum.backward();
    // float32 end to end on a 2-layer, 32-wide model: the two computations differ only in summation order,
    // a few ulps of values of order 1-100, so 1e-6 relative is ~10x the rounding.
    EXPECT_NEAR(loss.sum.item<double>(), io.load("loss_sum").item<double>(), 1e-6 * io.load("loss_sum").item<double>());
    EXPECT_EQ(loss.count, io.load("real_count").item<double>());
    EXPECT_NEAR(loss.metrics.mean("nelbo"), io.load("nelbo").item<double>(), 1e-6 * io.load("nelbo").item<double>());
    EXPECT_NEAR(loss.metrics.mean("masked_accuracy") * corruption.is_masked.sum().item<double>(), io.load("correct").item<double>(), 1e-9);
    EXPECT_NEAR(loss.metrics.mean("masked_fraction"), corruption.is_masked.sum().item<double>() / loss.count, 1e-12);
    dew::formats::SafetensorsFile expected(dew::test::fixtures() / "mdlm" / "grads.safetensors");
    for (const auto& [name, p] : dew::nn::parameter_map(chunked.module())) {
      auto want = expected.load(name);
      // Gradients of order 1-100 summed over 12 tokens in float32: 1e-4 of the largest entry is far above
      // the rounding (~1e-6) and far below any real error (a misplaced weight moves them by O(1)).
      double scale = std::max(1e-3, want.abs().max().item<double>());
      EXPECT_LT((p.grad() - want).abs().max().item<double>() / scale, 1e-4) << "chunk " << chunk << " " << name;
    }
  }
}

TEST(MaskedDiffusionObjective, RefusesCausalModelsAndRowsOfTheWrongLength) {
  auto model = fixture_model();
  auto config = model->config();
  config.causal = true;
  config.mask_token_id = -1;
  auto message = error_of([&] { md::MaskedDiffusionObjective(dew::nn::CausalTransformer(config), {.seq_len = 12}, 0); });
  EXPECT_NE(message.find("model.causal=false"), std::string::npos) << message;
  md::MaskedDiffusionObjective objective(fixture_model(), {.seq_len = 12}, 0);
  dew::data::Batch batch;
  batch.set("text", at::zeros({2, 13}, at::kLong));
  message = error_of([&] { objective.loss(batch, 0); });
  EXPECT_NE(message.find("exactly seq_len = 12"), std::string::npos) << message;
}

TEST(MaskingSchedule, WeightsAreTheNelboWeights) {
  const auto t = at::tensor({0.0, 0.1, 0.5, 0.9}, at::kDouble);
  processes::MaskingSchedule loglinear(processes::ScheduleKind::loglinear, 1e-3), cosine(processes::ScheduleKind::cosine, 1e-3);
  auto w = loglinear.weight(t);
  EXPECT_EQ(w[0].item<double>(), 0.0);
  EXPECT_NEAR(w[2].item<double>(), 2.0, 1e-12);
  EXPECT_NEAR(loglinear.alpha(1.0), 1e-3, 1e-15);
  // Against -alpha'(t) / (1 - alpha(t)) by central differences (error O(h^2) ~ 1e-10 at h = 1e-5).
  for (auto* schedule : {&loglinear, &cosine}) {
    for (double x : {0.1, 0.5, 0.9}) {
      const double h = 1e-5;
      const double derivative = (schedule->alpha(x + h) - schedule->alpha(x - h)) / (2 * h);
      const double want = -derivative / (1 - schedule->alpha(x));
      EXPECT_NEAR(schedule->weight(at::tensor({x}, at::kDouble))[0].item<double>(), want, 1e-6 * want) << x;
    }
  }
  EXPECT_NEAR(cosine.alpha(0.0), 1.0, 1e-15);
  EXPECT_NEAR(cosine.alpha(1.0), 0.0, 1e-15);
}

TEST(MaskedDiffusionObjective, CorruptionIsStratifiedMasksOnlyRealTokensAndRepeatsWithItsSeed) {
  auto real = at::ones({8, 64}, at::kBool);
  real.narrow(1, 60, 4).fill_(false);
  md::MDLMLossConfig config;
  auto a = md::draw_corruption(real, config, 42), b = md::draw_corruption(real, config, 42);
  auto c = md::draw_corruption(real, config, 43);
  EXPECT_TRUE(at::equal(a.t, b.t));
  EXPECT_TRUE(at::equal(a.is_masked, b.is_masked));
  EXPECT_FALSE(at::equal(a.t, c.t));
  for (std::int64_t i = 0; i < 8; ++i) {
    // Row i's time lies in stratum i of [time_eps, 1).
    const double t = a.t[i].item<double>(), lo = 1e-3 + (1 - 1e-3) * i / 8.0, hi = 1e-3 + (1 - 1e-3) * (i + 1) / 8.0;
    EXPECT_GE(t, lo - 1e-6);
    EXPECT_LE(t, hi + 1e-6);
  }
  EXPECT_FALSE(a.is_masked.narrow(1, 60, 4).any().item<bool>());
  // Over many rows the masked fraction follows 1 - alpha(t) = (1 - eps) t: rows late in time mask most.
  EXPECT_GT(a.is_masked[7].sum().item<int>(), a.is_masked[0].sum().item<int>());
  // Consecutive steps and micro-batches draw different streams.
  EXPECT_NE(md::corruption_seed(0, 1, 0), md::corruption_seed(0, 2, 0));
  EXPECT_NE(md::corruption_seed(0, 1, 0), md::corruption_seed(0, 1, 1));
}

TEST(TokenCrossEntropy, ExcludedTokenGetsNoMassChunkedOrNot) {
  auto hidden = at::randn({10, 8}, at::kFloat).requires_grad_(true);
  auto weight = at::randn({6, 8}, at::kFloat).requires_grad_(true);
  auto targets = at::tensor({0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, at::kLong);
  auto weights = at::rand({10}, at::kFloat) + 0.5;
  auto plain = dew::objectives::token_cross_entropy(hidden, weight, targets, weights, 0.0, 0, true, 5);
  auto [gh, gw] = std::tuple{at::Tensor(), at::Tensor()};
  {
    auto grads = torch::autograd::grad({plain.loss_sum}, {hidden, weight});
    gh = grads[0];
    gw = grads[1];
  }
  auto chunked = dew::objectives::token_cross_entropy(hidden, weight, targets, weights, 0.0, 3, true, 5);
  auto grads = torch::autograd::grad({chunked.loss_sum}, {hidden, weight});
  // The same float32 sums in another order: 1e-5 relative.
  EXPECT_NEAR(chunked.loss_sum.item<double>(), plain.loss_sum.item<double>(), 1e-5 * plain.loss_sum.item<double>());
  EXPECT_TRUE(at::allclose(grads[0], gh, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(grads[1], gw, 1e-5, 1e-6));
  EXPECT_EQ(gw[5].abs().max().item<double>(), 0.0);  // the excluded row of the head gets no gradient
  // By hand: log-sum-exp over the first five logits only.
  auto z = at::matmul(hidden, weight.t()).narrow(1, 0, 5);
  auto want = ((at::logsumexp(z, 1) - z.gather(1, targets.unsqueeze(1)).squeeze(1)) * weights).sum();
  EXPECT_NEAR(plain.loss_sum.item<double>(), want.item<double>(), 1e-5 * want.item<double>());
}

}  // namespace

namespace {
// Dream's alignment (model.shift_logits): position i is predicted from position i - 1's state, position 0
// from its own, in training and sampling alike.
TEST(MaskedDiffusionObjective, ShiftedLogitsReadThePreviousPositionsState) {
  auto config = fixture_model()->config();
  config.shift_logits = true;
  dew::nn::CausalTransformer shifted(config, dew::nn::ParameterInit::none);
  const auto hidden = at::arange(6, at::kFloat).view({1, 3, 2});
  const auto aligned = shifted->token_prediction_states(hidden);
  EXPECT_TRUE(at::equal(aligned, at::tensor({0.f, 1.f, 0.f, 1.f, 2.f, 3.f}).view({1, 3, 2})));
  EXPECT_TRUE(at::equal(fixture_model()->token_prediction_states(hidden), hidden));
  config.causal = true;
  config.mask_token_id = -1;
  auto message = error_of([&] { config.validate(); });
  EXPECT_NE(message.find("model.shift_logits"), std::string::npos) << message;
}
}  // namespace
