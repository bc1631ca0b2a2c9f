#pragma once
// The 2-D convolution of the image models (patchify, UNet): float32 parameters, computed in the input's
// dtype, as dew::nn::Linear does.
#include <torch/nn/module.h>

#include <ATen/ATen.h>

#include <cstdint>

namespace dew::nn {

// A square-kernel 2-D convolution: weight [out, in, k, k], bias [out], cast to x's dtype at use.
class Conv2dImpl : public torch::nn::Module {
 public:
  Conv2dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t padding);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor weight, bias;
  std::int64_t stride, padding;
};
TORCH_MODULE(Conv2d);

}  // namespace dew::nn
