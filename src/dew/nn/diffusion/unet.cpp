#include "dew/nn/diffusion/unet.h"

#include "dew/nn/activations.h"
#include "dew/nn/short_attention.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace dew::nn::diffusion {

namespace {
constexpr auto kParamDtype = at::kFloat;
}

UNetTimeEmbeddingImpl::UNetTimeEmbeddingImpl(std::int64_t in, std::int64_t out) {
  linear_1 = register_module("linear_1", Linear(in, out, true, kParamDtype));
  linear_2 = register_module("linear_2", Linear(out, out, true, kParamDtype));
}

at::Tensor UNetTimeEmbeddingImpl::forward(const at::Tensor& features) const {
  return linear_2->forward(dew::nn::silu(linear_1->forward(features)));
}

ResnetBlockImpl::ResnetBlockImpl(std::int64_t in, std::int64_t out, std::int64_t time_features, std::int64_t groups,
                                 double dropout_)
    : dropout(dropout_) {
  norm1 = register_module("norm1", GroupNorm(groups, in, kUNetNormEps));
  conv1 = register_module("conv1", Conv2d(in, out, 3, 1, 1));
  time_emb_proj = register_module("time_emb_proj", Linear(time_features, out, true, kParamDtype));
  norm2 = register_module("norm2", GroupNorm(groups, out, kUNetNormEps));
  conv2 = register_module("conv2", Conv2d(out, out, 3, 1, 1));
  if (in != out) conv_shortcut = register_module("conv_shortcut", Conv2d(in, out, 1, 1, 0));
}

at::Tensor ResnetBlockImpl::forward(const at::Tensor& x, const at::Tensor& emb_act) {
  auto h = conv1->forward(dew::nn::silu(norm1->forward(x)));
  h = h + time_emb_proj->forward(emb_act).unsqueeze(-1).unsqueeze(-1);
  h = dew::nn::silu(norm2->forward(h));
  if (dropout > 0 && is_training()) h = at::dropout(h, dropout, /*train=*/true);
  h = conv2->forward(h);
  return (conv_shortcut ? conv_shortcut->forward(x) : x) + h;
}

SpatialAttentionImpl::SpatialAttentionImpl(std::int64_t channels, std::int64_t head_channels, std::int64_t groups)
    : heads(channels / head_channels) {
  group_norm = register_module("group_norm", GroupNorm(groups, channels, kUNetNormEps));
  to_q = register_module("to_q", Linear(channels, channels, true, kParamDtype));
  to_k = register_module("to_k", Linear(channels, channels, true, kParamDtype));
  to_v = register_module("to_v", Linear(channels, channels, true, kParamDtype));
  out = Linear(channels, channels, true, kParamDtype);
  to_out = register_module("to_out", torch::nn::ModuleList(out));
}

at::Tensor SpatialAttentionImpl::forward(const at::Tensor& x) const {
  const auto B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  auto tokens = group_norm->forward(x).reshape({B, C, H * W}).transpose(1, 2);  // [B, HW, C]
  auto split = [&](const Linear& projection) {
    return projection->forward(tokens).reshape({B, H * W, heads, C / heads}).transpose(1, 2);  // [B, heads, HW, hd]
  };
  auto attended = attention_short_or_sdpa(split(to_q), split(to_k), split(to_v), /*causal=*/false);
  auto projected = out->forward(attended.transpose(1, 2).reshape({B, H * W, C}));
  return projected.transpose(1, 2).reshape({B, C, H, W}) + x;
}

ResampleImpl::ResampleImpl(std::int64_t channels, bool down_) : down(down_) {
  conv = register_module("conv", Conv2d(channels, channels, 3, down ? 2 : 1, 1));
}

at::Tensor ResampleImpl::forward(const at::Tensor& x) const {
  if (down) return conv->forward(x);
  return conv->forward(at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)}));
}

UNetBlockImpl::UNetBlockImpl(bool attention, const std::string& resampler) {
  resnets = register_module("resnets", torch::nn::ModuleList());
  if (attention) attentions = register_module("attentions", torch::nn::ModuleList());
  if (!resampler.empty()) resamplers = register_module(resampler, torch::nn::ModuleList());
}

UNetImpl::UNetImpl(ImageModelConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  const auto levels = static_cast<std::int64_t>(c.channel_mult.size());
  const auto T = c.unet_time_features();
  const auto sizes = c.unet_resolutions();
  auto channels = [&](std::int64_t level) { return c.base_channels * c.channel_mult[static_cast<std::size_t>(level)]; };
  auto attends = [&](std::int64_t level) {
    const auto size = sizes[static_cast<std::size_t>(level)];
    return std::find(c.attention_resolutions.begin(), c.attention_resolutions.end(), size) != c.attention_resolutions.end();
  };
  auto resnet = [&](std::int64_t in, std::int64_t out) { return ResnetBlock(in, out, T, c.groups, c.dropout); };
  auto attention = [&](std::int64_t ch) { return SpatialAttention(ch, c.head_channels, c.groups); };

  conv_in = register_module("conv_in", Conv2d(c.channels, channels(0), 3, 1, 1));
  time_embedding = register_module("time_embedding", UNetTimeEmbedding(c.base_channels, T));
  if (c.num_classes > 0) class_embedding = register_module("class_embedding", Embedding(c.num_classes + 1, T, kParamDtype));

  down_blocks = register_module("down_blocks", torch::nn::ModuleList());
  std::int64_t in = channels(0);
  for (std::int64_t level = 0; level < levels; ++level) {
    const auto out = channels(level);
    const bool last = level == levels - 1;
    UNetBlock block(attends(level), last ? "" : "downsamplers");
    for (std::int64_t j = 0; j < c.res_blocks; ++j) {
      block->resnets->push_back(resnet(j == 0 ? in : out, out));
      if (block->attentions) block->attentions->push_back(attention(out));
    }
    if (!last) block->resamplers->push_back(Resample(out, /*down=*/true));
    down_blocks->push_back(block);
    in = out;
  }

  const auto deepest = channels(levels - 1);
  mid_block = register_module("mid_block", UNetBlock(true, ""));
  mid_block->resnets->push_back(resnet(deepest, deepest));
  mid_block->attentions->push_back(attention(deepest));
  mid_block->resnets->push_back(resnet(deepest, deepest));

  // Up block i mirrors down level L = levels - 1 - i; its last residual block takes the skip saved before
  // that level (the previous level's downsample, or conv_in's output for level 0), the others its own level's.
  up_blocks = register_module("up_blocks", torch::nn::ModuleList());
  std::int64_t previous = deepest;
  for (std::int64_t i = 0; i < levels; ++i) {
    const auto level = levels - 1 - i;
    const auto out = channels(level), before = channels(std::max<std::int64_t>(level - 1, 0));
    const bool last = i == levels - 1;
    UNetBlock block(attends(level), last ? "" : "upsamplers");
    for (std::int64_t j = 0; j <= c.res_blocks; ++j) {
      const auto skip = j == c.res_blocks ? before : out;
      block->resnets->push_back(resnet((j == 0 ? previous : out) + skip, out));
      if (block->attentions) block->attentions->push_back(attention(out));
    }
    if (!last) block->resamplers->push_back(Resample(out, /*down=*/false));
    up_blocks->push_back(block);
    previous = out;
  }

  conv_norm_out = register_module("conv_norm_out", GroupNorm(c.groups, channels(0), kUNetNormEps));
  conv_out = register_module("conv_out", Conv2d(channels(0), c.channels, 3, 1, 1));
}

void UNetImpl::init_parameters(std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::set<const void*> norm_params;  // GroupNorm scales and shifts, found by type rather than by name
  for (const auto& module : modules()) {
    if (auto* norm = module->as<GroupNormImpl>()) {
      norm_params.insert(norm->weight.unsafeGetTensorImpl());
      norm_params.insert(norm->bias.unsafeGetTensorImpl());
    }
  }
  std::map<std::string, at::Tensor> sorted;  // sorted names: the draw order depends on nothing else
  for (const auto& item : named_parameters()) sorted.emplace(item.key(), item.value());
  for (auto& [name, p] : sorted) {
    const bool zeroed = name.rfind("conv_out.", 0) == 0 || name.find(".conv2.") != std::string::npos ||
                        name.find(".to_out.0.") != std::string::npos;
    if (norm_params.count(p.unsafeGetTensorImpl())) {
      if (name.ends_with(".weight")) p.fill_(1.0); else p.zero_();
    } else if (zeroed || name.ends_with(".bias")) {
      p.zero_();
    } else if (name == "class_embedding.weight") {
      fill_normal(p, 1.0, generator);
    } else {
      fill_torch_default(p, generator);
    }
  }
}

at::Tensor UNetImpl::forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
  auto in = prepare(x, time, labels);
  const auto dtype = in.x.scalar_type();
  auto emb = time_embedding->forward(timestep_embedding(in.time, config_.base_channels).to(dtype));
  if (class_embedding) emb = emb + at::embedding(class_embedding->weight, in.labels).to(dtype);
  auto emb_act = dew::nn::silu(emb);  // every residual block reads SiLU(emb)

  auto h = conv_in->forward(in.x);
  std::vector<at::Tensor> skips{h};
  for (const auto& module : *down_blocks) {
    auto* block = module->as<UNetBlockImpl>();
    for (std::size_t j = 0; j < block->resnets->size(); ++j) {
      h = block->resnets[j]->as<ResnetBlockImpl>()->forward(h, emb_act);
      if (block->attentions) h = block->attentions[j]->as<SpatialAttentionImpl>()->forward(h);
      skips.push_back(h);
    }
    if (block->resamplers) {
      h = block->resamplers[0]->as<ResampleImpl>()->forward(h);
      skips.push_back(h);
    }
  }
  h = mid_block->resnets[0]->as<ResnetBlockImpl>()->forward(h, emb_act);
  h = mid_block->attentions[0]->as<SpatialAttentionImpl>()->forward(h);
  h = mid_block->resnets[1]->as<ResnetBlockImpl>()->forward(h, emb_act);
  for (const auto& module : *up_blocks) {
    auto* block = module->as<UNetBlockImpl>();
    for (std::size_t j = 0; j < block->resnets->size(); ++j) {
      h = at::cat({h, skips.back()}, 1);
      skips.pop_back();
      h = block->resnets[j]->as<ResnetBlockImpl>()->forward(h, emb_act);
      if (block->attentions) h = block->attentions[j]->as<SpatialAttentionImpl>()->forward(h);
    }
    if (block->resamplers) h = block->resamplers[0]->as<ResampleImpl>()->forward(h);
  }
  return conv_out->forward(dew::nn::silu(conv_norm_out->forward(h))).to(at::kFloat);
}

}  // namespace dew::nn::diffusion
