// `dew train lm`, `dew eval` and `dew generate` as a user runs them: a tiny run end to end through the
// binary, resuming, and the errors for bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/telemetry/local_tracker.h"
#include "run_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

const char* const kTinyModel = dew::test::kTinyModelFlags;

// A byte-level token directory of repetitive English (so a few steps lower the loss).
fs::path make_tokens(const fs::path& work) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "Once upon a time there was a little house by the sea. ";
  dew::test::write_text(work / "corpus.txt", text);
  auto result = run_command(dew::test::dew_single_threaded("tokenize --input '" + (work / "corpus.txt").string() + "' --out '" +
                                    (work / "tokens").string() + "' --val-fraction 0.2"));
  EXPECT_EQ(result.status, 0) << result.output;
  return work / "tokens";
}

}  // namespace

TEST(TrainCommand, TrainsEvaluatesGeneratesAndResumes) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  auto run = work.path() / "run";
  auto trained = run_command(dew::test::dew_single_threaded("train lm --data '" + tokens.string() + "' --out '" + run.string() + "'" +
                                     kTinyModel + " --set trainer.steps=8"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("new run"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find("validation (EMA weights): ce "), std::string::npos) << trained.output;
  EXPECT_TRUE(fs::exists(run / "run.json"));
  EXPECT_TRUE(fs::exists(run / "8" / "params.safetensors"));
  EXPECT_TRUE(fs::exists(run / "tracking" / "loss.png"));
  EXPECT_TRUE(fs::exists(run / "tracking" / "val_perplexity.png"));

  // tracking/scalars.jsonl: {"step": N, "time": ..., "scalars": {"loss": ...}} per logged step.
  std::vector<nlohmann::json> lines;
  {
    std::istringstream in(dew::test::read_text(run / "tracking" / "scalars.jsonl"));
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["step"], 2);
  EXPECT_TRUE(lines[0]["time"].is_number());
  EXPECT_TRUE(lines[0]["scalars"]["loss"].is_number());
  EXPECT_LT(lines[3]["scalars"]["loss"].get<double>(), lines[0]["scalars"]["loss"].get<double>());
  EXPECT_TRUE(lines[3]["scalars"]["val/perplexity"].is_number());

  // dew eval agrees with the last validation the trainer logged (same EMA weights, whole split).
  auto evaluated = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  auto e = nlohmann::json::parse(evaluated.output);
  EXPECT_EQ(e["weights"], "ema");
  EXPECT_NEAR(e["ce"].get<double>(), lines[3]["scalars"]["val/ce"].get<double>(), 1e-5);
  EXPECT_NEAR(e["perplexity"].get<double>(), std::exp(e["ce"].get<double>()), 1e-6 * e["perplexity"].get<double>());
  auto text_eval = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "'"));
  EXPECT_NE(text_eval.output.find("perplexity "), std::string::npos) << text_eval.output;

  // Greedy generation is deterministic and continues the prompt.
  auto generate = dew::test::dew_single_threaded("generate '" + run.string() + "' --prompt 'Once upon' --max-new-tokens 12");
  auto g1 = run_command(generate), g2 = run_command(generate);
  ASSERT_EQ(g1.status, 0) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  EXPECT_EQ(g1.output.rfind("Once upon", 0), 0u) << g1.output;
  auto json = run_command(dew::test::dew_single_threaded("generate '" + run.string() +
                                  "' --prompt 'Once upon' --prompt 'sea' --max-new-tokens 5 --temperature 1 --n 2 --seed 3 --json"));
  ASSERT_EQ(json.status, 0) << json.output;
  std::istringstream rows(json.output);
  int count = 0;
  for (std::string line; std::getline(rows, line); ++count) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["tokens"].size(), 5u);
    EXPECT_EQ(j["logprobs"].size(), 5u);
    EXPECT_LE(j["logprobs"][0].get<double>(), 0.0);
  }
  EXPECT_EQ(count, 4);  // 2 prompts x 2 continuations

  // Resume: the same command with more steps continues from step 8.
  auto resumed = run_command(dew::test::dew_single_threaded("train lm --out '" + run.string() + "' --set trainer.steps=12"));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(run / "12" / "params.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(dew::test::read_text(run / "run.json"))["config"]["trainer"]["steps"], 12);
}

TEST(TrainCommand, BadInputGetsAClearErrorAndWritesNothing) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  auto run = work.path() / "run";
  auto train = [&](const std::string& extra) {
    return run_command(dew::test::dew_single_threaded("train lm --data '" + tokens.string() + "' --out '" + run.string() + "'" + kTinyModel +
                               " --set trainer.steps=2 " + extra));
  };
  auto unknown = train("--set model.num_layerz=3");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("'model.num_layerz' does not exist"), std::string::npos) << unknown.output;
  auto too_long = train("--set data.seq_len=100");
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.output.find("data.seq_len (100) is larger than model.max_seq_len (48)"), std::string::npos)
      << too_long.output;
  auto vocab = train("--set model.vocab_size=100");
  EXPECT_EQ(vocab.status, 1);
  EXPECT_NE(vocab.output.find("uses a vocabulary of 256"), std::string::npos) << vocab.output;
  auto no_data = run_command(dew::test::dew_single_threaded("train lm --out '" + run.string() + "'"));
  EXPECT_EQ(no_data.status, 1);
  EXPECT_NE(no_data.output.find("pass --data DIR"), std::string::npos) << no_data.output;
  EXPECT_FALSE(fs::exists(run));

  auto print = train("--print-config");
  ASSERT_EQ(print.status, 0) << print.output;
  EXPECT_EQ(nlohmann::json::parse(print.output)["model"]["num_layers"], 2);
  EXPECT_FALSE(fs::exists(run));
  // --print-config shows only what training would accept: settings that need no data are checked first.
  for (const std::string bad : {"--set optim.name=muon", "--set trainer.batch_size=0", "--set lora.rank=-1"}) {
    auto refused = train(bad + " --print-config");
    EXPECT_EQ(refused.status, 1) << bad << ": " << refused.output;
    EXPECT_EQ(refused.output.find("\"model\""), std::string::npos) << bad << ": printed a config it would refuse";
    EXPECT_FALSE(fs::exists(run));
  }

  ASSERT_EQ(train("").status, 0);
  auto changed = run_command(dew::test::dew_single_threaded("train lm --out '" + run.string() + "' --set model.num_layers=3"));
  EXPECT_EQ(changed.status, 1);
  EXPECT_NE(changed.output.find("can change only trainer.*"), std::string::npos) << changed.output;

  std::string long_prompt(200, 'x');
  auto too_long_prompt = run_command(dew::test::dew_single_threaded("generate '" + run.string() + "' --prompt " + long_prompt));
  EXPECT_EQ(too_long_prompt.status, 1);
  EXPECT_NE(too_long_prompt.output.find("--prompt 1 is 200 tokens but the model's context (model.max_seq_len) is 48"),
            std::string::npos) << too_long_prompt.output;
  auto clamped = run_command(dew::test::dew_single_threaded("generate '" + run.string() + "' --prompt " + std::string(40, 'x') +
                                     " --max-new-tokens 20"));
  EXPECT_EQ(clamped.status, 0) << clamped.output;
  EXPECT_NE(clamped.output.find("lowered to 8"), std::string::npos) << clamped.output;

  auto not_a_run = run_command(dew::test::dew_single_threaded("eval '" + tokens.string() + "'"));
  EXPECT_EQ(not_a_run.status, 1);
  EXPECT_NE(not_a_run.output.find("is not a run directory"), std::string::npos) << not_a_run.output;

  // A checkpoint cut short (its params file truncated) is refused by path, for eval as for resuming.
  auto params = run / "2" / "params.safetensors";
  fs::resize_file(params, fs::file_size(params) / 2);
  auto corrupt = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "'"));
  EXPECT_EQ(corrupt.status, 1);
  EXPECT_NE(corrupt.output.find("params.safetensors"), std::string::npos) << corrupt.output;
  auto corrupt_resume = run_command(dew::test::dew_single_threaded("train lm --out '" + run.string() + "' --set trainer.steps=4"));
  EXPECT_EQ(corrupt_resume.status, 1);
  EXPECT_NE(corrupt_resume.output.find("params.safetensors"), std::string::npos) << corrupt_resume.output;
  EXPECT_FALSE(fs::exists(run / "4"));
}

namespace {

// Image runs start from random weights: --init-from is offered only to the kinds that can start from a
// trained model, so an image kind's --help does not advertise it and using it is a command-line error.
TEST(TrainCommand, ImageKindsAreNotOfferedInitFrom) {
  TempDir tmp;
  for (const std::string kind : {"diffusion", "classifier", "jepa"}) {
    auto help = run_command(dew::test::dew_single_threaded("train " + kind + " --help"));
    EXPECT_EQ(help.status, 0) << help.output;
    EXPECT_EQ(help.output.find("--init-from"), std::string::npos) << kind << ": " << help.output;
    auto used = run_command(dew::test::dew_single_threaded("train " + kind + " --data x --out '" + (tmp / kind).string() +
                                                           "' --init-from y"));
    EXPECT_EQ(used.status, 1) << kind << ": " << used.output;
    EXPECT_NE(used.output.find("--init-from"), std::string::npos) << kind << ": " << used.output;
    EXPECT_FALSE(fs::exists(tmp / kind));
  }
  auto lm_help = run_command(dew::test::dew_single_threaded("train lm --help"));
  EXPECT_NE(lm_help.output.find("--init-from"), std::string::npos) << lm_help.output;
}

}  // namespace
