#include "dew/objectives/rewards/reward_spec.h"

#include <set>

#include "dew/core/error.h"
#include "dew/objectives/rewards/builtin_rewards.h"
#include "dew/objectives/rewards/command_reward.h"

namespace dew::objectives::rewards {
namespace {

// A reward under another name, so two regex rewards log as reward/regex and reward/regex_2.
class Renamed final : public Reward {
 public:
  Renamed(std::unique_ptr<Reward> inner, std::string name) : inner_(std::move(inner)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override { return inner_->score(batch); }

 private:
  std::unique_ptr<Reward> inner_;
  std::string name_;
};

}  // namespace

std::string known_reward_specs() { return "exact_match, last_number, regex:PATTERN"; }

std::unique_ptr<Reward> make_reward(const std::string& spec) {
  if (spec == "exact_match") return std::make_unique<ExactMatchReward>();
  if (spec == "last_number") return std::make_unique<LastNumberReward>();
  if (spec.rfind("regex:", 0) == 0) {
    auto pattern = spec.substr(6);
    if (pattern.empty()) dew::fail("reward 'regex:' has no pattern; write regex:PATTERN, e.g. regex:^<answer>");
    return std::make_unique<RegexReward>(pattern);
  }
  dew::fail("unknown reward '", spec, "'; the built-in rewards are ", known_reward_specs(),
            ", and --reward-cmd CMD runs your own");
}

std::vector<std::unique_ptr<Reward>> make_rewards(const std::vector<std::string>& specs,
                                                  const std::string& reward_command, double reward_timeout_seconds) {
  std::vector<std::unique_ptr<Reward>> out;
  std::set<std::string> taken;
  auto add = [&](std::unique_ptr<Reward> reward) {
    auto name = reward->name();
    for (int k = 2; taken.count(name); ++k) name = reward->name() + "_" + std::to_string(k);
    taken.insert(name);
    if (name != reward->name()) reward = std::make_unique<Renamed>(std::move(reward), name);
    out.push_back(std::move(reward));
  };
  for (const auto& spec : specs) add(make_reward(spec));
  if (!reward_command.empty()) add(std::make_unique<CommandReward>(reward_command, reward_timeout_seconds));
  return out;
}

}  // namespace dew::objectives::rewards
