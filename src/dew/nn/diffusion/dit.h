#pragma once
// DiT (Peebles & Xie 2023, "Scalable Diffusion Models with Transformers"; the spec's SimpleDiT): the image
// cut into patch_size x patch_size patches, each a token (a strided convolution), plus 2-D positions;
// transformer blocks whose LayerNorms take their shift and scale, and whose residual branches their gate,
// from the conditioning c = time embedding + class embedding (adaLN-Zero); a final adaLN and linear layer
// back to patches, which unpatchify reassembles into the image.
//
// Parameter names are facebookresearch/DiT's (models.py), so its structure reads across:
//   x_embedder.proj.{weight,bias}                 Conv2d(C, dim, patch, stride patch)
//   pos_embed                                     [1, tokens, dim], only with positions = learned
//   t_embedder.mlp.{0,2}.{weight,bias}            Linear(256, dim), SiLU, Linear(dim, dim)
//   y_embedder.embedding_table.weight             [num_classes + 1, dim] (absent when num_classes = 0)
//   blocks.N.attn.{qkv,proj}.{weight,bias}, blocks.N.mlp.{fc1,fc2}.{weight,bias},
//   blocks.N.adaLN_modulation.1.{weight,bias}     Linear(dim, 6 dim) after SiLU
//   final_layer.adaLN_modulation.1.{weight,bias}  Linear(dim, 2 dim); final_layer.linear  Linear(dim, patch^2 C)
#include <torch/nn/modules/container/modulelist.h>

#include "dew/nn/causal_transformer.h"  // Embedding
#include "dew/nn/diffusion/image_layers.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/nn/layers.h"
#include "dew/nn/patches/patch_layers.h"

namespace dew::nn::diffusion {

// The frequency features the time embedding's MLP reads (DiT's frequency_embedding_size).
inline constexpr std::int64_t kDiTFrequencyFeatures = 256;

// t_embedder: sinusoidal features of the time -> Linear -> SiLU -> Linear.
class TimestepEmbedderImpl : public torch::nn::Module {
 public:
  explicit TimestepEmbedderImpl(std::int64_t dim);
  at::Tensor forward(const at::Tensor& time, c10::ScalarType dtype) const;  // [B] -> [B, dim]
  torch::nn::ModuleList mlp{nullptr};  // [Linear(256, dim), SiLU (no parameters), Linear(dim, dim)]
  Linear linear_in{nullptr}, linear_out{nullptr};  // mlp.0 and mlp.2
};
TORCH_MODULE(TimestepEmbedder);

// y_embedder: one row per class plus the "no label" row (classifier-free guidance's null class).
class LabelEmbedderImpl : public torch::nn::Module {
 public:
  LabelEmbedderImpl(std::int64_t num_classes, std::int64_t dim);
  at::Tensor forward(const at::Tensor& labels, c10::ScalarType dtype) const;  // [B] -> [B, dim]
  Embedding embedding_table{nullptr};
};
TORCH_MODULE(LabelEmbedder);

class DiTBlockImpl : public torch::nn::Module {
 public:
  explicit DiTBlockImpl(const ImageModelConfig& config);
  // x [B, N, dim]; c_act = SiLU(c) [B, dim], shared by every block.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& c_act) const;
  PatchAttention attn{nullptr};
  PatchMlp mlp{nullptr};
  torch::nn::ModuleList adaLN_modulation{nullptr};  // [SiLU (no parameters), Linear(dim, 6 dim)]
  Linear modulation{nullptr};                        // adaLN_modulation.1
};
TORCH_MODULE(DiTBlock);

class DiTFinalLayerImpl : public torch::nn::Module {
 public:
  explicit DiTFinalLayerImpl(const ImageModelConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& c_act) const;  // [B, N, patch^2 C]
  Linear linear{nullptr};
  torch::nn::ModuleList adaLN_modulation{nullptr};  // [SiLU, Linear(dim, 2 dim)]
  Linear modulation{nullptr};                        // adaLN_modulation.1
};
TORCH_MODULE(DiTFinalLayer);

class DiTImpl : public ImageModelImpl {
 public:
  explicit DiTImpl(ImageModelConfig config);  // validates
  at::Tensor forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) override;
  // DiT's initialize_weights: Xavier-uniform matrices (the patch convolution as a matrix), N(0, 0.02) for
  // the time MLP and the class table, zero biases, zero adaLN modulations and final linear layer; learned
  // positions start at the sin-cos table.
  void init_parameters(std::uint64_t seed) override;
  const ImageModelConfig& config() const override { return config_; }

  PatchEmbed x_embedder{nullptr};
  TimestepEmbedder t_embedder{nullptr};
  LabelEmbedder y_embedder{nullptr};  // null when num_classes = 0
  torch::nn::ModuleList blocks{nullptr};
  DiTFinalLayer final_layer{nullptr};
  at::Tensor pos_embed;  // a parameter (learned) or a buffer (sincos) [1, N, dim]

 private:
  at::Tensor unpatchify(const at::Tensor& tokens) const;
  ImageModelConfig config_;
};

}  // namespace dew::nn::diffusion
