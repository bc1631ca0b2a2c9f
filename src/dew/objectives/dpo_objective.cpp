#include "dew/objectives/dpo_objective.h"

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/nn/frozen_weights.h"
#include "dew/nn/lora.h"
#include "dew/objectives/shared_prompt_logprobs.h"
#include "dew/objectives/token_logprobs.h"

namespace dew::objectives {

DpoObjective::DpoObjective(nn::CausalTransformer policy, nn::CausalTransformer reference, DpoConfig config,
                           std::int64_t loss_chunk_tokens)
    : policy_(std::move(policy)), reference_(std::move(reference)), config_(std::move(config)),
      loss_chunk_tokens_(loss_chunk_tokens) {
  config_.validate();
  if (!reference_) {
    if (!nn::has_lora(*policy_)) fail("DPO without a reference model needs a policy with LoRA adapters (the reference is its base)");
    return;
  }
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  nn::store_frozen_weights_in_compute_dtype(reference_);  // exact, and less memory under mixed precision
  reference_->eval();
}

Loss DpoObjective::compute(const data::Batch& batch) {
  // Chosen rows first, rejected after: one forward of 2B rows per model.
  const auto ids = at::cat({batch.get("chosen"), batch.get("rejected")});
  const auto segments = at::cat({batch.get("chosen_segment_ids"), batch.get("rejected_segment_ids")});
  const auto mask = at::cat({batch.get("chosen_mask"), batch.get("rejected_mask")});
  const std::int64_t pairs = batch.get("chosen").size(0);
  const auto vocab = policy_->config().vocab_size;
  if (ids.numel() > 0) {
    const auto hi = ids.max().item<std::int64_t>();
    if (hi >= vocab) fail("token id ", hi, " in the batch is outside the model's vocabulary [0, ", vocab, ")");
  }
  const at::Tensor no_positions;  // 0..T-1: rows are right-padded, each starts at position 0
  const PairRows rows{batch.get("chosen"), batch.get("rejected"), batch.get("chosen_segment_ids"), batch.get("rejected_segment_ids"),
                      batch.get("chosen_mask"), batch.get("rejected_mask")};
  // [chosen; rejected] sequence log-probabilities under `model`: one shared row per pair when the prompts
  // allow it, else the two rows of the batch.
  auto score = [&](nn::CausalTransformer& model) {
    if (config_.share_prompt) {
      if (auto shared = shared_prompt_logprobs(model, rows, loss_chunk_tokens_)) return at::cat({shared->chosen, shared->rejected});
    }
    return sequence_logprobs(token_logprobs(model, ids, no_positions, segments, loss_chunk_tokens_), mask);
  };

  const auto policy_logps = score(policy_);
  at::Tensor reference_logps;
  {
    at::NoGradGuard no_grad;
    if (reference_) {
      const auto device = ids.device();
      if (reference_->parameters().front().device() != device) reference_->to(device);
      reference_logps = score(reference_);
    } else {
      nn::AdaptersOff base(policy_);  // the frozen base the adapters sit on: the initial model exactly
      reference_logps = score(policy_);
    }
  }
  DpoLogps logps;
  logps.policy_chosen = policy_logps.narrow(0, 0, pairs);
  logps.policy_rejected = policy_logps.narrow(0, pairs, pairs);
  logps.reference_chosen = reference_logps.narrow(0, 0, pairs);
  logps.reference_rejected = reference_logps.narrow(0, pairs, pairs);
  if (dpo_needs_token_counts(config_)) {
    const auto counts = mask.sum(1);
    logps.chosen_tokens = counts.narrow(0, 0, pairs);
    logps.rejected_tokens = counts.narrow(0, pairs, pairs);
  }
  const DpoTerms terms = dpo_loss(logps, config_);
  Loss out;
  out.sum = terms.losses.sum().to(at::kFloat);
  out.count = static_cast<double>(pairs);
  out.metrics = dpo_metrics(terms, logps);
  return out;
}

Loss DpoObjective::loss(const data::Batch& batch, std::int64_t) { return compute(batch); }

Statistics DpoObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  Loss out = compute(batch);
  out.metrics.add("loss", out.sum.item<double>(), out.count);
  return out.metrics;
}

nlohmann::ordered_json DpoObjective::config_json() const {
  nlohmann::ordered_json out;
  out["name"] = name();
  out["dpo"] = config::to_json(config_);
  out["model"] = config::to_json(policy_->config());
  return out;
}

}  // namespace dew::objectives
