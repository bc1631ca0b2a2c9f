// The image classifier (nn/vision/image_classifier.h), its objective, and the Fréchet distance between
// feature sets (objectives/frechet_distance.h): closed forms, invariances, and a classifier that learns.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include "dew/objectives/classifier_objective.h"
#include "dew/objectives/frechet_distance.h"
#include "test_support.h"

namespace {
using dew::nn::vision::ImageClassifier;
using dew::nn::vision::ImageClassifierConfig;
using namespace dew::objectives;

at::Generator gen(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

TEST(FrechetDistance, IsZeroForTheSameSetAndTheClosedFormForDiagonalGaussians) {
  auto a = at::randn({4000, 3}, gen(1), at::kDouble);
  EXPECT_NEAR(frechet_distance(feature_gaussian(a), feature_gaussian(a)), 0.0, 1e-9);

  // Diagonal (commuting) covariances: d = |mu_a - mu_b|^2 + sum_i (sqrt(c_a,i) - sqrt(c_b,i))^2, computed
  // here from the sample statistics themselves so the only error is the eigensolver's (float64).
  auto b = at::randn({3000, 3}, gen(2), at::kDouble) * at::tensor({2.0, 0.5, 1.0}, at::kDouble) + at::tensor({1.0, -1.0, 0.0}, at::kDouble);
  auto ga = feature_gaussian(a), gb = feature_gaussian(b);
  auto diag = [](const FeatureGaussian& g) {
    FeatureGaussian d = g;
    d.covariance = at::diag(at::diag(g.covariance));
    return d;
  };
  const auto da = diag(ga), db = diag(gb);
  const double want = (da.mean - db.mean).pow(2).sum().item<double>() +
                      (at::diag(da.covariance).sqrt() - at::diag(db.covariance).sqrt()).pow(2).sum().item<double>();
  EXPECT_NEAR(frechet_distance(da, db), want, 1e-9 * std::max(1.0, want));
  EXPECT_GT(want, 1.5);  // the means alone differ by 2

  // The distance is invariant under one rotation applied to both sets (it sees only means and covariances):
  // a non-diagonal case checked against the diagonal one.
  auto q = std::get<0>(at::linalg_qr(at::randn({3, 3}, gen(3), at::kDouble)));
  FeatureGaussian ra = da, rb = db;
  ra.mean = at::matmul(q, da.mean), ra.covariance = at::matmul(at::matmul(q, da.covariance), q.t());
  rb.mean = at::matmul(q, db.mean), rb.covariance = at::matmul(at::matmul(q, db.covariance), q.t());
  EXPECT_NEAR(frechet_distance(ra, rb), want, 1e-8 * std::max(1.0, want));
}

TEST(FrechetDistance, RefusesTooFewOrNonFiniteFeatures) {
  EXPECT_NE(dew::test::error_of([] { feature_gaussian(at::zeros({1, 4})); }).find("at least two"), std::string::npos);
  auto bad = at::zeros({3, 2});
  bad[1][1] = std::nan("");
  EXPECT_NE(dew::test::error_of([&] { feature_gaussian(bad); }).find("non-finite"), std::string::npos);
}

TEST(ImageClassifier, ShapesNamesAndConfigErrors) {
  ImageClassifier model(ImageClassifierConfig{});
  auto x = at::rand({5, 1, 28, 28}, gen(4)) * 2 - 1;
  EXPECT_EQ(model->features(x).sizes(), (std::vector<std::int64_t>{5, 128}));
  EXPECT_EQ(model->forward(x).sizes(), (std::vector<std::int64_t>{5, 10}));
  auto params = model->named_parameters();
  EXPECT_TRUE(params.contains("stages.0.conv1.weight"));
  EXPECT_TRUE(params.contains("stages.2.norm2.bias"));
  EXPECT_TRUE(params.contains("head.weight"));

  ImageClassifierConfig bad;
  bad.widths = {32, 60};
  EXPECT_NE(dew::test::error_of([&] { bad.validate(); }).find("model.widths holds 60"), std::string::npos);
  bad = {};
  bad.image_size = 4;
  bad.widths = {8, 8, 8, 8};
  EXPECT_NE(dew::test::error_of([&] { bad.validate(); }).find("below one pixel"), std::string::npos);
  EXPECT_NE(dew::test::error_of([&] { model->forward(at::zeros({2, 3, 28, 28})); }).find("[B, 1, 28, 28]"), std::string::npos);
}

TEST(ClassifierObjective, LearnsASeparableTaskAndRefusesLabelsOutOfRange) {
  // Class 0: a bright left half; class 1: a bright right half, with noise. 60 Adam steps separate them.
  ImageClassifierConfig config;
  config.image_size = 8;
  config.num_classes = 2;
  config.widths = {8, 16};
  ClassifierObjective objective{ImageClassifier(config)};
  objective.init(5);
  auto make = [](std::uint64_t seed) {
    auto g = gen(seed);
    auto labels = at::randint(0, 2, {32}, g, at::kLong);
    auto images = at::randn({32, 1, 8, 8}, g) * 0.3 - 0.5;
    for (std::int64_t i = 0; i < 32; ++i) images[i].narrow(2, labels[i].item<std::int64_t>() * 4, 4).add_(1.0);
    dew::data::Batch b;
    b.set("images", images);
    b.set("labels", labels);
    return b;
  };
  torch::optim::Adam adam(objective.module().parameters(), torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 60; ++step) {
    adam.zero_grad();
    auto l = objective.loss(make(100 + step), step);
    (l.sum / l.count).backward();
    adam.step();
  }
  auto stats = objective.evaluate(make(7));
  EXPECT_GT(stats.mean("accuracy"), 0.95);
  EXPECT_LT(stats.mean("loss"), 0.3);

  auto wrong = make(8);
  wrong.set("labels", at::full({32}, 2, at::kLong));
  EXPECT_NE(dew::test::error_of([&] { objective.evaluate(wrong); }).find("label 2 is outside"), std::string::npos);
}

}  // namespace
