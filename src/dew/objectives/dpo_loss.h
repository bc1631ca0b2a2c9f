#pragma once
// Direct Preference Optimization's per-pair losses (Rafailov et al. 2023) and their IPO and hinge variants,
// on sequence log-probabilities of a chosen and a rejected completion under the policy and a frozen
// reference, following TRL 1.16's DPOTrainer._compute_loss:
//
//   d = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)   (summed logps)
//   sigmoid: -(1 - e) log sigmoid(beta d) - e log sigmoid(-beta d)  (e = label_smoothing: conservative DPO;
//            e = 0 is the paper's loss and TRL's "sigmoid")
//   hinge:   max(0, 1 - beta d)                                     (SLiC)
//   ipo:     (d_avg - 1 / (2 beta))^2, d_avg the same difference with each completion's log-ratio divided
//            by its number of tokens (TRL's length normalisation, which the IPO authors confirmed)
//
// The losses are per pair and summed by the caller (Loss{sum = losses.sum(), count = pairs}), so
// accumulated micro-batches equal one batch. Rewards are beta * (policy - reference) on summed logps for
// every loss type, as TRL logs them.
#include <string>

#include <ATen/ATen.h>

#include "dew/objectives/statistics.h"

namespace dew::objectives {

// The `dpo.*` section of a run's config.
struct DpoConfig {
  double beta = 0.1;
  std::string loss = "sigmoid";  // sigmoid | ipo | hinge
  double label_smoothing = 0.0;  // sigmoid only
  std::string reference;         // "" = a frozen copy of the initial model; else a MODEL (run, HF dir, GGUF)
  bool share_prompt = true;      // one pass over each prompt for both completions (objectives/shared_prompt_logprobs.h)

  template <class V>
  void fields(V& v) {
    v("beta", beta, "strength of the pull toward the reference model (IPO: its tau); larger = stay closer");
    v("loss", loss, "sigmoid (the DPO paper's), ipo, or hinge");
    v("label_smoothing", label_smoothing,
      "sigmoid only: assumed probability that a preference label is flipped (conservative DPO), in [0, 0.5)");
    v("reference", reference, "frozen reference model: empty = the initial policy; else a MODEL path");
    v("share_prompt", share_prompt,
      "compute each prompt once for its chosen and rejected completions (same log-probabilities, fewer FLOPs); "
      "false = two full rows per pair, as TRL does");
  }
  // Refuses values the losses cannot use, naming the field (dpo.beta, ...) and the accepted range.
  void validate() const;
};

// Per-pair inputs, each [N] (fp32 or fp64; the policy ones carry gradients, the reference ones need not).
struct DpoLogps {
  at::Tensor policy_chosen, policy_rejected;        // summed log-probabilities over completion tokens
  at::Tensor reference_chosen, reference_rejected;  // the same under the reference model
  // Completion token counts [N]; only the ipo loss reads them (and then they must be defined and >= 1).
  at::Tensor chosen_tokens, rejected_tokens;
};

struct DpoTerms {
  at::Tensor losses;            // [N], differentiable: the per-pair losses (sum them)
  at::Tensor chosen_rewards;    // [N], no gradient: beta * (policy_chosen - reference_chosen)
  at::Tensor rejected_rewards;  // [N], no gradient: beta * (policy_rejected - reference_rejected)
};

// Whether `config` needs completion token counts (ipo) besides summed log-probabilities.
bool dpo_needs_token_counts(const DpoConfig& config);

DpoTerms dpo_loss(const DpoLogps& logps, const DpoConfig& config);

// TRL's logged metrics as additive (sum over pairs, count = pairs) statistics: rewards/chosen,
// rewards/rejected, rewards/accuracies (chosen reward strictly above rejected), rewards/margins,
// logps/chosen, logps/rejected (the policy's summed log-probabilities).
Statistics dpo_metrics(const DpoTerms& terms, const DpoLogps& logps);

}  // namespace dew::objectives
