#pragma once
// How good frozen features are for classification, the two standard probes of self-supervised encoders:
//   knn_top1: weighted k-nearest-neighbour voting (Wu et al. 2018, as DINO and I-JEPA evaluate): cosine
//     similarity to every training feature, the k most similar vote for their class with weight
//     exp(similarity / temperature), the class with the most weight wins;
//   linear_top1: a linear classifier (softmax regression on standardised features) trained on the training
//     features with full-batch Adam, then scored on the test features.
// Features float [N, D], labels int64 [N] in [0, classes). Both return top-1 accuracy on the test set.
#include <ATen/ATen.h>

#include <cstdint>

namespace dew::objectives::jepa {

double knn_top1(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test, const at::Tensor& test_labels,
                std::int64_t classes, std::int64_t k = 20, double temperature = 0.07);

struct LinearProbeOptions {
  std::int64_t steps = 300;      // full-batch Adam steps
  double learning_rate = 1e-2;
  double weight_decay = 1e-4;
};

double linear_top1(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test, const at::Tensor& test_labels,
                   std::int64_t classes, const LinearProbeOptions& options = {});

}  // namespace dew::objectives::jepa
