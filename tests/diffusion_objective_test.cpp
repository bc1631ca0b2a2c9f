// DiffusionObjective on a toy network whose output is a known function of its inputs: the loss equals one
// computed here from the formulas (flow, vp with v and min-SNR, EDM preconditioned), with the draws
// replayed from noise_seed in the documented order; the same (seed, step, micro-batch) gives the same
// loss; label dropout hits the configured rate; evaluate() is repeatable and splits into quarters.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <cmath>

#include "dew/data/batch.h"
#include "dew/objectives/diffusion/diffusion_objective.h"
#include "test_support.h"

namespace {
using namespace dew::objectives::diffusion;
using dew::test::error_of;

struct ToyConfig {
  std::int64_t num_classes = 10;
  template <class V>
  void fields(V& v) {
    v("num_classes", num_classes, "classes");
  }
};

// out = w * x + 1e-3 * time + 0.01 * label, per example: every input visibly moves the output.
struct ToyModel : torch::nn::Module {
  explicit ToyModel(std::int64_t classes) {
    config_.num_classes = classes;
    w = register_parameter("w", at::full({1}, 0.5f));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
    last_labels = labels.clone();
    const std::vector<std::int64_t> col{-1, 1, 1, 1};
    return w * x + 1e-3 * time.view(col) + 0.01 * labels.to(at::kFloat).view(col);
  }
  void init_parameters(std::uint64_t) {
    at::NoGradGuard no_grad;
    w.fill_(0.5f);
  }
  const ToyConfig& config() const { return config_; }
  at::Tensor w, last_labels;
  ToyConfig config_;
};

constexpr std::uint64_t kSeed = 42;

struct Setup {
  std::shared_ptr<ToyModel> model;
  std::unique_ptr<DiffusionObjective> objective;
};

Setup make(DiffusionObjectiveConfig config, std::int64_t classes = 10) {
  Setup s;
  s.model = std::make_shared<ToyModel>(classes);
  s.objective = std::make_unique<DiffusionObjective>(diffusion_model(s.model), config, kSeed);
  return s;
}

dew::data::Batch image_batch(std::int64_t B, bool labels = true) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  dew::data::Batch batch;
  batch.set("images", at::rand({B, 2, 3, 3}, gen) * 2 - 1);
  if (labels) batch.set("labels", at::randint(0, 10, {B}, gen));
  return batch;
}

const std::vector<std::int64_t> kCol{-1, 1, 1, 1};

// float32 loss over B examples of 18 elements each: ~(18 + B) roundings of 6e-8 relative.
constexpr double kRelTol = 1e-5;

TEST(DiffusionObjective, FlowLossEqualsTheFormula) {
  DiffusionObjectiveConfig c;  // flow, prediction auto = flow velocity, weighting none
  c.time_sampling = "uniform";
  c.label_dropout = 0.25;
  auto s = make(c);
  const auto batch = image_batch(16);
  const auto loss = s.objective->loss(batch, 7);
  EXPECT_EQ(loss.count, 16);

  // Replay the draws: times (1 - U), noise, dropout uniforms.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(noise_seed(kSeed, 7, 0));
  const auto t = (1.0 - at::rand({16}, gen)).to(at::kDouble);
  const auto eps = at::randn({16, 2, 3, 3}, gen).to(at::kDouble);
  const auto drop = at::rand({16}, gen) < 0.25;
  const auto labels = at::where(drop, at::full({16}, 10, at::kLong), batch.get("labels"));
  const auto x0 = batch.get("images").to(at::kDouble);
  const auto xt = (1 - t).view(kCol) * x0 + t.view(kCol) * eps;
  auto w = at::full({1}, 0.5, at::kDouble).requires_grad_(true);
  const auto out = w * xt + 1e-3 * (1000 * t).view(kCol) + 0.01 * labels.to(at::kDouble).view(kCol);
  const auto expected = (out - (eps - x0)).square().flatten(1).mean(1).sum();
  EXPECT_NEAR(loss.sum.item<double>(), expected.item<double>(), kRelTol * expected.item<double>());
  EXPECT_NEAR(loss.metrics.mean("loss") * 16, expected.item<double>(), kRelTol * expected.item<double>());
  EXPECT_TRUE(s.model->last_labels.equal(labels));

  // Gradients flow to the parameters and equal the formula's.
  loss.sum.backward();
  expected.backward();
  EXPECT_NEAR(s.model->w.grad().item<double>(), w.grad().item<double>(), kRelTol * std::abs(w.grad().item<double>()));
}

TEST(DiffusionObjective, VpVelocityWithMinSnrEqualsTheFormula) {
  DiffusionObjectiveConfig c;
  c.process = "vp";
  c.prediction = "v";
  c.weighting = "min_snr";
  c.min_snr_gamma = 5;
  c.label_dropout = 0;
  auto s = make(c);
  const auto batch = image_batch(32, /*labels=*/false);
  const auto loss = s.objective->loss(batch, 0);

  auto gen = at::make_generator<at::CPUGeneratorImpl>(noise_seed(kSeed, 0, 0));
  const auto t = at::randint(0, 1000, {32}, gen, at::TensorOptions().dtype(at::kLong));
  const auto eps = at::randn({32, 2, 3, 3}, gen).to(at::kDouble);
  const auto abar = s.objective->process().alphas_cumprod().index_select(0, t);
  const auto a = abar.sqrt(), sg = (1 - abar).sqrt(), snr = abar / (1 - abar);
  const auto x0 = batch.get("images").to(at::kDouble);
  const auto xt = a.view(kCol) * x0 + sg.view(kCol) * eps;
  const auto out = 0.5 * xt + 1e-3 * t.to(at::kDouble).view(kCol) + 0.01 * 10;  // unlabelled: the "no label" class 10
  const auto v = a.view(kCol) * eps - sg.view(kCol) * x0;
  const auto weight = snr.clamp_max(5) / (snr + 1);
  const auto expected = ((out - v).square().flatten(1).mean(1) * weight).sum().item<double>();
  EXPECT_NEAR(loss.sum.item<double>(), expected, kRelTol * expected);
  EXPECT_TRUE(s.model->last_labels.equal(at::full({32}, 10, at::kLong)));
}

TEST(DiffusionObjective, EdmPreconditionedLossEqualsTheFormula) {
  DiffusionObjectiveConfig c;
  c.process = "edm";  // prediction auto = sample, time sampling auto = lognormal, weighting none = lambda
  c.label_dropout = 0.5;
  auto s = make(c);
  const auto batch = image_batch(16);
  const auto loss = s.objective->loss(batch, 3);

  auto gen = at::make_generator<at::CPUGeneratorImpl>(noise_seed(kSeed, 3, 0));
  const auto sigma = (at::randn({16}, gen) * 1.2 - 1.2).exp().to(at::kDouble);
  const auto eps = at::randn({16, 2, 3, 3}, gen).to(at::kDouble);
  const auto drop = at::rand({16}, gen) < 0.5;
  const auto labels = at::where(drop, at::full({16}, 10, at::kLong), batch.get("labels"));
  const auto x0 = batch.get("images").to(at::kDouble);
  const double sd = 0.5;
  const auto total = sigma * sigma + sd * sd;
  const auto c_skip = sd * sd / total, c_out = sigma * sd / total.sqrt(), c_in = 1 / total.sqrt();
  const auto xt = x0 + sigma.view(kCol) * eps;
  const auto f = 0.5 * c_in.view(kCol) * xt + 1e-3 * (sigma.log() / 4).view(kCol) + 0.01 * labels.to(at::kDouble).view(kCol);
  const auto d = c_skip.view(kCol) * xt + c_out.view(kCol) * f;
  const auto lambda = total / (sigma * sd).square();
  const auto expected = ((d - x0).square().flatten(1).mean(1) * lambda).sum().item<double>();
  EXPECT_NEAR(loss.sum.item<double>(), expected, kRelTol * expected);
}

TEST(DiffusionObjective, SameSeedStepAndMicroBatchDrawTheSame) {
  DiffusionObjectiveConfig c;
  const auto batch = image_batch(8);
  auto a = make(c), b = make(c);
  const double first = a.objective->loss(batch, 5).sum.item<double>();
  const double second_micro = a.objective->loss(batch, 5).sum.item<double>();  // micro-batch 1 of step 5
  const double next_step = a.objective->loss(batch, 6).sum.item<double>();
  EXPECT_EQ(b.objective->loss(batch, 5).sum.item<double>(), first);  // a resumed run: a fresh objective
  EXPECT_EQ(b.objective->loss(batch, 5).sum.item<double>(), second_micro);
  EXPECT_NE(second_micro, first);
  EXPECT_NE(next_step, first);
  auto other_seed = std::make_unique<DiffusionObjective>(diffusion_model(std::make_shared<ToyModel>(10)), c, kSeed + 1);
  EXPECT_NE(other_seed->loss(batch, 5).sum.item<double>(), first);
}

TEST(DiffusionObjective, LabelDropoutRateAndEvaluation) {
  DiffusionObjectiveConfig c;
  c.label_dropout = 0.3;
  auto s = make(c);
  constexpr std::int64_t B = 4000;
  dew::data::Batch batch;
  batch.set("images", at::zeros({B, 1, 2, 2}));
  batch.set("labels", at::full({B}, 3, at::kLong));
  (void)s.objective->loss(batch, 0);
  const double dropped = (s.model->last_labels == 10).sum().item<double>();
  EXPECT_EQ(dropped + (s.model->last_labels == 3).sum().item<double>(), B);
  // Binomial(4000, 0.3): 5 standard deviations = 5 sqrt(4000 * 0.3 * 0.7) ~ 145.
  EXPECT_NEAR(dropped, 0.3 * B, 5 * std::sqrt(B * 0.3 * 0.7));

  // Evaluation never drops labels, draws from one fixed stream, and its quarters add up to the loss.
  const auto e1 = s.objective->evaluate(batch), e2 = s.objective->evaluate(batch);
  EXPECT_EQ((s.model->last_labels == 10).sum().item<double>(), 0);
  EXPECT_EQ(e1.mean("loss"), e2.mean("loss"));
  double sum = 0, count = 0;
  for (int q = 1; q <= 4; ++q) {
    const auto name = "loss_q" + std::to_string(q);
    ASSERT_TRUE(e1.has(name)) << name;  // logit-normal flow times reach every quarter in 4000 draws
    sum += e1.values().at(name).sum, count += e1.values().at(name).count;
  }
  EXPECT_EQ(count, B);
  EXPECT_NEAR(sum, e1.values().at("loss").sum, 1e-9 * e1.values().at("loss").sum);

  c.label_dropout = 0;
  auto none = make(c);
  (void)none.objective->loss(batch, 0);
  EXPECT_EQ((none.model->last_labels == 10).sum().item<double>(), 0);
}

TEST(DiffusionObjective, RefusesBadConfigsAndLabels) {
  auto error_for = [](auto change) {
    DiffusionObjectiveConfig c;
    change(c);
    return error_of([&] { make(c); });
  };
  EXPECT_NE(error_for([](auto& c) { c.process = "vp"; c.prediction = "flow"; }).find("diffusion.prediction = flow"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.process = "edm"; c.prediction = "noise"; }).find("diffusion.prediction = noise"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.time_sampling = "lognormal"; }).find("diffusion.time_sampling = lognormal"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.label_dropout = 1.5; }).find("diffusion.label_dropout = 1.5"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.weighting = "p3"; }).find("diffusion.weighting = \"p3\""), std::string::npos);
  EXPECT_EQ(error_for([](auto& c) { c.process = "vp"; c.prediction = "sample"; c.weighting = "p2"; }), "(no error)");

  auto s = make(DiffusionObjectiveConfig{});
  dew::data::Batch batch = image_batch(4);
  batch.set("labels", at::tensor({0, 1, 11, 2}, at::kLong));
  EXPECT_NE(error_of([&] { s.objective->loss(batch, 0); }).find("label 11"), std::string::npos);

  const auto j = s.objective->config_json();
  EXPECT_EQ(j["name"], "diffusion");
  EXPECT_EQ(j["diffusion"]["process"], "flow");
  EXPECT_EQ(j["diffusion"]["p_mean"], -1.2);
  EXPECT_EQ(j["model"]["num_classes"], 10);
}

}  // namespace
