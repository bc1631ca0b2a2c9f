#include "dew/objectives/grpo_loss.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::objectives {

void GrpoConfig::validate() const {
  if (group_size < 2) {
    dew::fail("grpo.group_size must be at least 2 (advantages compare completions of the same prompt), got ",
              group_size);
  }
  if (!std::isfinite(temperature) || temperature <= 0) {
    dew::fail("grpo.temperature must be a finite positive number, got ", temperature);
  }
  if (!std::isfinite(top_p) || top_p <= 0 || top_p > 1) dew::fail("grpo.top_p must be in (0, 1], got ", top_p);
  if (max_new_tokens < 1) dew::fail("grpo.max_new_tokens must be at least 1, got ", max_new_tokens);
  if (!std::isfinite(beta) || beta < 0) dew::fail("grpo.beta must be a finite number >= 0, got ", beta);
  // 1 - epsilon is the lowest ratio kept; at epsilon >= 1 it would be zero or negative, clipping nothing.
  if (!std::isfinite(epsilon) || epsilon <= 0 || epsilon >= 1) {
    dew::fail("grpo.epsilon must be in (0, 1), got ", epsilon, "; 0.2 is the usual value");
  }
  if (!std::isfinite(epsilon_high) || epsilon_high < 0) {
    dew::fail("grpo.epsilon_high must be a finite number >= 0 (0 = grpo.epsilon), got ", epsilon_high);
  }
  if (epochs < 1) dew::fail("grpo.epochs must be at least 1, got ", epochs);
  if (scale_rewards != "group" && scale_rewards != "batch" && scale_rewards != "none") {
    dew::fail("grpo.scale_rewards is '", scale_rewards, "'; use group, batch or none");
  }
}

namespace {

// Unbiased standard deviation along `dim` (all dims when dim < 0); 0 where there is a single value, as TRL
// treats a lone completion (torch.std would give NaN).
at::Tensor unbiased_std(const at::Tensor& x, std::int64_t dim) {
  auto n = dim < 0 ? x.numel() : x.size(dim);
  if (n < 2) return dim < 0 ? at::zeros({}, x.options()) : at::zeros_like(x.select(dim, 0));
  return dim < 0 ? x.std(/*unbiased=*/true) : x.std(at::IntArrayRef{dim}, /*unbiased=*/true, /*keepdim=*/false);
}

}  // namespace

at::Tensor group_advantages(const at::Tensor& rewards, std::int64_t group_size, const std::string& scale) {
  if (group_size < 1) dew::fail("group_advantages: group_size must be positive, got ", group_size);
  if (rewards.dim() != 1 || rewards.numel() % group_size != 0) {
    dew::fail("group_advantages: rewards must be one value per completion, [prompts * ", group_size,
              "], got shape ", rewards.sizes());
  }
  if (scale != "group" && scale != "batch" && scale != "none") {
    dew::fail("group_advantages: scale is '", scale, "'; use group, batch or none");
  }
  auto grouped = rewards.view({-1, group_size});
  // The mean as first + mean(r - first): the same number up to rounding, but exactly the common value when a
  // group's rewards are all equal, so such a group's advantages are exactly 0 rather than ~1e-16 / 1e-4.
  auto first = grouped.narrow(1, 0, 1);
  auto centred = (grouped - (first + (grouped - first).mean(1, /*keepdim=*/true))).reshape(-1);
  if (scale == "none") return centred;
  auto std = scale == "group" ? unbiased_std(grouped, 1).repeat_interleave(group_size) : unbiased_std(rewards, -1);
  return centred / (std + 1e-4);
}

GrpoTokenTerms grpo_token_terms(const at::Tensor& logp, const at::Tensor& old_logp, const at::Tensor& ref_logp,
                                const at::Tensor& advantages, const GrpoConfig& config) {
  if (logp.dim() != 2 || old_logp.sizes() != logp.sizes()) {
    dew::fail("grpo_token_terms: logp and old_logp must both be [batch, tokens], got ", logp.sizes(), " and ",
              old_logp.sizes());
  }
  if (ref_logp.defined() && ref_logp.sizes() != logp.sizes()) {
    dew::fail("grpo_token_terms: ref_logp has shape ", ref_logp.sizes(), ", logp ", logp.sizes());
  }
  if (config.beta != 0 && !ref_logp.defined()) {
    dew::fail("grpo_token_terms: grpo.beta is ", config.beta, " but no reference log-probabilities were given");
  }
  if (advantages.numel() != logp.size(0)) {
    dew::fail("grpo_token_terms: ", advantages.numel(), " advantages for ", logp.size(0), " completions");
  }
  auto A = advantages.reshape({-1, 1}).to(logp.scalar_type());
  auto ratio = at::exp(logp - old_logp.detach());
  const double low = 1 - config.epsilon, high = 1 + config.clip_high();
  auto surrogate = at::minimum(ratio * A, at::clamp(ratio, low, high) * A);
  GrpoTokenTerms out;
  out.loss = -surrogate;
  if (ref_logp.defined()) {
    auto delta = ref_logp.detach() - logp;
    auto kl = at::exp(delta) - delta - 1;
    if (config.beta != 0) out.loss = out.loss + config.beta * kl;
    out.kl = kl.detach();
  }
  {
    at::NoGradGuard no_grad;
    auto r = ratio.detach();
    out.clipped = (((r < low) & (A < 0)) | ((r > high) & (A > 0))).to(logp.scalar_type());
  }
  return out;
}

Statistics grpo_token_metrics(const GrpoTokenTerms& terms, const at::Tensor& mask) {
  at::NoGradGuard no_grad;
  auto m = mask.to(at::kDouble);
  double tokens = m.sum().item<double>();
  Statistics out;
  if (terms.kl.defined()) out.add("kl", (terms.kl.to(at::kDouble) * m).sum().item<double>(), tokens);
  out.add("clip_fraction", (terms.clipped.to(at::kDouble) * m).sum().item<double>(), tokens);
  return out;
}

}  // namespace dew::objectives
