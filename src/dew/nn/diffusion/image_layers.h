#pragma once
// Building blocks the image networks share: a 2-D convolution and GroupNorm that keep float32 parameters
// and compute in the input's dtype (as dew::nn::Linear does), the sinusoidal time features, adaLN's
// modulate, and the seeded initialisers both models draw from.
#include <torch/nn/module.h>

#include <ATen/ATen.h>

#include <cstdint>

namespace dew::nn::diffusion {

// Sinusoidal features of a float time t: [cos(t f_0..f_{h-1}), sin(t f_0..f_{h-1})], f_i = max_period^(-i/h),
// h = features / 2 (a zero column appended when features is odd). This is DiT's TimestepEmbedder and
// diffusers' Timesteps(flip_sin_to_cos=True, downscale_freq_shift=0). Computed in float64 and returned as
// float32 [B, features]: VP times reach 999 and flow's 1000 t as much, where float32's t * f would be off by
// ~1000 * 6e-8 before the sine.
at::Tensor timestep_embedding(const at::Tensor& time, std::int64_t features, double max_period = 10000.0);

// x * (1 + scale) + shift, with shift and scale [B, D] broadcast over the tokens of x [B, N, D] (adaLN).
at::Tensor modulate(const at::Tensor& x, const at::Tensor& shift, const at::Tensor& scale);

// LayerNorm over the last dimension without a learned scale or shift (DiT's norms; adaLN supplies both),
// computed in float32 and cast back to x's dtype.
at::Tensor plain_layer_norm(const at::Tensor& x, double eps);

// A square-kernel 2-D convolution: weight [out, in, k, k], bias [out], cast to x's dtype at use.
class Conv2dImpl : public torch::nn::Module {
 public:
  Conv2dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t padding);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor weight, bias;
  std::int64_t stride, padding;
};
TORCH_MODULE(Conv2d);

// GroupNorm with a per-channel scale and shift, computed in float32 and cast back to x's dtype.
class GroupNormImpl : public torch::nn::Module {
 public:
  GroupNormImpl(std::int64_t groups, std::int64_t channels, double eps);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor weight, bias;
  std::int64_t groups;
  double eps;
};
TORCH_MODULE(GroupNorm);

// Seeded initialisers: values are drawn in float32 on the CPU from `generator` and copied into p (whatever
// its device), so a seed gives the same weights everywhere. fan_in/fan_out treat p as [size(0), rest].
void fill_normal(at::Tensor& p, double std_dev, at::Generator& generator);
void fill_uniform(at::Tensor& p, double bound, at::Generator& generator);
void fill_xavier_uniform(at::Tensor& p, at::Generator& generator);   // bound sqrt(6 / (fan_in + fan_out))
void fill_torch_default(at::Tensor& p, at::Generator& generator);    // PyTorch's Linear/Conv default: bound 1/sqrt(fan_in)

bool ends_with(const std::string& name, const std::string& suffix);

}  // namespace dew::nn::diffusion
