#pragma once
// How good a diffusion run's samples are, in the feature space of the image classifier dew ships
// (assets/classifiers/fashion_mnist: trained by `dew train classifier` on Fashion-MNIST, see
// tools/make_fashion_classifier.sh): the Fréchet distance between the classifier's penultimate features of
// real and generated images (FID's recipe with another network: comparable between dew runs only, not with
// published FIDs), and the classifier's accuracy on class-conditional samples (how well the label and the
// guidance steer the model).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "dew/nn/vision/image_classifier.h"

namespace dew::runs {

// The shipped classifier, or nullopt with the reason in `why` when it cannot read these images (another
// size, channel count or class count than it was trained on).
std::optional<nn::vision::ImageClassifier> reference_classifier(std::int64_t channels, std::int64_t image_size,
                                                                std::int64_t num_classes, std::string* why);
std::filesystem::path reference_classifier_dir();  // DEW_ASSETS or the source tree's assets/classifiers/fashion_mnist

struct SampleQuality {
  double frechet_distance = 0;
  double class_accuracy = 0;  // over the samples whose label is a class (not unconditional ones)
};

// real, generated: float [N, C, H, W] in [-1, 1]; labels [N] the classes the generated images were drawn for.
SampleQuality sample_quality(nn::vision::ImageClassifier& classifier, const at::Tensor& real, const at::Tensor& generated,
                             const at::Tensor& labels);

}  // namespace dew::runs
