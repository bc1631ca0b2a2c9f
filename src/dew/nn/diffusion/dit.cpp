#include "dew/nn/diffusion/dit.h"

#include "dew/nn/activations.h"
#include "dew/nn/diffusion/gated_residual.h"
#include "dew/nn/diffusion/modulated_norm.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/activation.h>

#include <cmath>
#include <map>

namespace dew::nn::diffusion {

namespace {
constexpr double kNormEps = 1e-6;  // DiT's LayerNorm eps
constexpr auto kParamDtype = at::kFloat;

// A ModuleList [SiLU, linear]: the index-1 name DiT's nn.Sequential gives the modulation's Linear.
torch::nn::ModuleList silu_then(const Linear& linear) {
  torch::nn::ModuleList list;
  list->push_back(torch::nn::SiLU());
  list->push_back(linear);
  return list;
}
}  // namespace

TimestepEmbedderImpl::TimestepEmbedderImpl(std::int64_t dim) {
  linear_in = Linear(kDiTFrequencyFeatures, dim, true, kParamDtype);
  linear_out = Linear(dim, dim, true, kParamDtype);
  mlp = register_module("mlp", torch::nn::ModuleList(linear_in, torch::nn::SiLU(), linear_out));
}

at::Tensor TimestepEmbedderImpl::forward(const at::Tensor& time, c10::ScalarType dtype) const {
  auto features = timestep_embedding(time, kDiTFrequencyFeatures).to(dtype);
  return linear_out->forward(dew::nn::silu(linear_in->forward(features)));
}

LabelEmbedderImpl::LabelEmbedderImpl(std::int64_t num_classes, std::int64_t dim) {
  embedding_table = register_module("embedding_table", Embedding(num_classes + 1, dim, kParamDtype));
}

at::Tensor LabelEmbedderImpl::forward(const at::Tensor& labels, c10::ScalarType dtype) const {
  return at::embedding(embedding_table->weight, labels).to(dtype);
}

DiTBlockImpl::DiTBlockImpl(const ImageModelConfig& c) {
  attn = register_module("attn", PatchAttention(c.dim, c.heads));
  mlp = register_module("mlp", PatchMlp(c.dim, c.dit_mlp_features()));
  modulation = Linear(c.dim, 6 * c.dim, true, kParamDtype);
  adaLN_modulation = register_module("adaLN_modulation", silu_then(modulation));
}

at::Tensor DiTBlockImpl::forward(const at::Tensor& x, const at::Tensor& c_act) const {
  auto m = modulation->forward(c_act).chunk(6, 1);  // shift, scale, gate for attention, then for the MLP
  // x + gate * branch in one pass over the tokens each way (gated_residual.h).
  auto h = gated_residual(x, m[2], attn->forward(modulated_layer_norm(x, m[0], m[1], kNormEps)));
  return gated_residual(h, m[5], mlp->forward(modulated_layer_norm(h, m[3], m[4], kNormEps)));
}

DiTFinalLayerImpl::DiTFinalLayerImpl(const ImageModelConfig& c) {
  linear = register_module("linear", Linear(c.dim, c.patch_size * c.patch_size * c.channels, true, kParamDtype));
  modulation = Linear(c.dim, 2 * c.dim, true, kParamDtype);
  adaLN_modulation = register_module("adaLN_modulation", silu_then(modulation));
}

at::Tensor DiTFinalLayerImpl::forward(const at::Tensor& x, const at::Tensor& c_act) const {
  auto m = modulation->forward(c_act).chunk(2, 1);  // shift, scale
  return linear->forward(modulated_layer_norm(x, m[0], m[1], kNormEps));
}

DiTImpl::DiTImpl(ImageModelConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  x_embedder = register_module("x_embedder", PatchEmbed(c.channels, c.dim, c.patch_size));
  auto table = sincos_positions_2d(c.dim, c.dit_grid()).unsqueeze(0);
  // Fixed positions are a buffer: they move with the model but are no parameter, so checkpoints omit them.
  pos_embed = c.positions == "learned" ? register_parameter("pos_embed", table) : register_buffer("pos_embed", table);
  t_embedder = register_module("t_embedder", TimestepEmbedder(c.dim));
  if (c.num_classes > 0) y_embedder = register_module("y_embedder", LabelEmbedder(c.num_classes, c.dim));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.depth; ++i) blocks->push_back(DiTBlock(c));
  final_layer = register_module("final_layer", DiTFinalLayer(c));
}

void DiTImpl::init_parameters(std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> sorted;  // sorted names: the draw order depends on nothing else
  for (const auto& item : named_parameters()) sorted.emplace(item.key(), item.value());
  for (auto& [name, p] : sorted) {
    if (name == "pos_embed") {
      p.copy_(sincos_positions_2d(config_.dim, config_.dit_grid()).unsqueeze(0));
    } else if (name.ends_with(".bias") || name.find("adaLN_modulation") != std::string::npos ||
               name.rfind("final_layer.linear.", 0) == 0) {
      p.zero_();  // adaLN-Zero: every block starts as the identity and the output at zero
    } else if (name.rfind("t_embedder.", 0) == 0 || name.rfind("y_embedder.", 0) == 0) {
      fill_normal(p, 0.02, generator);
    } else {
      fill_xavier_uniform(p, generator);
    }
  }
}

at::Tensor DiTImpl::unpatchify(const at::Tensor& tokens) const {
  const auto B = tokens.size(0), g = config_.dit_grid(), p = config_.patch_size, C = config_.channels;
  // Each token holds its patch as (row in patch, column in patch, channel), as DiT's einsum nhwpqc->nchpwq reads it.
  return tokens.reshape({B, g, g, p, p, C}).permute({0, 5, 1, 3, 2, 4}).reshape({B, C, g * p, g * p});
}

at::Tensor DiTImpl::forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
  auto in = prepare(x, time, labels);
  const auto dtype = in.x.scalar_type();
  // The patch embedding is a transposed view ([B, D, N] memory); adding the (contiguous) positions first
  // would keep that layout for the whole residual stream, and every layer norm would copy it to read rows.
  auto tokens = x_embedder->forward(in.x).contiguous() + pos_embed.to(dtype);
  auto c = t_embedder->forward(in.time, dtype);
  if (y_embedder) c = c + y_embedder->forward(in.labels, dtype);
  auto c_act = dew::nn::silu(c);  // every modulation reads SiLU(c)
  for (const auto& block : *blocks) tokens = block->as<DiTBlockImpl>()->forward(tokens, c_act);
  return unpatchify(final_layer->forward(tokens, c_act)).to(at::kFloat);
}

}  // namespace dew::nn::diffusion
