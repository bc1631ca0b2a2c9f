#pragma once
// GRPO as an Objective: each rollout step samples grpo.group_size completions of every prompt in the batch
// with the policy, scores them with the rewards, turns the scores into group advantages (grpo_loss.h) and
// optimises the clipped policy-ratio loss with a k3 KL penalty to a frozen reference; the next
// grpo.epochs - 1 steps optimise the same rollouts again (RepeatedBatches serves them the same prompts).
//
// A batch holds "prompt_index" (data/prompt_rows.h); the objective holds the prompts themselves.
//
// Step s is a rollout step when s % epochs == 0. Its micro-batch m is sampled with Sampling.seed =
// rollout_seed(trainer.seed, s, m), a pure function of the three: a resumed run needs no sampler state,
// only the cached rollout of an unfinished group, which state() hands the trainer for the checkpoint.
//
// Log-probabilities (a decision, TRL's): the policy's per-token log-probabilities are taken at
// logits / grpo.temperature, the distribution the completions were drawn from before top_p; the
// behaviour ("old") log-probabilities are the policy's own, detached, from the rollout step's forward pass
// with the weights that sampled (TRL's num_iterations > 1 path, where it recomputes them before any
// update). generate() also records log-probabilities at sampling time, but at temperature 1 and through the
// KV-cache path, whose rounding differs from the training forward: a ratio against them would not be
// exactly 1 on the first pass, and would be wrong by the temperature factor at temperature != 1. The
// reference's log-probabilities are taken the same way (TRL: ref logits / temperature too).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/tokenizer.h"
#include "dew/nn/causal_transformer.h"
#include "dew/objectives/grpo_loss.h"
#include "dew/objectives/micro_batch_index.h"
#include "dew/objectives/objective.h"
#include "dew/objectives/rewards/command_reward.h"
#include "dew/objectives/rewards/reward.h"
#include "dew/objectives/rollout.h"

namespace dew::objectives {

// The `grpo.*` section of a GRPO run: the loss's settings and where the rewards come from.
struct GrpoObjectiveConfig : GrpoConfig {
  std::string reward;      // built-in reward specs, comma-separated ("last_number,regex:^<think>")
  std::string reward_cmd;  // an external program scoring each rollout batch (command_reward.h); "" = none
  double reward_timeout = rewards::CommandReward::kDefaultTimeoutSeconds;  // seconds reward_cmd may take per batch
  // Logits this many tokens at a time (bounds memory; 0 = all). 256 as for DPO: a rollout batch is a few
  // hundred tokens and one [chunk, vocab] block on top of the activations sets the peak.
  std::int64_t loss_chunk_tokens = 256;
  bool share_prompt = true;  // one pass over each prompt for its group's completions (objectives/shared_prompt_logprobs.h)

  template <class V>
  void fields(V& v) {
    GrpoConfig::fields(v);
    v("reward", reward, "built-in rewards, comma-separated: exact_match, last_number, regex:PATTERN (--reward sets it)");
    v("reward_cmd", reward_cmd, "a shell command scoring each rollout batch, JSON lines in, numbers out (--reward-cmd)");
    v("reward_timeout", reward_timeout, "seconds reward_cmd may take to score one rollout batch; then it is killed and the run stops");
    v("loss_chunk_tokens", loss_chunk_tokens, "compute logits this many tokens at a time (bounds memory); 0 = all");
    v("share_prompt", share_prompt,
      "score each group's completions in one row after its prompt (same log-probabilities, fewer FLOPs); "
      "false = one full row per completion, as TRL does");
  }
  // GrpoConfig::validate, loss_chunk_tokens >= 0, reward_timeout > 0, and at least one reward (each spec known).
  void validate() const;
  // `reward` split at commas; a piece that does not start a known spec (exact_match, last_number, regex:)
  // belongs to the regex before it, so "regex:a{1,3}" stays one spec.
  std::vector<std::string> reward_specs() const;
};

// One prompt as the objective needs it: its ids and what the rewards see of it.
struct GrpoPrompt {
  std::vector<data::TokenId> ids;
  nlohmann::ordered_json prompt;  // as the file holds it (a string or a message list)
  std::string ground_truth;
  nlohmann::ordered_json data_source, extra_info;
};

// Everything a GrpoObjective is built from.
struct GrpoSetup {
  nn::CausalTransformer policy{nullptr};
  RolloutFunction rollout;  // samples the completions (the run kind passes the decoding engine's generate)
  // The frozen reference, or (when null) a function that loads it at the first rollout, so that evaluation
  // alone never loads it; neither is needed when config.beta == 0.
  nn::CausalTransformer reference{nullptr};
  std::function<nn::CausalTransformer()> load_reference;
  // The reference is the policy with its LoRA adapters off (nn::AdaptersOff): the base they train on, with
  // no second copy of the weights.
  bool reference_is_base = false;
  const data::Tokenizer* tokenizer = nullptr;  // decodes completions; must outlive the objective
  std::vector<std::int64_t> stop_ids;          // a completion ends after one of these
  std::vector<GrpoPrompt> prompts;             // indexed by the batches' prompt_index
  std::vector<std::unique_ptr<rewards::Reward>> rewards;  // summed into the reward; each logged as reward/NAME
  GrpoObjectiveConfig config;
  std::uint64_t seed = 0;  // trainer.seed: the rollouts' sampling seeds derive from it
};

// The sampling seed of micro-batch `micro` of rollout step `step` (SplitMix64 over the three).
std::uint64_t rollout_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro);

class GrpoObjective final : public Objective {
 public:
  explicit GrpoObjective(GrpoSetup setup);
  ~GrpoObjective() override;

  std::string name() const override { return "grpo"; }
  // GRPO post-trains a model: init() draws fresh weights (from `seed`) only for tests and toy runs.
  void init(std::uint64_t seed) override;
  torch::nn::Module& module() override { return *policy_; }
  // Metrics: reward/mean, reward/std (mean over groups of each group's std), reward/NAME per reward, kl,
  // clip_fraction, completion_length; count = completion tokens (EOS included).
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  // Greedy completions of the batch's prompts, scored: "reward" and "reward/NAME" (per prompt), and
  // "completion_length".
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;
  // The validation reward is not a loss: it gets its own plot (val_reward.png) rather than sharing loss.png.
  std::string validation_loss() const override { return ""; }

  // The rollout of an unfinished group (empty when the next step samples anew), for checkpoints.
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;

  struct Rollout;

 private:
  Rollout sample(const at::Tensor& prompt_index, std::int64_t step, std::int64_t micro);
  std::vector<std::vector<std::int32_t>> prompt_ids(const std::vector<std::int64_t>& index) const;
  std::vector<std::string> completion_texts(const Rollouts& rollouts) const;
  // The reference's per-token log-probabilities of a rollout (beta > 0), without gradients.
  at::Tensor reference_logprobs(const at::Tensor& ids, const at::Tensor& mask);
  std::vector<double> score(const std::vector<std::int64_t>& prompt_rows, const std::vector<std::string>& completions,
                            std::vector<std::vector<double>>* per_reward);
  void place_reference();  // loads the reference if need be, on the policy's device
  // Per-token log-probabilities [R, T - 1] of a rollout's rows under `model`: one shared row per group when
  // grpo.share_prompt and the rows allow it, else one row each.
  at::Tensor logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& mask);
  void freeze_reference();

  nn::CausalTransformer policy_, reference_;
  RolloutFunction rollout_;
  std::function<nn::CausalTransformer()> load_reference_;
  bool reference_is_base_ = false;
  const data::Tokenizer* tokenizer_;
  std::vector<std::int64_t> stop_ids_;
  std::vector<GrpoPrompt> prompts_;
  std::vector<std::unique_ptr<rewards::Reward>> rewards_;
  GrpoObjectiveConfig config_;
  std::uint64_t seed_;
  MicroBatchIndex micro_;                // the step and micro-batch loss() last saw
  std::int64_t cache_step_ = -1;         // the rollout step whose rollouts cache_ holds
  std::vector<Rollout> cache_;           // one per micro-batch of that step
};

}  // namespace dew::objectives
