#pragma once
// Seeded parameter initialisers shared by the image and patch models (DiT, UNet, ViT): each draws from a
// CPU generator so that a seed gives the same weights on every device.
#include <ATen/ATen.h>

#include <string>

namespace dew::nn {

// Seeded initialisers: values are drawn in float32 on the CPU from `generator` and copied into p (whatever
// its device), so a seed gives the same weights everywhere. fan_in/fan_out treat p as [size(0), rest].
void fill_normal(at::Tensor& p, double std_dev, at::Generator& generator);
void fill_uniform(at::Tensor& p, double bound, at::Generator& generator);
void fill_xavier_uniform(at::Tensor& p, at::Generator& generator);   // bound sqrt(6 / (fan_in + fan_out))
void fill_torch_default(at::Tensor& p, at::Generator& generator);    // PyTorch's Linear/Conv default: bound 1/sqrt(fan_in)

}  // namespace dew::nn
