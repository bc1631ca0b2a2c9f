#pragma once
// The UNet of DDPM (Ho et al. 2020) with ADM's class conditioning (Dhariwal & Nichol 2021): residual blocks
// (GroupNorm, SiLU, 3x3 conv, plus a projection of the time + class embedding, dropout, a 1x1 skip when the
// channels change), self-attention at the chosen feature-map sizes and in the middle, a stride-2 conv down
// and a nearest-neighbour upsample + conv up, and every encoder activation concatenated back in on the way
// up. The layout and the parameter names are diffusers' UNet2DModel (DownBlock2D / AttnDownBlock2D,
// UNetMidBlock2D, UpBlock2D / AttnUpBlock2D, num_class_embeds = num_classes + 1), so a UNet2DModel of the same
// shape loads by name:
//   conv_in, time_embedding.linear_{1,2}, class_embedding.weight,
//   down_blocks.L.resnets.J.{norm1,conv1,time_emb_proj,norm2,conv2,conv_shortcut}, down_blocks.L.attentions.J.
//   {group_norm,to_q,to_k,to_v,to_out.0}, down_blocks.L.downsamplers.0.conv, mid_block.{resnets.0,attentions.0,
//   resnets.1}, up_blocks.L.{resnets,attentions}.J, up_blocks.L.upsamplers.0.conv, conv_norm_out, conv_out.
// Level L of the way down works at image_size / 2^L with base_channels * channel_mult[L] channels; up block L
// mirrors down level (levels - 1 - L) and has res_blocks + 1 residual blocks.
#include <torch/nn/modules/container/modulelist.h>

#include "dew/nn/causal_transformer.h"  // Embedding
#include "dew/nn/diffusion/image_layers.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/nn/layers.h"

namespace dew::nn::diffusion {

inline constexpr double kUNetNormEps = 1e-5;  // diffusers' norm_eps default (and ADM's GroupNorm32)

// time_embedding: sinusoidal features (base_channels of them) -> Linear -> SiLU -> Linear, to 4 base_channels.
class UNetTimeEmbeddingImpl : public torch::nn::Module {
 public:
  UNetTimeEmbeddingImpl(std::int64_t in, std::int64_t out);
  at::Tensor forward(const at::Tensor& features) const;
  Linear linear_1{nullptr}, linear_2{nullptr};
};
TORCH_MODULE(UNetTimeEmbedding);

class ResnetBlockImpl : public torch::nn::Module {
 public:
  ResnetBlockImpl(std::int64_t in, std::int64_t out, std::int64_t time_features, std::int64_t groups, double dropout);
  // x [B, in, H, W]; emb_act = SiLU(time + class embedding) [B, time_features].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& emb_act);
  GroupNorm norm1{nullptr}, norm2{nullptr};
  Conv2d conv1{nullptr}, conv2{nullptr}, conv_shortcut{nullptr};  // conv_shortcut only when in != out
  Linear time_emb_proj{nullptr};
  double dropout;
};
TORCH_MODULE(ResnetBlock);

// Self-attention over the H*W positions of a feature map, with a GroupNorm before and the input added after.
class SpatialAttentionImpl : public torch::nn::Module {
 public:
  SpatialAttentionImpl(std::int64_t channels, std::int64_t head_channels, std::int64_t groups);
  at::Tensor forward(const at::Tensor& x) const;
  GroupNorm group_norm{nullptr};
  Linear to_q{nullptr}, to_k{nullptr}, to_v{nullptr}, out{nullptr};
  torch::nn::ModuleList to_out{nullptr};  // [out]: diffusers' to_out.0 (its to_out.1 is a parameterless dropout)
  std::int64_t heads;
};
TORCH_MODULE(SpatialAttention);

// downsamplers.0 (a 3x3 conv, stride 2, padding 1) or upsamplers.0 (nearest x2, then a 3x3 conv).
class ResampleImpl : public torch::nn::Module {
 public:
  ResampleImpl(std::int64_t channels, bool down);
  at::Tensor forward(const at::Tensor& x) const;
  Conv2d conv{nullptr};
  bool down;
};
TORCH_MODULE(Resample);

// One level of the encoder (down_blocks.L), the decoder (up_blocks.L) or the middle (mid_block).
class UNetBlockImpl : public torch::nn::Module {
 public:
  // resampler: "downsamplers", "upsamplers" or "" (none); the owner fills the lists.
  UNetBlockImpl(bool attention, const std::string& resampler);
  torch::nn::ModuleList resnets{nullptr}, attentions{nullptr}, resamplers{nullptr};  // attentions/resamplers may be null
};
TORCH_MODULE(UNetBlock);

class UNetImpl : public ImageModelImpl {
 public:
  explicit UNetImpl(ImageModelConfig config);  // validates
  at::Tensor forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) override;
  // PyTorch's default for convolutions and linear layers (uniform, bound 1/sqrt(fan_in)), zero biases,
  // GroupNorm at the identity, N(0, 1) class embeddings (nn.Embedding's default, as ADM and diffusers), and
  // ADM's zero_module on each residual block's conv2, each attention's output projection and conv_out: every
  // residual branch starts at zero and so does the output.
  void init_parameters(std::uint64_t seed) override;
  const ImageModelConfig& config() const override { return config_; }

  Conv2d conv_in{nullptr}, conv_out{nullptr};
  UNetTimeEmbedding time_embedding{nullptr};
  Embedding class_embedding{nullptr};  // null when num_classes = 0
  torch::nn::ModuleList down_blocks{nullptr}, up_blocks{nullptr};
  UNetBlock mid_block{nullptr};
  GroupNorm conv_norm_out{nullptr};

 private:
  ImageModelConfig config_;
};

}  // namespace dew::nn::diffusion
