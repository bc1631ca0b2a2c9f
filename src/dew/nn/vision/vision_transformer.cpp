#include "dew/nn/vision/vision_transformer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>
#include <string>

#include "dew/core/error.h"
#include "dew/nn/layer_norm.h"
#include "dew/nn/seeded_init.h"

namespace dew::nn::vision {

namespace {

constexpr double kNormEps = 1e-6;  // I-JEPA's LayerNorm eps

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return affine_layer_norm(x, weight, bias, kNormEps);
}

torch::nn::ModuleList make_blocks(std::int64_t depth, std::int64_t dim, std::int64_t heads, double mlp_ratio) {
  torch::nn::ModuleList blocks;
  for (std::int64_t i = 0; i < depth; ++i) blocks->push_back(ViTBlock(dim, heads, mlp_ratio));
  return blocks;
}

at::Tensor run_blocks(const torch::nn::ModuleList& blocks, at::Tensor x) {
  for (const auto& block : *blocks) x = block->as<ViTBlockImpl>()->forward(x);
  return x;
}

// I-JEPA's init: linear weights normal(0, 0.02) (it truncates at 2 std; a plain normal here), biases 0,
// LayerNorm scales 1; positions fixed. The patch convolution gets 0.02 scaled by sqrt(768 / fan-in): I-JEPA's
// own 16 x 16 x 3 patches (fan-in 768) keep exactly 0.02, while a 4 x 4 grey patch (fan-in 16) gets 0.14.
// With 0.02 there, a small patch's embedding is ~0.1 against sin-cos positions of ~0.7: every image
// starts out looking alike to the encoder, the target features are nearly constant (target_std ~0.05 for
// the first few hundred steps) and the predictor only learns the positions meanwhile. Sorted names: the
// draws depend on nothing else.
void init_like_ijepa(torch::nn::Module& module, std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> sorted;
  for (const auto& item : module.named_parameters()) sorted.emplace(item.key(), item.value());
  for (auto& [name, p] : sorted) {
    if (name.ends_with("_weight") && p.dim() == 1) {
      p.fill_(1.0);  // LayerNorm scales
    } else if (name.ends_with("bias")) {
      p.zero_();
    } else if (p.dim() == 4) {  // the patch convolution [dim, channels, patch, patch]
      const double fan_in = static_cast<double>(p.numel() / p.size(0));
      fill_normal(p, 0.02 * std::sqrt(768.0 / fan_in), generator);
    } else {
      fill_normal(p, 0.02, generator);
    }
  }
}

}  // namespace

void VisionTransformerConfig::validate() const {
  if (image_size < 2) fail("model.image_size must be >= 2, got ", image_size);
  if (channels < 1) fail("model.channels must be >= 1, got ", channels);
  if (patch_size < 1 || image_size % patch_size != 0 || image_size / patch_size < 2) {
    fail("model.patch_size = ", patch_size, " must divide model.image_size = ", image_size, " into a grid of at least 2 x 2");
  }
  if (dim < 1 || heads < 1 || dim % heads != 0) fail("model.heads = ", heads, " must divide model.dim = ", dim);
  if (depth < 1) fail("model.depth must be >= 1, got ", depth);
  if (predictor_dim < 1 || predictor_heads < 1 || predictor_dim % predictor_heads != 0) {
    fail("model.predictor_heads = ", predictor_heads, " must divide model.predictor_dim = ", predictor_dim);
  }
  if (predictor_depth < 1) fail("model.predictor_depth must be >= 1, got ", predictor_depth);
  if (!(mlp_ratio > 0)) fail("model.mlp_ratio must be > 0, got ", mlp_ratio);
}

at::Tensor gather_patches(const at::Tensor& x, const at::Tensor& index) {
  return x.gather(1, index.unsqueeze(-1).expand({index.size(0), index.size(1), x.size(2)}));
}

ViTBlockImpl::ViTBlockImpl(std::int64_t dim, std::int64_t heads, double mlp_ratio) {
  norm1_weight = register_parameter("norm1_weight", at::ones({dim}));
  norm1_bias = register_parameter("norm1_bias", at::zeros({dim}));
  attn = register_module("attn", PatchAttention(dim, heads));
  norm2_weight = register_parameter("norm2_weight", at::ones({dim}));
  norm2_bias = register_parameter("norm2_bias", at::zeros({dim}));
  mlp = register_module("mlp", PatchMlp(dim, static_cast<std::int64_t>(static_cast<double>(dim) * mlp_ratio)));
}

at::Tensor ViTBlockImpl::forward(const at::Tensor& x) const {
  // The residual additions ride on the output projections (PatchAttention's and PatchMlp's residual).
  auto h = attn->forward(layer_norm(x, norm1_weight, norm1_bias), x);
  return mlp->forward(layer_norm(h, norm2_weight, norm2_bias), h);
}

VisionTransformerImpl::VisionTransformerImpl(VisionTransformerConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  patch_embed = register_module("patch_embed", PatchEmbed(c.channels, c.dim, c.patch_size));
  pos_embed = register_buffer("pos_embed", sincos_positions_2d(c.dim, c.grid()).unsqueeze(0));
  blocks = register_module("blocks", make_blocks(c.depth, c.dim, c.heads, c.mlp_ratio));
  norm_weight = register_parameter("norm_weight", at::ones({c.dim}));
  norm_bias = register_parameter("norm_bias", at::zeros({c.dim}));
  init_parameters(0);
}

void VisionTransformerImpl::init_parameters(std::uint64_t seed) { init_like_ijepa(*this, seed); }

at::Tensor VisionTransformerImpl::forward(const at::Tensor& images, const at::Tensor& keep) const {
  const auto& c = config_;
  if (images.dim() != 4 || images.size(1) != c.channels || images.size(2) != c.image_size || images.size(3) != c.image_size) {
    fail("the vision transformer reads images [B, ", c.channels, ", ", c.image_size, ", ", c.image_size, "], got ", images.sizes());
  }
  auto x = patch_embed->forward(images.to(at::kFloat)).contiguous() + pos_embed;
  if (keep.defined()) x = gather_patches(x, keep);
  return layer_norm(run_blocks(blocks, x), norm_weight, norm_bias);
}

JepaPredictorImpl::JepaPredictorImpl(VisionTransformerConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  predictor_embed = register_module("predictor_embed", Linear(c.dim, c.predictor_dim, true, at::kFloat));
  mask_token = register_parameter("mask_token", at::zeros({1, 1, c.predictor_dim}));
  pos_embed = register_buffer("pos_embed", sincos_positions_2d(c.predictor_dim, c.grid()).unsqueeze(0));
  predictor_blocks = register_module("predictor_blocks", make_blocks(c.predictor_depth, c.predictor_dim, c.predictor_heads, c.mlp_ratio));
  norm_weight = register_parameter("norm_weight", at::ones({c.predictor_dim}));
  norm_bias = register_parameter("norm_bias", at::zeros({c.predictor_dim}));
  predictor_proj = register_module("predictor_proj", Linear(c.predictor_dim, c.dim, true, at::kFloat));
  init_parameters(1);
}

void JepaPredictorImpl::init_parameters(std::uint64_t seed) { init_like_ijepa(*this, seed); }

at::Tensor JepaPredictorImpl::forward(const at::Tensor& context, const at::Tensor& context_idx, const at::Tensor& target_idx) const {
  const auto B = context.size(0), Kc = context.size(1), M = target_idx.size(1), Kt = target_idx.size(2);
  const auto P = config_.predictor_dim;
  const auto positions = pos_embed.expand({B, pos_embed.size(1), P});
  auto x = predictor_embed->forward(context) + gather_patches(positions, context_idx);       // [B, Kc, P]
  x = x.unsqueeze(1).expand({B, M, Kc, P}).reshape({B * M, Kc, P});                          // one pass per target block
  auto target_positions = gather_patches(positions, target_idx.reshape({B, M * Kt})).reshape({B * M, Kt, P});
  auto queries = mask_token.expand({B * M, Kt, P}) + target_positions;
  auto out = run_blocks(predictor_blocks, at::cat({x, queries}, 1));
  out = layer_norm(out.narrow(1, Kc, Kt), norm_weight, norm_bias);
  return predictor_proj->forward(out).reshape({B, M, Kt, config_.dim});
}

}  // namespace dew::nn::vision
