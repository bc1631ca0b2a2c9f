#pragma once
// I-JEPA's networks (Assran et al. 2023; facebookresearch/ijepa's vision_transformer.py), built from the patch
// transformer layers DiT uses too (nn/patches/patch_layers.h: patch embedding, fixed 2-D sin-cos positions,
// attention, MLP).
//
//   VisionTransformer: patches -> (+ positions) -> keep the given patches -> pre-norm transformer blocks ->
//     LayerNorm. The context encoder sees the context patches only; the target encoder (same config) all.
//   JepaPredictor: the context features, projected to a narrower width with their positions, plus one
//     learned mask token per target patch carrying that patch's position, through its own blocks; the
//     outputs at the mask tokens, projected back to the encoder's width, predict the target features. Each
//     target block is predicted in a pass of its own (the context repeated), as I-JEPA does.
// Patch indices are row-major on the (image_size / patch_size)^2 grid, as multiblock_mask.h draws them.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <ATen/ATen.h>

#include <cstdint>

#include "dew/nn/patches/patch_layers.h"
#include "dew/nn/layers.h"

namespace dew::nn::vision {

struct VisionTransformerConfig {
  std::int64_t image_size = 28, channels = 1, patch_size = 4;
  std::int64_t dim = 192, depth = 6, heads = 3;
  double mlp_ratio = 4.0;
  std::int64_t predictor_dim = 96, predictor_depth = 3, predictor_heads = 3;

  template <class V>
  void fields(V& v) {
    v("image_size", image_size, "height and width of the (square) images");
    v("channels", channels, "image channels");
    v("patch_size", patch_size, "pixels per patch side; must divide image_size");
    v("dim", dim, "encoder width");
    v("depth", depth, "encoder blocks");
    v("heads", heads, "encoder attention heads; must divide dim");
    v("mlp_ratio", mlp_ratio, "MLP hidden width / width (encoder and predictor)");
    v("predictor_dim", predictor_dim, "predictor width");
    v("predictor_depth", predictor_depth, "predictor blocks");
    v("predictor_heads", predictor_heads, "predictor attention heads; must divide predictor_dim");
  }
  // Refuses sizes that do not fit, naming model.<field> and the value.
  void validate() const;
  std::int64_t grid() const { return image_size / patch_size; }
  std::int64_t patches() const { return grid() * grid(); }
};

// Pre-norm transformer block: x + attn(LN(x)), then + mlp(LN(.)); LayerNorms with scale and shift.
class ViTBlockImpl : public torch::nn::Module {
 public:
  ViTBlockImpl(std::int64_t dim, std::int64_t heads, double mlp_ratio);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor norm1_weight, norm1_bias, norm2_weight, norm2_bias;
  PatchAttention attn{nullptr};
  PatchMlp mlp{nullptr};
};
TORCH_MODULE(ViTBlock);

class VisionTransformerImpl : public torch::nn::Module {
 public:
  explicit VisionTransformerImpl(VisionTransformerConfig config);
  // images [B, C, S, S] -> features [B, N, dim] of every patch, or [B, K, dim] of the patches `keep` [B, K].
  at::Tensor forward(const at::Tensor& images, const at::Tensor& keep = {}) const;
  void init_parameters(std::uint64_t seed);
  const VisionTransformerConfig& config() const { return config_; }

  PatchEmbed patch_embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  at::Tensor pos_embed;  // buffer [1, N, dim], fixed sin-cos
  at::Tensor norm_weight, norm_bias;

 private:
  VisionTransformerConfig config_;
};
TORCH_MODULE(VisionTransformer);

class JepaPredictorImpl : public torch::nn::Module {
 public:
  explicit JepaPredictorImpl(VisionTransformerConfig config);
  // context [B, Kc, dim] (the context encoder's output), context_idx [B, Kc], target_idx [B, M, Kt]
  // -> predictions [B, M, Kt, dim] of the target encoder's features at the target patches.
  at::Tensor forward(const at::Tensor& context, const at::Tensor& context_idx, const at::Tensor& target_idx) const;
  void init_parameters(std::uint64_t seed);

  Linear predictor_embed{nullptr}, predictor_proj{nullptr};
  torch::nn::ModuleList predictor_blocks{nullptr};
  at::Tensor mask_token;  // [1, 1, predictor_dim]
  at::Tensor pos_embed;   // buffer [1, N, predictor_dim]
  at::Tensor norm_weight, norm_bias;

 private:
  VisionTransformerConfig config_;
};
TORCH_MODULE(JepaPredictor);

// x [B, N, D], index [B, K] -> [B, K, D]: the rows of each image at its indices.
at::Tensor gather_patches(const at::Tensor& x, const at::Tensor& index);

}  // namespace dew::nn::vision
