#pragma once
// Building blocks the diffusion networks share: GroupNorm that keeps float32 parameters and computes in the
// input's dtype (as dew::nn::Linear does), the sinusoidal time features and adaLN's modulate. The convolution
// and the seeded initialisers are nn/patches/conv2d.h and nn/seeded_init.h.
#include <torch/nn/module.h>

#include <ATen/ATen.h>

#include <cstdint>

#include "dew/nn/patches/conv2d.h"
#include "dew/nn/seeded_init.h"

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

}  // namespace dew::nn::diffusion
