// `dew train grpo` through the binary on the tiny llama GGUF (tests/fixtures/smollm2/tiny): built-in and
// command rewards, the logged metrics, validation, resume and eval; a failing --reward-cmd stops the run
// with its stderr and leaves the last checkpoint; bad input is refused by line and field before anything
// is written.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "dew/training/checkpoint.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

// Twelve prompts: text and chat messages, with numeric ground truths.
fs::path write_prompts(const fs::path& dir) {
  std::string lines;
  for (int i = 0; i < 12; ++i) {
    nlohmann::json row;
    if (i % 3 == 0) {
      row["prompt"] = nlohmann::json::array({{{"role", "user"}, {"content", "What is " + std::to_string(i) + " + 1?"}}});
    } else {
      row["prompt"] = "Q: " + std::to_string(i) + " + 2 = ";
    }
    row["ground_truth"] = std::to_string(i + (i % 3 == 0 ? 1 : 2));
    lines += row.dump() + "\n";
  }
  dew::test::write_text(dir / "prompts.jsonl", lines);
  return dir / "prompts.jsonl";
}

std::vector<nlohmann::json> scalar_lines(const fs::path& run) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(dew::test::read_text(run / "tracking" / "scalars.jsonl"));
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

const std::string kSettings =
    " --set grpo.group_size=2 --set grpo.max_new_tokens=4 --set trainer.batch_size=2 --set trainer.log_every=1"
    " --set trainer.checkpoint_every=2 --set trainer.peak_flops=1e9 --set trainer.device=cpu";

std::string train(const fs::path& data, const fs::path& run, const std::string& rest) {
  return dew::test::dew_single_threaded("train grpo --data '" + data.string() + "' --init-from '" + tiny_gguf().string() +
                                        "' --out '" + run.string() + "'" + kSettings + rest);
}

}  // namespace

TEST(GrpoTrainCommand, TrainsLogsEvaluatesAndResumes) {
  TempDir work;
  const auto data = write_prompts(work.path());
  const auto run = work.path() / "run";
  auto trained = run_command(train(data, run, " --reward 'regex:[a-z],last_number' --set grpo.epochs=2 --set trainer.steps=4"
                                              " --set trainer.eval_every=4"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("training grpo"), std::string::npos) << trained.output;
  auto stored = nlohmann::json::parse(dew::test::read_text(run / "run.json"));
  EXPECT_EQ(stored["kind"], "grpo");
  EXPECT_EQ(stored["config"]["grpo"]["reward"], "regex:[a-z],last_number");
  EXPECT_EQ(stored["config"]["grpo"]["epochs"], 2);
  auto lines = scalar_lines(run);
  ASSERT_EQ(lines.size(), 4u);
  for (const char* name : {"loss", "reward/mean", "reward/std", "reward/regex", "reward/last_number", "kl", "clip_fraction",
                           "completion_length"}) {
    EXPECT_TRUE(lines[3]["scalars"][name].is_number()) << name << " in " << lines[3].dump();
  }
  EXPECT_EQ(lines[0]["scalars"]["kl"].get<double>(), 0.0);  // the policy starts as the reference
  EXPECT_TRUE(lines[3]["scalars"]["val/reward"].is_number()) << lines[3].dump();  // 12 prompts: one held out
  EXPECT_TRUE(fs::exists(run / "tracking" / "val_reward.png"));
  EXPECT_FALSE(fs::exists(run / "4" / "objective.safetensors"));  // 4 steps = two whole groups: nothing cached

  auto resumed = run_command(train(data, run, " --reward 'regex:[a-z],last_number' --set grpo.epochs=2 --set trainer.steps=6"
                                              " --set trainer.eval_every=0"));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(run / "6" / "params.safetensors"));

  auto changed = run_command(train(data, run, " --reward exact_match --set grpo.epochs=2 --set trainer.steps=8"));
  EXPECT_EQ(changed.status, 1);
  EXPECT_NE(changed.output.find("grpo.reward"), std::string::npos) << changed.output;  // only trainer.* may change

  auto evaluated = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  auto j = nlohmann::json::parse(evaluated.output.substr(evaluated.output.find('{')));
  EXPECT_EQ(j["prompts"], 1);
  EXPECT_TRUE(j["reward"].is_number()) << j.dump();
  EXPECT_TRUE(j["reward/last_number"].is_number()) << j.dump();
}

TEST(GrpoTrainCommand, AFailingRewardCommandStopsTheRunWithItsStderrAfterTheLastCheckpoint) {
  TempDir work;
  const auto data = write_prompts(work.path());
  const auto run = work.path() / "run";
  // Scores two rollout batches (0.5 for every completion), then fails on the third.
  dew::test::write_text(work.path() / "reward.sh",
                        "n=$(cat '" + (work.path() / "calls").string() + "' 2>/dev/null || echo 0)\n"
                        "n=$((n + 1)); echo $n > '" + (work.path() / "calls").string() + "'\n"
                        "if [ $n -ge 3 ]; then cat > /dev/null; echo 'reward server exploded on call' $n >&2; exit 3; fi\n"
                        "while read -r line; do echo 0.5; done\n");
  auto failed = run_command(train(data, run, " --reward-cmd 'sh " + (work.path() / "reward.sh").string() +
                                                  "' --set trainer.steps=4 --set trainer.checkpoint_every=1"
                                                  " --set data.val_fraction=0"));
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_NE(failed.output.find("GRPO step 3"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("reward server exploded on call 3"), std::string::npos) << failed.output;
  ASSERT_EQ(dew::training::checkpoint_steps(run), (std::vector<std::int64_t>{1, 2}));
  EXPECT_NO_THROW(dew::training::Checkpoint(run / "2"));  // intact
  auto lines = scalar_lines(run);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["scalars"]["reward/command"].get<double>(), 0.5);
  EXPECT_EQ(lines[1]["scalars"]["reward/std"].get<double>(), 0.0);  // equal rewards: zero advantages
}

// `--reward-cmd 'sleep 100000'` hung the run forever with no message; grpo.reward_timeout bounds it.
TEST(GrpoTrainCommand, ARewardCommandPastTheTimeoutStopsTheRunNamingTheCommandAndTheLimit) {
  TempDir work;
  const auto data = write_prompts(work.path());
  auto hung = run_command(train(data, work.path() / "run", " --reward-cmd 'sleep 100000' --set grpo.reward_timeout=1"
                                                            " --set trainer.steps=2 --set data.val_fraction=0"));
  EXPECT_EQ(hung.status, 1) << hung.output;
  EXPECT_NE(hung.output.find("--reward-cmd 'sleep 100000' did not finish scoring 4 completions within grpo.reward_timeout = 1 "
                             "seconds"),
            std::string::npos)
      << hung.output;
}

TEST(GrpoTrainCommand, RefusesBadInputBeforeWritingAnything) {
  TempDir work;
  const auto data = write_prompts(work.path());
  const auto run = work.path() / "run";
  auto expect_refused = [&](const std::string& command, const std::string& message) {
    auto result = run_command(command);
    EXPECT_EQ(result.status, 1) << result.output;
    EXPECT_NE(result.output.find(message), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run)) << command;
  };
  expect_refused(train(data, run, ""), "GRPO needs a reward: pass --reward NAME");
  expect_refused(train(data, run, " --reward nonsense"), "nonsense");
  expect_refused(train(data, run, " --reward-cmd cat --set grpo.reward_timeout=0"),
                 "grpo.reward_timeout must be a positive number of seconds");
  expect_refused(dew::test::dew_single_threaded("train grpo --data '" + data.string() + "' --out '" + run.string() +
                                                "' --reward exact_match" + kSettings),
                 "pass --init-from MODEL");
  dew::test::write_text(work.path() / "bad.jsonl", "{\"prompt\": \"fine\"}\n{\"prompt\": 7}\n");
  expect_refused(train(work.path() / "bad.jsonl", run, " --reward exact_match"), "bad.jsonl:2");
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "word" + std::to_string(i) + " ";
  dew::test::write_text(work.path() / "long.jsonl", "{\"prompt\": \"short\"}\n{\"prompt\": \"" + long_prompt + "\"}\n");
  expect_refused(train(work.path() / "long.jsonl", run, " --reward exact_match"),
                 "long.jsonl:2: field 'prompt' is ");
}
