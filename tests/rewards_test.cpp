// GRPO rewards: the built-ins (exact match after trimming, last number, regex search), specs and their
// errors, and --reward-cmd's protocol: the JSON lines it receives, the numbers it prints, and every way it
// can fail (exit status, signal, wrong count, non-number, non-finite) quoting its stderr; a 5000-row batch
// whose command writes while it reads must not deadlock, and one that never reads its stdin must not kill us.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "dew/objectives/rewards/builtin_rewards.h"
#include "dew/objectives/rewards/command_reward.h"
#include "dew/objectives/rewards/reward_spec.h"
#include "test_support.h"

namespace {
using namespace dew::objectives::rewards;

RewardInput row(std::string completion, std::string ground_truth = "") {
  RewardInput r;
  r.prompt = "What is 6 * 7?";
  r.completion = std::move(completion);
  r.ground_truth = std::move(ground_truth);
  return r;
}

std::vector<double> score(Reward& reward, const std::vector<RewardInput>& batch) { return reward.score(batch); }

TEST(Rewards, ExactMatchComparesTrimmedText) {
  ExactMatchReward reward;
  EXPECT_EQ(score(reward, {row("  42\n", "42"), row("42", " 42\t"), row("42.0", "42"), row("4 2", "42"), row("", "")}),
            (std::vector<double>{1, 1, 0, 0, 1}));
}

TEST(Rewards, LastNumberReadsSignsDecimalsAndThousands) {
  struct Case {
    const char* text;
    const char* want;  // nullptr = no number
  };
  for (auto [text, want] : std::vector<Case>{{"The answer is 42.", "42"},
                                             {"3 apples and 5 pears: 8", "8"},
                                             {"x = -2.50", "-2.5"},
                                             {"costs $1,234,567 total", "1234567"},
                                             {"a list 3,4,5", "5"},
                                             {"1234,567", "567"},
                                             {"ratio .5", "0.5"},
                                             {"007", "7"},
                                             {"-0.0", "0"},
                                             {"3-2", "2"},
                                             {"x-2", "2"},
                                             {"(-2)", "-2"},
                                             {"1e5", "5"},
                                             {"no digits here", nullptr},
                                             {"", nullptr}}) {
    auto got = last_number(text);
    if (want) {
      ASSERT_TRUE(got.has_value()) << text;
      EXPECT_EQ(*got, want) << text;
    } else {
      EXPECT_FALSE(got.has_value()) << text;
    }
  }
}

TEST(Rewards, LastNumberComparesAsDecimalsAndRefusesANumberlessGroundTruth) {
  LastNumberReward reward;
  EXPECT_EQ(score(reward, {row("so 6*7 = 42", "#### 42"), row("1,000.0", "1000"), row("41 then 42", "42"),
                           row("42 then 41", "42"), row("no idea", "42"), row("-3", "3")}),
            (std::vector<double>{1, 1, 1, 0, 0, 0}));
  auto message = dew::test::error_of([&] { reward.score({row("42", "forty-two")}); });
  EXPECT_NE(message.find("'forty-two' holds no number"), std::string::npos) << message;
}

TEST(Rewards, RegexSearchesAnywhereAndSurvivesInvalidUtf8) {
  RegexReward reward("<answer>\\d+</answer>");
  EXPECT_EQ(score(reward, {row("think... <answer>42</answer>"), row("<answer>x</answer>"), row("\xff\xfe<answer>1</answer>")}),
            (std::vector<double>{1, 0, 1}));
  RegexReward anchored("^<think>(?s).*</think>$");
  EXPECT_EQ(score(anchored, {row("<think>a\nb</think>"), row(" <think>a</think>")}), (std::vector<double>{1, 0}));
  auto message = dew::test::error_of([] { RegexReward bad("(unclosed"); });
  EXPECT_NE(message.find("regex:(unclosed is not a valid PCRE2 pattern"), std::string::npos) << message;
}

TEST(Rewards, SpecsMakeBuiltInsWithDistinctNamesAndUnknownOnesListTheKnown) {
  auto rewards = make_rewards({"exact_match", "regex:a", "last_number", "regex:b"}, "cat >/dev/null; echo 1");
  std::vector<std::string> names;
  for (const auto& r : rewards) names.push_back(r->name());
  EXPECT_EQ(names, (std::vector<std::string>{"exact_match", "regex", "last_number", "regex_2", "command"}));
  EXPECT_EQ(rewards[3]->score({row("xbx"), row("a")}), (std::vector<double>{1, 0}));
  auto message = dew::test::error_of([] { make_reward("exactmatch"); });
  EXPECT_NE(message.find("unknown reward 'exactmatch'; the built-in rewards are exact_match, last_number, regex:PATTERN"),
            std::string::npos)
      << message;
  EXPECT_NE(dew::test::error_of([] { make_reward("regex:"); }).find("no pattern"), std::string::npos);
}

TEST(CommandReward, SendsOneJsonObjectPerLineAndReadsOneNumberPerLine) {
  dew::test::TempDir dir;
  auto seen = dir / "stdin.jsonl";
  // Saves what it was given, then scores 1 for completions containing "yes" (awk, no Python needed).
  CommandReward reward("tee '" + seen.string() + "' | awk '/\"completion\":\"[^\"]*yes/ { print 1; next } { print \" 0.25 \" }'");
  auto a = row("yes, 42", "42");
  a.extra_info = {{"id", 7}};
  a.data_source = "gsm8k";
  auto b = row("no \xff", "");
  b.prompt = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(reward.score({a, b}), (std::vector<double>{1, 0.25}));
  EXPECT_EQ(dew::test::read_text(seen),
            "{\"prompt\":\"What is 6 * 7?\",\"completion\":\"yes, 42\",\"ground_truth\":\"42\",\"extra_info\":{\"id\":7},"
            "\"data_source\":\"gsm8k\"}\n"
            "{\"prompt\":[{\"role\":\"user\",\"content\":\"hi\"}],\"completion\":\"no \xEF\xBF\xBD\",\"ground_truth\":\"\","
            "\"extra_info\":null,\"data_source\":null}\n");
  EXPECT_EQ(reward.score({}), std::vector<double>{});
}

std::string failure_of(const std::string& command, std::size_t rows = 3) {
  CommandReward reward(command);
  return dew::test::error_of([&] { reward.score(std::vector<RewardInput>(rows, row("x"))); });
}

TEST(CommandReward, FailuresQuoteTheCommandTheProblemAndItsStderr) {
  auto crash = failure_of("cat >/dev/null; echo 'reward model exploded' >&2; exit 3");
  EXPECT_NE(crash.find("--reward-cmd 'cat >/dev/null; echo 'reward model exploded' >&2; exit 3' exited with status 3 "
                       "while scoring 3 completions"),
            std::string::npos)
      << crash;
  EXPECT_NE(crash.find("reward model exploded"), std::string::npos) << crash;

  auto killed = failure_of("kill -9 $$");
  EXPECT_NE(killed.find("was killed by signal 9"), std::string::npos) << killed;
  EXPECT_NE(killed.find("its stderr was empty"), std::string::npos) << killed;

  auto count = failure_of("cat >/dev/null; echo 1; echo 2");
  EXPECT_NE(count.find("printed 2 numbers for 3 completions"), std::string::npos) << count;

  auto text = failure_of("cat >/dev/null; echo 1; echo 'abc'; echo 2");
  EXPECT_NE(text.find("printed 'abc' on stdout line 2, which is not a number"), std::string::npos) << text;

  auto blank = failure_of("cat >/dev/null; echo 1; echo; echo 2");
  EXPECT_NE(blank.find("printed '' on stdout line 2"), std::string::npos) << blank;

  auto nan = failure_of("cat >/dev/null; echo 1; echo nan; echo 2");
  EXPECT_NE(nan.find("non-finite reward 'nan' on stdout line 2"), std::string::npos) << nan;
  auto inf = failure_of("cat >/dev/null; echo 1; echo 2; echo -inf");
  EXPECT_NE(inf.find("non-finite reward '-inf' on stdout line 3"), std::string::npos) << inf;

  // Only the last ~2 KB of a long stderr are quoted, ending with what it printed last.
  auto noisy = failure_of("cat >/dev/null; i=0; while [ $i -lt 3000 ]; do echo \"noise line $i\" >&2; i=$((i+1)); done; "
                          "echo 'the real reason' >&2; exit 1");
  EXPECT_LT(noisy.size(), 2600u);
  EXPECT_NE(noisy.find("the real reason"), std::string::npos);
  EXPECT_EQ(noisy.find("noise line 1\n"), std::string::npos);

  EXPECT_NE(dew::test::error_of([] { CommandReward(" "); }).find("--reward-cmd is empty"), std::string::npos);
}

// A command that never answers hung GRPO forever with no message. Past its timeout it is killed with its
// whole process group (here a shell waiting on a background sleep: killing the shell alone would leave the
// sleep running), and the error names the command, the limit and what to do.
TEST(CommandReward, ACommandPastItsTimeoutIsKilledWithItsProcessGroup) {
  dew::test::TempDir dir;
  const auto pid_file = dir.path() / "sleep.pid";
  const std::string command = "sleep 100000 & echo $! > '" + pid_file.string() + "'; wait";
  CommandReward reward(command, /*timeout_seconds=*/0.5);
  auto message = dew::test::error_of([&] { reward.score({row("a"), row("b")}); });
  EXPECT_NE(message.find("--reward-cmd '" + command + "' did not finish scoring 2 completions within "
                         "grpo.reward_timeout = 0.5 seconds and was killed"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--set grpo.reward_timeout=SECONDS"), std::string::npos) << message;
  // The background sleep went with the group. Dead = gone, or a zombie its new parent has not reaped yet.
  const pid_t sleeper = std::stoi(dew::test::read_text(pid_file));
  auto alive = [&] {
    std::ifstream stat("/proc/" + std::to_string(sleeper) + "/stat");
    std::string pid, name, state;
    return static_cast<bool>(stat >> pid >> name >> state) && state != "Z";
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (alive() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(alive()) << "pid " << sleeper;

  // A command that answers in time is not affected by the limit.
  CommandReward quick("cat >/dev/null; echo 1; echo 0", /*timeout_seconds=*/30);
  EXPECT_EQ(quick.score({row("a"), row("b")}), (std::vector<double>{1, 0}));
  EXPECT_NE(dew::test::error_of([] { CommandReward("cat", 0); }).find("grpo.reward_timeout must be a positive"), std::string::npos);
}

TEST(CommandReward, LargeBatchesDoNotDeadlock) {
  // 5000 rows of ~600 bytes in (3 MB) while the command writes 1 MB out as it reads: writing all input before
  // reading any output would block both sides on full pipes.
  std::vector<RewardInput> batch;
  for (int i = 0; i < 5000; ++i) batch.push_back(row(std::string(560, 'a' + i % 26) + std::to_string(i), "1"));
  CommandReward reward("awk '{ printf \"%200s%d\\n\", \"\", NR % 3 }'");
  auto scores = reward.score(batch);
  ASSERT_EQ(scores.size(), 5000u);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(scores[i], (i + 1) % 3) << i;
}

TEST(CommandReward, ACommandThatNeverReadsItsStdinStillCounts) {
  // The command exits without reading 3 MB of input: our writes fail with EPIPE, which must neither kill
  // this process (SIGPIPE) nor fail the batch -- its answer is complete.
  std::vector<RewardInput> batch(5000, row(std::string(600, 'z')));
  CommandReward reward("yes 0.5 | head -n 5000");
  auto scores = reward.score(batch);
  ASSERT_EQ(scores.size(), 5000u);
  EXPECT_EQ(scores.front(), 0.5);
  EXPECT_EQ(scores.back(), 0.5);
}

}  // namespace
