#pragma once
// A small convolutional image classifier: what `dew train classifier` trains, and the feature space
// `dew eval` measures a diffusion run's samples in (a Fréchet distance between the penultimate features of
// real and generated images, and the classifier's accuracy on class-conditional samples). For 28x28 grey
// images (Fashion-MNIST) the default is ~0.3 M parameters and trains to ~90% test accuracy in minutes on a
// CPU; it is not Inception, and its distances are comparable only with each other.
//
// Stages of [conv3x3 -> GroupNorm -> SiLU] x 2, each but the last followed by 2x2 average pooling; then
// global average pooling gives the features, and a linear layer the logits. Parameter names are stable
// (checkpoints and the shipped classifier use them): stages.N.conv{1,2}.{weight,bias}, stages.N.norm{1,2}.
// {weight,bias}, head.{weight,bias}.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace dew::nn::vision {

struct ImageClassifierConfig {
  std::int64_t image_size = 28;  // input [B, channels, image_size, image_size]
  std::int64_t channels = 1;
  std::int64_t num_classes = 10;
  std::vector<std::int64_t> widths = {32, 64, 128};  // channels of each stage; the last is the feature size
  std::int64_t groups = 8;                           // GroupNorm groups (divide every width)

  template <class V>
  void fields(V& v) {
    v("image_size", image_size, "input height and width in pixels (the data's, after resizing)");
    v("channels", channels, "input channels (1 grey, 3 RGB)");
    v("num_classes", num_classes, "classes (the data's label count)");
    v("widths", widths, "channels of each convolution stage; the last is the feature size");
    v("groups", groups, "GroupNorm groups; divides every width");
  }
  // Refuses sizes the network cannot have, naming model.<field> and the value.
  void validate() const;
};

class ImageClassifierImpl : public torch::nn::Module {
 public:
  explicit ImageClassifierImpl(ImageClassifierConfig config);
  // x: float [B, C, H, W] in [-1, 1]. Returns the pooled features [B, widths.back()].
  at::Tensor features(const at::Tensor& x);
  // Logits [B, num_classes] of pooled features (the last layer alone).
  at::Tensor classify(const at::Tensor& features) const;
  // Logits [B, num_classes]: classify(features(x)).
  at::Tensor forward(const at::Tensor& x);
  // Kaiming-uniform convolutions and head (LibTorch's defaults, from a seeded generator), unit norms.
  void init_parameters(std::uint64_t seed);
  const ImageClassifierConfig& config() const { return config_; }

 private:
  struct Stage {
    torch::nn::Module* module;
    at::Tensor conv1_w, conv1_b, norm1_w, norm1_b, conv2_w, conv2_b, norm2_w, norm2_b;
  };
  ImageClassifierConfig config_;
  std::vector<Stage> stages_;
  at::Tensor head_w_, head_b_;
};
TORCH_MODULE(ImageClassifier);

}  // namespace dew::nn::vision
