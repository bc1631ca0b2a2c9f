#include "dew/nn/vision/image_classifier.h"

#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "dew/core/error.h"

namespace dew::nn::vision {

void ImageClassifierConfig::validate() const {
  if (image_size < 4) fail("model.image_size must be >= 4, got ", image_size);
  if (channels < 1) fail("model.channels must be >= 1, got ", channels);
  if (num_classes < 2) fail("model.num_classes must be >= 2 (a classifier needs two classes), got ", num_classes);
  if (widths.empty()) fail("model.widths must list at least one stage width");
  if (groups < 1) fail("model.groups must be >= 1, got ", groups);
  for (auto w : widths) {
    if (w < 1 || w % groups != 0) fail("model.widths holds ", w, ", which model.groups = ", groups, " does not divide; use multiples of ", groups);
  }
  // Each stage but the last halves the size: it must stay >= 1 pixel.
  const auto pools = static_cast<std::int64_t>(widths.size()) - 1;
  if (pools >= 62 || (image_size >> pools) < 1) {
    fail("model.widths has ", widths.size(), " stages, which pool a ", image_size, "-pixel image below one pixel; use fewer stages");
  }
}

namespace {

// A submodule holding `weight` and `bias` (names must nest: "stages.0.conv1.weight").
std::pair<at::Tensor, at::Tensor> weight_and_bias(torch::nn::Module& parent, const std::string& name, at::Tensor weight,
                                                  at::Tensor bias) {
  auto m = parent.register_module(name, std::make_shared<torch::nn::Module>());
  return {m->register_parameter("weight", std::move(weight)), m->register_parameter("bias", std::move(bias))};
}

}  // namespace

ImageClassifierImpl::ImageClassifierImpl(ImageClassifierConfig config) : config_(std::move(config)) {
  config_.validate();
  auto stages = register_module("stages", torch::nn::ModuleList());
  std::int64_t in = config_.channels;
  for (std::size_t i = 0; i < config_.widths.size(); ++i) {
    const std::int64_t w = config_.widths[i];
    auto m = std::make_shared<torch::nn::Module>();
    Stage s;
    s.module = m.get();
    std::tie(s.conv1_w, s.conv1_b) = weight_and_bias(*m, "conv1", at::empty({w, in, 3, 3}), at::zeros({w}));
    std::tie(s.norm1_w, s.norm1_b) = weight_and_bias(*m, "norm1", at::ones({w}), at::zeros({w}));
    std::tie(s.conv2_w, s.conv2_b) = weight_and_bias(*m, "conv2", at::empty({w, w, 3, 3}), at::zeros({w}));
    std::tie(s.norm2_w, s.norm2_b) = weight_and_bias(*m, "norm2", at::ones({w}), at::zeros({w}));
    stages->push_back(m);
    stages_.push_back(s);
    in = w;
  }
  std::tie(head_w_, head_b_) = weight_and_bias(*this, "head", at::empty({config_.num_classes, in}), at::zeros({config_.num_classes}));
  init_parameters(0);
}

void ImageClassifierImpl::init_parameters(std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // Kaiming uniform with a = sqrt(5), as torch.nn.Conv2d/Linear: bound = 1 / sqrt(fan_in).
  auto uniform = [&](at::Tensor& t, std::int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    t.copy_(at::empty(t.sizes()).uniform_(-bound, bound, gen));
  };
  std::int64_t in = config_.channels;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    auto& s = stages_[i];
    const std::int64_t w = config_.widths[i];
    uniform(s.conv1_w, in * 9);
    uniform(s.conv1_b, in * 9);
    uniform(s.conv2_w, w * 9);
    uniform(s.conv2_b, w * 9);
    s.norm1_w.fill_(1), s.norm1_b.zero_(), s.norm2_w.fill_(1), s.norm2_b.zero_();
    in = w;
  }
  uniform(head_w_, in);
  uniform(head_b_, in);
}

at::Tensor ImageClassifierImpl::features(const at::Tensor& x) {
  if (x.dim() != 4 || x.size(1) != config_.channels || x.size(2) != config_.image_size || x.size(3) != config_.image_size) {
    fail("the classifier reads images of shape [B, ", config_.channels, ", ", config_.image_size, ", ", config_.image_size,
         "], got ", x.sizes());
  }
  at::Tensor h = x.to(at::kFloat);
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    const auto& s = stages_[i];
    h = at::silu(at::group_norm(at::conv2d(h, s.conv1_w, s.conv1_b, 1, 1), config_.groups, s.norm1_w, s.norm1_b));
    h = at::silu(at::group_norm(at::conv2d(h, s.conv2_w, s.conv2_b, 1, 1), config_.groups, s.norm2_w, s.norm2_b));
    if (i + 1 < stages_.size()) h = at::avg_pool2d(h, 2);
  }
  return h.mean({2, 3});
}

at::Tensor ImageClassifierImpl::classify(const at::Tensor& features) const { return at::linear(features, head_w_, head_b_); }

at::Tensor ImageClassifierImpl::forward(const at::Tensor& x) { return classify(features(x)); }

}  // namespace dew::nn::vision
