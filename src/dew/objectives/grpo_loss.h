#pragma once
// Group Relative Policy Optimization's pieces (Shao et al. 2024, DeepSeekMath), following TRL 1.16's
// GRPOTrainer: rewards normalised within each group of completions of one prompt into advantages, and the
// per-token clipped policy-ratio loss with a k3 KL penalty to a frozen reference.
//
//   ratio_t = exp(logp_t - old_t)                     (old = behaviour logps recorded at sampling time)
//   loss_t  = -min(ratio_t A, clip(ratio_t, 1 - epsilon, 1 + epsilon_high) A) + beta kl_t
//   kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1   (Schulman's k3 estimator, >= 0)
//
// Normalisation is token level (TRL's loss_type "bnpo"; "dapo" is the same over a whole generation batch):
// the loss is the sum of loss_t over every completion token of the batch divided by the number of those
// tokens. So the caller returns Loss{sum = (loss * mask).sum(), count = mask.sum()}, and accumulated
// micro-batches (and several epochs over one rollout batch) equal the concatenated batch.
#include <cstdint>
#include <string>

#include <ATen/ATen.h>

#include "dew/objectives/statistics.h"

namespace dew::objectives {

// The `grpo.*` section of a run's config.
struct GrpoConfig {
  std::int64_t group_size = 4;     // completions sampled per prompt
  double temperature = 1.0;        // sampling temperature; log-probabilities are taken at it too
  double top_p = 1.0;
  std::int64_t max_new_tokens = 64;
  double beta = 0.04;              // KL penalty weight; 0 = no reference model needed
  double epsilon = 0.2;            // lower clip: ratio >= 1 - epsilon
  double epsilon_high = 0.0;       // upper clip: ratio <= 1 + epsilon_high; 0 = epsilon (DAPO raises it)
  std::int64_t epochs = 1;         // optimisation passes over each rollout batch
  std::string scale_rewards = "group";  // group | batch | none: what advantages are divided by
  std::string reference;           // "" = a frozen copy of the initial model; else a MODEL path

  template <class V>
  void fields(V& v) {
    v("group_size", group_size, "completions sampled per prompt; advantages compare them (at least 2)");
    v("temperature", temperature, "sampling temperature (log-probabilities are computed at it too)");
    v("top_p", top_p, "nucleus sampling: keep the smallest set of tokens whose probability reaches top_p");
    v("max_new_tokens", max_new_tokens, "longest completion sampled");
    v("beta", beta, "weight of the KL penalty to the reference model; 0 = none");
    v("epsilon", epsilon, "clip range: ratios below 1 - epsilon are clipped");
    v("epsilon_high", epsilon_high, "ratios above 1 + epsilon_high are clipped; 0 = epsilon");
    v("epochs", epochs, "optimisation passes over each batch of rollouts");
    v("scale_rewards", scale_rewards,
      "group: divide advantages by each group's reward std; batch: by the whole batch's; none: do not divide");
    v("reference", reference, "frozen reference model for the KL penalty: empty = the initial policy; else a MODEL");
  }
  // Refuses values that cannot work, naming the field (grpo.group_size, ...) and the accepted range.
  void validate() const;
  double clip_high() const { return epsilon_high > 0 ? epsilon_high : epsilon; }
};

// rewards [P * G] (completions of one prompt adjacent) -> advantages, same shape and dtype:
// (r - mean of its group) / (std + 1e-4), where std is the unbiased (n - 1) standard deviation of the group
// (scale "group"), of the whole batch ("batch"), or no division at all ("none"). A group whose rewards are
// all equal gets zero advantages (its completions teach nothing but the KL term). group_size 1 has std 0.
at::Tensor group_advantages(const at::Tensor& rewards, std::int64_t group_size, const std::string& scale = "group");

struct GrpoTokenTerms {
  at::Tensor loss;     // [B, T], differentiable through logp: the per-token loss above (unmasked)
  at::Tensor kl;       // [B, T], no gradient: kl_t; undefined when ref_logp is undefined
  at::Tensor clipped;  // [B, T] float, no gradient: 1 where clipping removed the gradient
                       // (ratio < 1 - epsilon with A < 0, or ratio > 1 + epsilon_high with A > 0)
};

// logp [B, T] (policy, with gradients), old_logp [B, T] (behaviour), ref_logp [B, T] (reference; may be
// undefined when config.beta == 0), advantages [B] or [B, 1]. Masking is the caller's.
GrpoTokenTerms grpo_token_terms(const at::Tensor& logp, const at::Tensor& old_logp, const at::Tensor& ref_logp,
                                const at::Tensor& advantages, const GrpoConfig& config);

// Additive per-token statistics over the completion tokens (mask [B, T]): "kl" (when terms.kl is defined)
// and "clip_fraction", each (sum over masked tokens, number of masked tokens).
Statistics grpo_token_metrics(const GrpoTokenTerms& terms, const at::Tensor& mask);

}  // namespace dew::objectives
