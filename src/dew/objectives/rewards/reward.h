#pragma once
// What GRPO scores its rollouts with: a Reward maps a batch of (prompt, completion, ground truth) to one
// number per completion. Built-ins (builtin_rewards.h) and an external command (command_reward.h) are
// made from spec strings by reward_spec.h. Torch-free: rewards see text, not tensors.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dew::objectives::rewards {

// One rollout as a reward sees it; the fields follow the verl/TRL prompt-dataset columns.
struct RewardInput {
  nlohmann::ordered_json prompt;   // the prompt as the dataset holds it (a string or a list of messages)
  std::string completion;          // the sampled text, decoded
  std::string ground_truth;        // the dataset's reference answer ("" when it has none)
  nlohmann::ordered_json extra_info;   // anything else the row carries (null when absent)
  nlohmann::ordered_json data_source;  // which dataset the row came from (null when absent)
};

class Reward {
 public:
  virtual ~Reward() = default;
  // The name metrics are logged under (reward/NAME).
  virtual std::string name() const = 0;
  // One finite number per input, in order. Throws dew::Error when it cannot score (bad ground truth, a
  // failed command).
  virtual std::vector<double> score(const std::vector<RewardInput>& batch) = 0;
};

}  // namespace dew::objectives::rewards
