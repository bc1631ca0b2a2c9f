#include "dew/objectives/dpo_loss.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::objectives {

void DpoConfig::validate() const {
  if (!std::isfinite(beta) || beta <= 0) {
    dew::fail("dpo.beta must be a finite positive number, got ", beta, "; 0.1 is the usual value");
  }
  if (loss != "sigmoid" && loss != "ipo" && loss != "hinge") {
    dew::fail("dpo.loss is '", loss, "'; the known losses are sigmoid, ipo and hinge");
  }
  if (!std::isfinite(label_smoothing) || label_smoothing < 0 || label_smoothing >= 0.5) {
    dew::fail("dpo.label_smoothing must be in [0, 0.5), got ", label_smoothing);
  }
  if (label_smoothing != 0 && loss != "sigmoid") {
    dew::fail("dpo.label_smoothing is ", label_smoothing, " but dpo.loss is ", loss,
              "; label smoothing applies to the sigmoid loss only: set it to 0 or use dpo.loss=sigmoid");
  }
}

bool dpo_needs_token_counts(const DpoConfig& config) { return config.loss == "ipo"; }

namespace {

void check_pair_tensor(const at::Tensor& t, const char* name, std::int64_t N) {
  if (!t.defined() || t.dim() != 1 || t.size(0) != N) {
    dew::fail("dpo_loss: ", name, " must be a [", N, "] tensor (one value per pair), got ",
              t.defined() ? dew::str(t.sizes()) : std::string("nothing"));
  }
}

}  // namespace

DpoTerms dpo_loss(const DpoLogps& logps, const DpoConfig& config) {
  if (!logps.policy_chosen.defined() || logps.policy_chosen.dim() != 1) {
    dew::fail("dpo_loss: policy_chosen must be a [pairs] tensor, got ",
              logps.policy_chosen.defined() ? dew::str(logps.policy_chosen.sizes()) : std::string("nothing"));
  }
  auto N = logps.policy_chosen.size(0);
  check_pair_tensor(logps.policy_rejected, "policy_rejected", N);
  check_pair_tensor(logps.reference_chosen, "reference_chosen", N);
  check_pair_tensor(logps.reference_rejected, "reference_rejected", N);
  auto chosen_ratio = logps.policy_chosen - logps.reference_chosen.detach();
  auto rejected_ratio = logps.policy_rejected - logps.reference_rejected.detach();
  const double beta = config.beta;
  DpoTerms out;
  if (config.loss == "sigmoid") {
    auto d = beta * (chosen_ratio - rejected_ratio);
    const double e = config.label_smoothing;
    out.losses = e == 0 ? -at::log_sigmoid(d) : -(1 - e) * at::log_sigmoid(d) - e * at::log_sigmoid(-d);
  } else if (config.loss == "hinge") {
    out.losses = at::relu(1 - beta * (chosen_ratio - rejected_ratio));
  } else if (config.loss == "ipo") {
    check_pair_tensor(logps.chosen_tokens, "chosen_tokens (ipo averages log-ratios per token)", N);
    check_pair_tensor(logps.rejected_tokens, "rejected_tokens (ipo averages log-ratios per token)", N);
    // TRL clamps the counts at 1 so an empty completion divides by one, not zero.
    auto chosen_n = logps.chosen_tokens.detach().to(chosen_ratio.scalar_type()).clamp_min(1);
    auto rejected_n = logps.rejected_tokens.detach().to(chosen_ratio.scalar_type()).clamp_min(1);
    out.losses = (chosen_ratio / chosen_n - rejected_ratio / rejected_n - 1 / (2 * beta)).pow(2);
  } else {
    dew::fail("dpo.loss is '", config.loss, "'; the known losses are sigmoid, ipo and hinge");
  }
  out.chosen_rewards = (beta * chosen_ratio).detach();
  out.rejected_rewards = (beta * rejected_ratio).detach();
  return out;
}

Statistics dpo_metrics(const DpoTerms& terms, const DpoLogps& logps) {
  Statistics out;
  auto N = static_cast<double>(terms.chosen_rewards.numel());
  auto sum = [](const at::Tensor& t) { return t.detach().to(at::kDouble).sum().item<double>(); };
  out.add("rewards/chosen", sum(terms.chosen_rewards), N);
  out.add("rewards/rejected", sum(terms.rejected_rewards), N);
  out.add("rewards/accuracies", sum(terms.chosen_rewards > terms.rejected_rewards), N);
  out.add("rewards/margins", sum(terms.chosen_rewards - terms.rejected_rewards), N);
  out.add("logps/chosen", sum(logps.policy_chosen), N);
  out.add("logps/rejected", sum(logps.policy_rejected), N);
  return out;
}

}  // namespace dew::objectives
