#include "dew/objectives/jepa/probes.h"

#include <torch/optim/adam.h>

#include <algorithm>

#include "dew/core/error.h"

namespace dew::objectives::jepa {

namespace {

void check(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test, const at::Tensor& test_labels,
           std::int64_t classes) {
  if (train.dim() != 2 || test.dim() != 2 || train.size(1) != test.size(1)) {
    fail("probe: features must be [N, D] with one D for train and test, got ", train.sizes(), " and ", test.sizes());
  }
  if (train.size(0) != train_labels.numel() || test.size(0) != test_labels.numel()) fail("probe: one label per feature row");
  if (train.size(0) < 1 || test.size(0) < 1 || classes < 2) fail("probe: needs training and test images of at least 2 classes");
}

}  // namespace

double knn_top1(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test, const at::Tensor& test_labels,
                std::int64_t classes, std::int64_t k, double temperature) {
  check(train, train_labels, test, test_labels, classes);
  if (k < 1 || !(temperature > 0)) fail("probe: k must be >= 1 and the temperature > 0, got ", k, " and ", temperature);
  at::NoGradGuard no_grad;
  auto unit = [](const at::Tensor& x) { return x.to(at::kFloat) / x.to(at::kFloat).norm(2, {1}, true).clamp_min(1e-12); };
  const auto bank = unit(train), queries = unit(test);
  const auto labels = train_labels.to(at::kLong);
  const std::int64_t kk = std::min(k, bank.size(0));
  double correct = 0;
  constexpr std::int64_t kChunk = 512;  // test rows per similarity block: 512 x N floats at a time
  for (std::int64_t start = 0; start < queries.size(0); start += kChunk) {
    const auto q = queries.narrow(0, start, std::min(kChunk, queries.size(0) - start));
    const auto [similarity, index] = at::matmul(q, bank.t()).topk(kk, 1);
    const auto weights = (similarity / temperature).exp();
    const auto votes = at::zeros({q.size(0), classes}).scatter_add_(1, labels.index({index.flatten()}).view(index.sizes()), weights);
    correct += (votes.argmax(1) == test_labels.narrow(0, start, q.size(0)).to(at::kLong)).sum().item<double>();
  }
  return correct / static_cast<double>(queries.size(0));
}

double linear_top1(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test, const at::Tensor& test_labels,
                   std::int64_t classes, const LinearProbeOptions& options) {
  check(train, train_labels, test, test_labels, classes);
  at::Tensor x = train.to(at::kFloat), x_test = test.to(at::kFloat);
  const auto mean = x.mean(0), std = x.std(0).clamp_min(1e-6);  // standardise with the training statistics
  x = (x - mean) / std;
  x_test = (x_test - mean) / std;
  const auto y = train_labels.to(at::kLong);
  auto weight = at::zeros({x.size(1), classes}).requires_grad_(true);
  auto bias = at::zeros({classes}).requires_grad_(true);
  torch::optim::Adam adam({weight, bias}, torch::optim::AdamOptions(options.learning_rate).weight_decay(options.weight_decay));
  for (std::int64_t s = 0; s < options.steps; ++s) {
    adam.zero_grad();
    at::cross_entropy_loss(at::addmm(bias, x, weight), y).backward();
    adam.step();
  }
  at::NoGradGuard no_grad;
  const auto predicted = at::addmm(bias, x_test, weight).argmax(1);
  return (predicted == test_labels.to(at::kLong)).to(at::kDouble).mean().item<double>();
}

}  // namespace dew::objectives::jepa
