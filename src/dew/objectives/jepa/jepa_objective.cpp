#include "dew/objectives/jepa/jepa_objective.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/core/stream_seed.h"
#include "dew/nn/multi_tensor.h"

namespace dew::objectives::jepa {

namespace {

// The mask generator's seed for micro-batch `micro` of step `step`: a stream no other purpose draws.
std::uint64_t mask_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro) {
  constexpr std::uint64_t kPurpose = 0x6a6570616d61736bULL;  // "jepamask"
  return stream_seed(seed, kPurpose, step, micro);
}

constexpr std::int64_t kEvaluationStep = -1;

std::map<std::string, at::Tensor> parameters_of(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) out.emplace(item.key(), item.value());
  return out;
}

}  // namespace

void JepaObjectiveConfig::validate() const {
  masks.validate("jepa");
  if (loss != "smooth_l1" && loss != "l2") fail("jepa.loss must be smooth_l1 or l2, got \"", loss, "\"");
  if (!(momentum_start >= 0 && momentum_start <= momentum_end && momentum_end <= 1)) {
    fail("jepa.momentum_start and jepa.momentum_end must satisfy 0 <= start <= end <= 1, got ", momentum_start, " and ", momentum_end);
  }
  if (momentum_steps < 0) fail("jepa.momentum_steps must be >= 0 (0 = trainer.steps), got ", momentum_steps);
}

JepaNetworksImpl::JepaNetworksImpl(const nn::vision::VisionTransformerConfig& config) {
  encoder = register_module("encoder", nn::vision::VisionTransformer(config));
  predictor = register_module("predictor", nn::vision::JepaPredictor(config));
}

JepaObjective::JepaObjective(nn::vision::VisionTransformerConfig model, JepaObjectiveConfig config, std::uint64_t seed)
    : JepaObjective(JepaNetworks(model), std::move(config), seed) {}

JepaObjective::JepaObjective(JepaNetworks networks, JepaObjectiveConfig config, std::uint64_t seed)
    : model_config_(networks->config()), config_(std::move(config)), networks_(std::move(networks)), target_(model_config_), seed_(seed) {
  config_.validate();
  for (auto& p : target_->parameters()) p.set_requires_grad(false);
  init(seed);
}

void JepaObjective::init(std::uint64_t seed) {
  networks_->encoder->init_parameters(seed);
  networks_->predictor->init_parameters(seed + 1);
  at::NoGradGuard no_grad;
  const auto source = parameters_of(*networks_->encoder);
  for (auto& [name, p] : parameters_of(*target_)) p.copy_(source.at(name));
}

double JepaObjective::momentum_at(std::int64_t step, std::int64_t total_steps) const {
  const std::int64_t ramp = config_.momentum_steps > 0 ? config_.momentum_steps : total_steps;
  const double progress = ramp > 0 ? std::min(1.0, static_cast<double>(step) / static_cast<double>(ramp)) : 1.0;
  return config_.momentum_start + (config_.momentum_end - config_.momentum_start) * progress;
}

void JepaObjective::after_step(std::int64_t step, std::int64_t total_steps) {
  const double m = momentum_at(step, total_steps);
  at::NoGradGuard no_grad;
  // The two encoders are one architecture, so their parameter lists pair up in order. One fused pass over
  // all of them: target + (1 - m)(encoder - target) = m target + (1 - m) encoder.
  std::vector<at::Tensor> target = target_->parameters(), source = networks_->encoder->parameters();
  if (target.front().device() != source.front().device()) {
    target_->to(source.front().device());
    target = target_->parameters();
  }
  nn::lerp_each(target, source, 1 - m);
}

Loss JepaObjective::compute(const data::Batch& batch, std::uint64_t seed, bool metrics) {
  const auto device = networks_->parameters().front().device();
  if (target_->parameters().front().device() != device) target_->to(device);
  const at::Tensor images = batch.get("images").to(device);
  const auto B = images.size(0), grid = model_config_.grid();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const BlockMasks masks = sample_block_masks(config_.masks, grid, grid, B, generator);
  const at::Tensor context_idx = masks.context.select(1, 0).to(device);  // one context block per image
  const at::Tensor target_idx = masks.targets.to(device);                // [B, M, Kt]
  const auto M = target_idx.size(1), Kt = target_idx.size(2);

  at::Tensor target, all;
  {
    at::NoGradGuard no_grad;
    all = target_->forward(images);
    all = at::layer_norm(all, {all.size(-1)});  // I-JEPA normalises the target features over features
    target = nn::vision::gather_patches(all, target_idx.reshape({B, M * Kt})).reshape({B, M, Kt, all.size(-1)});
  }
  const at::Tensor prediction = networks_->predictor->forward(networks_->encoder->forward(images, context_idx), context_idx, target_idx);
  // Per image: the mean over its predicted patches and features; the batch loss sums images (count B).
  const at::Tensor per_element = config_.loss == "l2" ? (prediction - target).pow(2)
                                                      : at::smooth_l1_loss(prediction, target, at::Reduction::None);
  Loss out;
  out.sum = per_element.reshape({B, -1}).mean(1).sum();
  out.count = static_cast<double>(B);
  if (metrics) {
    at::NoGradGuard no_grad;
    const at::Tensor pooled = all.mean(1);  // [B, D]
    // The standard deviation over the batch of each (patch, feature), averaged: written out, because
    // ATen's std over the outer dimension takes ~1.5 ms here, a sum over it and two elementwise passes ~0.3.
    const at::Tensor centered = all - all.mean(0);
    const double target_std = centered.square().sum(0).div_(std::max<std::int64_t>(B - 1, 1)).sqrt_().mean().item<double>();
    out.metrics.add("target_std", target_std * static_cast<double>(B), static_cast<double>(B));
    const at::Tensor singular = at::linalg_svdvals(pooled.to(at::kDouble) - pooled.to(at::kDouble).mean(0));
    const at::Tensor p = singular / singular.sum().clamp_min(1e-12);
    const double rank = std::exp(-(p * (p + 1e-12).log()).sum().item<double>());
    out.metrics.add("effective_rank", rank * static_cast<double>(B), static_cast<double>(B));
  }
  return out;
}

Loss JepaObjective::loss(const data::Batch& batch, std::int64_t step) {
  return compute(batch, mask_seed(seed_, step, micro_.next_stream_key(step)), /*metrics=*/true);
}

Statistics JepaObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  Loss l = compute(batch, mask_seed(seed_, kEvaluationStep, 0), /*metrics=*/true);
  Statistics stats = l.metrics;
  stats.add("loss", l.sum.item<double>(), l.count);
  return stats;
}

nlohmann::ordered_json JepaObjective::config_json() const {
  nlohmann::ordered_json j;
  j["model"] = config::to_json(model_config_);
  j["loss"] = config_.loss;
  j["momentum_start"] = config_.momentum_start;
  j["momentum_end"] = config_.momentum_end;
  j["momentum_steps"] = config_.momentum_steps;
  return j;
}

std::map<std::string, at::Tensor> JepaObjective::state() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : parameters_of(*target_)) out["target." + name] = p.detach().to(at::kCPU);
  return out;
}

void JepaObjective::load_state(const std::map<std::string, at::Tensor>& state) {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : parameters_of(*target_)) {
    auto it = state.find("target." + name);
    if (it == state.end()) fail("the checkpoint's objective state lacks the JEPA target encoder's '", name, "'; the checkpoint is incomplete");
    if (it->second.sizes() != p.sizes()) fail("the checkpoint's target encoder '", name, "' has shape ", it->second.sizes(), ", the model ", p.sizes());
    p.copy_(it->second);
  }
}

}  // namespace dew::objectives::jepa
