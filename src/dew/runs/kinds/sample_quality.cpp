#include "dew/runs/kinds/sample_quality.h"

#include <system_error>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/parameters.h"
#include "dew/objectives/frechet_distance.h"

namespace fs = std::filesystem;

namespace dew::runs {

fs::path reference_classifier_dir() { return data::asset_dir() / "classifiers" / "fashion_mnist"; }

std::optional<nn::vision::ImageClassifier> reference_classifier(std::int64_t channels, std::int64_t image_size,
                                                                std::int64_t num_classes, std::string* why) {
  const fs::path dir = reference_classifier_dir();
  std::error_code ec;
  if (!fs::exists(dir / "config.json", ec) || !fs::exists(dir / "model.safetensors", ec)) {
    *why = str("the reference classifier is missing from '", dir.string(), "' (config.json, model.safetensors)");
    return std::nullopt;
  }
  nn::vision::ImageClassifierConfig config;
  config::from_json(config::parse_json_file(dir / "config.json"), config, (dir / "config.json").string());
  if (config.channels != channels || config.image_size != image_size || config.num_classes != num_classes) {
    *why = str("the reference classifier reads ", config.channels, "x", config.image_size, "x", config.image_size, " images in ",
               config.num_classes, " classes (Fashion-MNIST's); this run's are ", channels, "x", image_size, "x", image_size,
               " in ", num_classes, ", so frechet_distance and class_accuracy are not computed");
    return std::nullopt;
  }
  nn::vision::ImageClassifier classifier(config);
  nn::load_parameters(*classifier, formats::SafetensorsFile(dir / "model.safetensors"));
  classifier->eval();
  return classifier;
}

SampleQuality sample_quality(nn::vision::ImageClassifier& classifier, const at::Tensor& real, const at::Tensor& generated,
                             const at::Tensor& labels) {
  at::NoGradGuard no_grad;
  const auto device = classifier->parameters().front().device();
  auto features_of = [&](const at::Tensor& images, at::Tensor* predicted) {
    std::vector<at::Tensor> features, classes;
    for (std::int64_t start = 0; start < images.size(0); start += 256) {
      const auto n = std::min<std::int64_t>(256, images.size(0) - start);
      const at::Tensor f = classifier->features(images.narrow(0, start, n).to(device));
      features.push_back(f.cpu());
      if (predicted) classes.push_back(classifier->classify(f).argmax(-1).cpu());
    }
    if (predicted) *predicted = at::cat(classes);
    return at::cat(features);
  };
  at::Tensor predicted;
  const at::Tensor real_features = features_of(real, nullptr);
  const at::Tensor generated_features = features_of(generated, &predicted);
  SampleQuality q;
  q.frechet_distance = objectives::frechet_distance(objectives::feature_gaussian(real_features),
                                                    objectives::feature_gaussian(generated_features));
  const at::Tensor labelled = labels.cpu() < classifier->config().num_classes;
  const double counted = labelled.sum().item<double>();
  q.class_accuracy = counted > 0 ? ((predicted == labels.cpu()) & labelled).sum().item<double>() / counted : 0.0;
  return q;
}

}  // namespace dew::runs
