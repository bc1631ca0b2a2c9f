#pragma once
// DPO as an Objective: the policy (the trained decoder) and a frozen reference score the chosen and the
// rejected completion of each pair (data/preference_rows.h batches); dpo_loss turns the four sequence
// log-probabilities into per-pair losses. Chosen and rejected rows go through the model as one batch of
// 2B rows (TRL's concatenated forward). Loss = (sum of per-pair losses, pairs), so accumulated
// micro-batches equal one batch; metrics use TRL's names (dpo_metrics) plus "loss" for evaluation.
#include <memory>

#include "dew/nn/causal_transformer.h"
#include "dew/objectives/dpo_loss.h"
#include "dew/objectives/objective.h"

namespace dew::objectives {

class DpoObjective final : public Objective {
 public:
  // `reference` is frozen here (no gradients, eval mode) and follows the policy to its device. A null
  // reference is the policy itself with its LoRA adapters off (nn::AdaptersOff): no second copy.
  // `loss_chunk_tokens` bounds the logits held at once (0 = all).
  DpoObjective(nn::CausalTransformer policy, nn::CausalTransformer reference, DpoConfig config,
               std::int64_t loss_chunk_tokens);

  std::string name() const override { return "dpo"; }
  std::string count_unit() const override { return "pairs"; }  // the loss is a mean over pairs
  bool fixed_flops_per_count() const override { return false; }
  std::string validation_loss() const override { return "loss"; }
  void init(std::uint64_t seed) override { policy_->init_parameters(seed); }
  torch::nn::Module& module() override { return *policy_; }
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;

 private:
  Loss compute(const data::Batch& batch);
  nn::CausalTransformer policy_, reference_;
  DpoConfig config_;
  std::int64_t loss_chunk_tokens_;
};

}  // namespace dew::objectives
