#pragma once
// The layers of a transformer over image patches that DiT (nn/diffusion/dit.h) and the ViT encoders of JEPA
// and the classifier (nn/vision/) share: patchify, fixed 2-D positions, self-attention and the MLP. Parameter
// names follow facebookresearch/DiT (proj; qkv, proj; fc1, fc2), which timm's ViT uses too.
#include <torch/nn/module.h>

#include <ATen/ATen.h>

#include <cstdint>

#include "dew/nn/layers.h"
#include "dew/nn/patches/conv2d.h"

namespace dew::nn {

// DiT's fixed 2-D sin-cos table, float32 [grid * grid, dim]: token (row i, column j) gets
// [sin(j w), cos(j w), sin(i w), cos(i w)] with w_k = 10000^(-k / (dim / 4)), k < dim / 4 (computed in float64).
at::Tensor sincos_positions_2d(std::int64_t dim, std::int64_t grid);

// The patchify convolution (DiT's x_embedder, a ViT's patch_embed).
class PatchEmbedImpl : public torch::nn::Module {
 public:
  PatchEmbedImpl(std::int64_t channels, std::int64_t dim, std::int64_t patch);
  at::Tensor forward(const at::Tensor& x) const;  // [B, C, H, W] -> [B, (H/p)(W/p), dim], row-major patches
  Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

// Multi-head self-attention over all tokens (no mask): qkv projection, attention, output projection.
class PatchAttentionImpl : public torch::nn::Module {
 public:
  PatchAttentionImpl(std::int64_t dim, std::int64_t heads);
  // [B, N, dim]; with `residual` [B, N, dim], residual + the attention, added inside the output projection.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& residual = {}) const;
  Linear qkv{nullptr}, proj{nullptr};
  std::int64_t heads;
};
TORCH_MODULE(PatchAttention);

// The transformer MLP: fc1, tanh-GELU, fc2.
class PatchMlpImpl : public torch::nn::Module {
 public:
  PatchMlpImpl(std::int64_t dim, std::int64_t hidden);
  // fc2(GELU_tanh(fc1(x))), plus `residual` when given (added inside fc2's product).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& residual = {}) const;
  Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(PatchMlp);

}  // namespace dew::nn
