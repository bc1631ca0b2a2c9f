// Classifier-free guidance (dew/inference/diffusion/guidance.h): the mix, the interval, the rescale, and
// the guided Denoiser's single batched forward.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "dew/inference/diffusion/guidance.h"
#include "dew/inference/diffusion/sampler_config.h"
#include "test_support.h"

namespace {

using namespace dew::inference::diffusion;
using dew::processes::NoiseProcessConfig;
using dew::processes::Prediction;

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

struct Pair {
  at::Tensor x_t, alpha, sigma;
  Denoised cond, uncond;
};

// A consistent pair: both halves satisfy x_t = alpha x0 + sigma eps at alpha = 0.6, sigma = 0.8.
Pair make_pair() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(4);
  Pair p;
  p.alpha = at::full({2}, 0.6);
  p.sigma = at::full({2}, 0.8);
  p.x_t = at::randn({2, 1, 3, 3}, g);
  const at::Tensor x0c = at::randn({2, 1, 3, 3}, g), x0u = 0.3 * at::randn({2, 1, 3, 3}, g);
  p.cond = {x0c, (p.x_t - 0.6 * x0c) / 0.8};
  p.uncond = {x0u, (p.x_t - 0.6 * x0u) / 0.8};
  return p;
}

TEST(DiffusionGuidance, MixesCondAndUncondLinearlyInsideTheInterval) {
  const Pair p = make_pair();
  Guidance g;
  g.scale = 3.0;
  const Denoised out = guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 1.0, g);
  // Exact arithmetic in float32: a few roundings of values ~ 10 (1e-5).
  EXPECT_LT(max_abs(out.x0 - (p.uncond.x0 + 3.0 * (p.cond.x0 - p.uncond.x0))), 1e-5);
  EXPECT_LT(max_abs(out.eps - (p.uncond.eps + 3.0 * (p.cond.eps - p.uncond.eps))), 1e-5);
  EXPECT_LT(max_abs(0.6 * out.x0 + 0.8 * out.eps - p.x_t), 1e-5);  // still a decomposition of x_t

  g.sigma_lo = 0.5;
  g.sigma_hi = 2.0;
  EXPECT_TRUE(at::equal(guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 0.5, g).x0, p.cond.x0));  // lo excluded
  EXPECT_TRUE(at::equal(guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 2.5, g).x0, p.cond.x0));
  EXPECT_FALSE(at::equal(guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 2.0, g).x0, p.cond.x0));  // hi included
  g.scale = 1.0;
  EXPECT_FALSE(g.active(1.0));
}

TEST(DiffusionGuidance, RescaleMatchesTheConditionalStdAndMixesByPhi) {
  const Pair p = make_pair();
  Guidance g;
  g.scale = 5.0;
  const Denoised plain = guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 1.0, g);
  g.rescale = 1.0;
  const Denoised full = guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 1.0, g);
  const std::vector<int64_t> dims = {1, 2, 3};
  EXPECT_LT(max_abs(full.x0.std(dims) - p.cond.x0.std(dims)), 1e-5);  // per sample
  EXPECT_GT(max_abs(plain.x0.std(dims) - p.cond.x0.std(dims)), 0.1);  // it did have something to fix
  EXPECT_LT(max_abs(0.6 * full.x0 + 0.8 * full.eps - p.x_t), 1e-5);
  g.rescale = 0.25;
  const Denoised quarter = guide(p.cond, p.uncond, p.x_t, p.alpha, p.sigma, 1.0, g);
  EXPECT_LT(max_abs(quarter.x0 - (0.25 * full.x0 + 0.75 * plain.x0)), 1e-5);
}

TEST(DiffusionGuidance, ValidateNamesTheField) {
  Guidance g;
  g.rescale = 1.5;
  EXPECT_NE(dew::test::error_of([&] { g.validate("sample.guidance"); }).find("sample.guidance.rescale = 1.5"), std::string::npos);
  g = {};
  g.sigma_lo = 2.0;
  g.sigma_hi = 1.0;
  EXPECT_NE(dew::test::error_of([&] { g.validate(); }).find("guidance.sigma_hi = 1"), std::string::npos);
  g = {};
  g.scale = std::nan("");
  EXPECT_NE(dew::test::error_of([&] { g.validate(); }).find("guidance.scale"), std::string::npos);
}

TEST(DiffusionGuidance, GuidedDenoiserRunsOneBatchedForward) {
  NoiseProcessConfig config;
  config.process = "flow";
  const NoiseProcess process(config);
  std::vector<int64_t> batch_sizes;
  at::Tensor seen_labels;
  // The "network": predicts flow velocity u = label-dependent constant, so cond and uncond differ.
  const ConditionalModel model = [&](const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
    batch_sizes.push_back(x.size(0));
    seen_labels = labels;
    EXPECT_NEAR(time[0].item<double>(), 500.0, 1e-3);  // flow's model time 1000 t
    return at::zeros_like(x) + labels.to(at::kFloat).view({-1, 1, 1, 1});
  };
  Guidance g;
  g.scale = 2.0;
  const Denoiser d = guided_denoiser(process, Prediction::flow_velocity, model, at::tensor({1, 2}, at::kLong), 10, g);
  const at::Tensor x = at::zeros({2, 1, 2, 2});
  const at::Tensor t = at::full({2}, 0.5);
  const Denoised out = d(x, t);
  ASSERT_EQ(batch_sizes, std::vector<int64_t>{4});
  EXPECT_EQ(seen_labels[2].item<int64_t>(), 10);
  EXPECT_EQ(seen_labels[3].item<int64_t>(), 10);
  // u = eps - x0 at x = 0, t = 0.5: x0 = -0.5 u, so guided x0 = -0.5 (u_null + 2 (u_label - u_null)).
  EXPECT_NEAR(out.x0[0][0][0][0].item<double>(), -0.5 * (10 + 2 * (1 - 10)), 1e-5);
  EXPECT_NEAR(out.x0[1][0][0][0].item<double>(), -0.5 * (10 + 2 * (2 - 10)), 1e-5);

  g.scale = 1.0;  // no guidance: one forward of the plain batch
  batch_sizes.clear();
  guided_denoiser(process, Prediction::flow_velocity, model, at::tensor({1, 2}, at::kLong), 10, g)(x, t);
  EXPECT_EQ(batch_sizes, std::vector<int64_t>{2});
}

TEST(DiffusionSamplerConfig, ValidateNamesTheFieldAndRuns) {
  NoiseProcessConfig config;
  config.process = "flow";
  const NoiseProcess flow(config);
  SamplerConfig sampler;
  sampler.solver = "pndm";
  const std::string refused = dew::test::error_of([&] { sampler.validate(flow.kind()); });
  EXPECT_NE(refused.find("sample.solver"), std::string::npos) << refused;
  EXPECT_NE(refused.find("\"pndm\""), std::string::npos) << refused;
  sampler.solver = "heun";
  sampler.spacing = "cosine";
  EXPECT_NE(dew::test::error_of([&] { sampler.validate(flow.kind()); }).find("sample.spacing"), std::string::npos);
  sampler.spacing = "";
  EXPECT_EQ(sampler.spacing_for(flow.kind()), Spacing::linspace);
  sampler.steps = 3;
  int calls = 0;
  const Denoiser model = [&](const at::Tensor& x, const at::Tensor& t) {  // x0 = 0 exactly: eps = x / sigma
    ++calls;
    return Denoised{at::zeros_like(x), x / t.view({-1, 1, 1, 1})};  // flow: sigma = t
  };
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1);
  const at::Tensor out = sample(flow, sampler, model, at::ones({1, 1, 2, 2}), generator);
  EXPECT_EQ(calls, 5);  // heun: 2N - 1
  EXPECT_LT(max_abs(out), 1e-6);  // |x| <= 1: a few float32 roundings
}

}  // namespace
