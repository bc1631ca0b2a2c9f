#pragma once
// Rewards named on the command line or in a config: "exact_match", "last_number", "regex:PATTERN"
// (builtin_rewards.h), and the external --reward-cmd (command_reward.h).
#include <memory>
#include <string>
#include <vector>

#include "dew/objectives/rewards/command_reward.h"
#include "dew/objectives/rewards/reward.h"

namespace dew::objectives::rewards {

// The built-in specs, for help texts and error messages: "exact_match, last_number, regex:PATTERN".
std::string known_reward_specs();

// One reward from its spec; an unknown name throws dew::Error listing the known ones.
std::unique_ptr<Reward> make_reward(const std::string& spec);

// Several rewards, in order, with distinct names: a repeated name gets _2, _3, ... ("regex", "regex_2").
// The command reward, when `reward_command` is not empty, comes last, named "command", and may take
// `reward_timeout_seconds` per batch (command_reward.h).
std::vector<std::unique_ptr<Reward>> make_rewards(const std::vector<std::string>& specs,
                                                  const std::string& reward_command = "",
                                                  double reward_timeout_seconds = CommandReward::kDefaultTimeoutSeconds);

}  // namespace dew::objectives::rewards
