#pragma once
// The built-in rewards: exact match, last number, regex format. Each gives 1 or 0 per completion.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dew/objectives/rewards/reward.h"

namespace dew::objectives::rewards {

// 1 when the completion equals the ground truth after trimming ASCII whitespace at both ends, else 0.
class ExactMatchReward final : public Reward {
 public:
  std::string name() const override { return "exact_match"; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override;
};

// 1 when the last number in the completion equals the last number in the ground truth (so "#### 72" and
// "72" both work as ground truths), compared as decimals: "1,234.50" == "1234.5", "-0" == "0". A ground
// truth without a number is an error (the reward cannot be computed, not a wrong answer).
class LastNumberReward final : public Reward {
 public:
  std::string name() const override { return "last_number"; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override;
};

// 1 when PATTERN (PCRE2, UTF-8) matches anywhere in the completion, else 0. Anchor with ^ and $ to match the
// whole text; `.` does not match a newline unless the pattern starts with (?s).
class RegexReward final : public Reward {
 public:
  explicit RegexReward(const std::string& pattern);  // throws dew::Error naming the pattern when invalid
  ~RegexReward() override;
  std::string name() const override { return "regex"; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

// The last number in `text` as a canonical decimal string ("-12.5", "1234", "0.25"), or nothing. A number is
// digits with an optional fraction (".5" too), thousands separated by commas ("1,234,567"), and a leading
// '-' when the '-' does not follow a letter or digit ("3-2" is 3 and 2, "x = -2" is -2). Exponents are not
// read ("1e5" is 1 and 5).
std::optional<std::string> last_number(std::string_view text);

// `text` without ASCII whitespace at either end.
std::string_view trim_whitespace(std::string_view text);

}  // namespace dew::objectives::rewards
