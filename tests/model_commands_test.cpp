// `dew generate`, `dew chat`, `dew export` and `dew train lm --init-from` on published-format models, through
// the binary: a tiny llama GGUF written the way llama.cpp's converter writes it (tests/fixtures/smollm2/tiny,
// with its transformers reference numbers), converted to a Hugging Face directory and back.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

nlohmann::json tiny_reference() {
  return nlohmann::json::parse(dew::test::read_text(dew::test::fixtures() / "smollm2" / "tiny" / "llama.json"));
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Greedy tokens of `model` continuing the reference prompt, through `dew generate --json`.
std::vector<int> greedy_tokens(const fs::path& model, int count) {
  auto result = run_command(dew::test::dew_single_threaded("generate '" + model.string() + "' --prompt " + quoted(tiny_reference()["text"]) +
                                    " --max-new-tokens " + std::to_string(count) + " --no-eos --json"));
  EXPECT_EQ(result.status, 0) << result.output;
  if (result.status != 0) return {};
  return nlohmann::json::parse(result.output)["tokens"].get<std::vector<int>>();
}

}  // namespace

TEST(ModelCommands, GenerateFromGgufEqualsTransformersGreedy) {
  auto expected = tiny_reference()["continuation"].get<std::vector<int>>();
  EXPECT_EQ(greedy_tokens(tiny_gguf(), static_cast<int>(expected.size())), expected);
}

TEST(ModelCommands, ChatAnswersOnceOrInteractively) {
  auto once = run_command(dew::test::dew_single_threaded("chat '" + tiny_gguf().string() + "' --prompt 'The capital of France?' --max-new-tokens 4"));
  ASSERT_EQ(once.status, 0) << once.output;
  EXPECT_FALSE(once.output.empty());

  TempDir dir;
  dew::test::write_text(dir.path() / "input.txt", "first question\nsecond question\n/exit\n");
  auto interactive = run_command(dew::test::dew_single_threaded("chat '" + tiny_gguf().string() + "' --max-new-tokens 3 --system 'Be brief.' < '" +
                                         (dir.path() / "input.txt").string() + "'"));
  ASSERT_EQ(interactive.status, 0) << interactive.output;
  EXPECT_NE(interactive.output.find("chatting with GGUF llama model"), std::string::npos) << interactive.output;
  // Three prompts ("> ") for two messages and the /exit.
  std::size_t prompts = 0;
  for (std::size_t at = interactive.output.find("> "); at != std::string::npos; at = interactive.output.find("> ", at + 1)) ++prompts;
  EXPECT_EQ(prompts, 3u) << interactive.output;
}

TEST(ModelCommands, ExportConvertsBetweenGgufAndHuggingFaceWithoutChangingTheModel) {
  TempDir dir;
  auto hf = dir.path() / "hf";
  auto exported = run_command(dew::test::dew_single_threaded("export '" + tiny_gguf().string() + "' '" + hf.string() + "'"));
  ASSERT_EQ(exported.status, 0) << exported.output;
  for (const char* file : {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(hf / file)) << file;
  }
  auto config = nlohmann::json::parse(dew::test::read_text(hf / "config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_NE(dew::test::read_text(hf / "tokenizer_config.json").find("chat_template"), std::string::npos);

  auto expected = tiny_reference()["continuation"].get<std::vector<int>>();
  const int n = static_cast<int>(expected.size());
  EXPECT_EQ(greedy_tokens(hf, n), expected);  // the HF directory computes the same model

  auto gguf = dir.path() / "back.gguf";
  auto back = run_command(dew::test::dew_single_threaded("export '" + hf.string() + "' '" + gguf.string() + "' --format gguf --type f32"));
  ASSERT_EQ(back.status, 0) << back.output;
  EXPECT_EQ(greedy_tokens(gguf, n), expected);

  auto again = run_command(dew::test::dew_single_threaded("export '" + tiny_gguf().string() + "' '" + hf.string() + "'"));
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  auto bad_format = run_command(dew::test::dew_single_threaded("export '" + tiny_gguf().string() + "' '" + (dir.path() / "x").string() + "' --format onnx"));
  EXPECT_EQ(bad_format.status, 1);
  EXPECT_NE(bad_format.output.find("use hf, gguf or peft"), std::string::npos) << bad_format.output;
  auto bad_type = run_command(dew::test::dew_single_threaded("export '" + tiny_gguf().string() + "' '" + (dir.path() / "x.gguf").string() +
                                      "' --format gguf --type q4_0"));
  EXPECT_EQ(bad_type.status, 1);
  EXPECT_NE(bad_type.output.find("use f32, f16 or q8_0"), std::string::npos) << bad_type.output;
  EXPECT_FALSE(fs::exists(dir.path() / "x.gguf"));
}

TEST(ModelCommands, TrainInitFromFineTunesAPublishedModelWithItsTokenizer) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "The capital of France is Paris, 2024. ";
  dew::test::write_text(dir.path() / "corpus.txt", text);
  auto tokens = dir.path() / "tokens";
  auto tokenized = run_command(dew::test::dew_single_threaded("tokenize --input '" + (dir.path() / "corpus.txt").string() + "' --out '" +
                                       tokens.string() + "' --tokenizer '" + tiny_gguf().string() + "' --val-fraction 0.2"));
  ASSERT_EQ(tokenized.status, 0) << tokenized.output;

  auto run = dir.path() / "run";
  const std::string settings = " --set data.seq_len=16 --set trainer.batch_size=2 --set trainer.steps=2 --set trainer.log_every=1"
                               " --set trainer.peak_flops=1e9 --set trainer.device=cpu --set trainer.eval_batches=2"
                               " --set optim.learning_rate=0 --set optim.weight_decay=0";
  auto trained = run_command(dew::test::dew_single_threaded("train lm --data '" + tokens.string() + "' --out '" + run.string() + "' --init-from '" +
                                     tiny_gguf().string() + "'" + settings));
  ASSERT_EQ(trained.status, 0) << trained.output;
  auto stored = nlohmann::json::parse(dew::test::read_text(run / "run.json"));
  EXPECT_EQ(stored["config"]["init"]["model_type"], "llama");
  EXPECT_TRUE(fs::exists(run / "tokenizer" / "tokenizer_config.json"));
  // With a learning rate of 0 the run's checkpoint is the published model itself: its greedy tokens are
  // transformers' (so the weights were taken from the GGUF, not initialised).
  auto expected = tiny_reference()["continuation"].get<std::vector<int>>();
  EXPECT_EQ(greedy_tokens(run, static_cast<int>(expected.size())), expected);

  auto chat = run_command(dew::test::dew_single_threaded("chat '" + run.string() + "' --prompt 'hello' --max-new-tokens 3"));
  EXPECT_EQ(chat.status, 0) << chat.output;  // the run kept the checkpoint's chat template
  auto exported = run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "hf").string() + "'"));
  EXPECT_EQ(exported.status, 0) << exported.output;
  EXPECT_EQ(nlohmann::json::parse(dew::test::read_text(dir.path() / "hf" / "config.json"))["model_type"], "llama");

  // Data written with another tokenizer is refused before anything is written.
  auto bytes = dir.path() / "bytes";
  ASSERT_EQ(run_command(dew::test::dew_single_threaded("tokenize --input '" + (dir.path() / "corpus.txt").string() + "' --out '" + bytes.string() +
                                "' --val-fraction 0.2")).status, 0);
  auto refused = run_command(dew::test::dew_single_threaded("train lm --data '" + bytes.string() + "' --out '" + (dir.path() / "run2").string() +
                                     "' --init-from '" + tiny_gguf().string() + "'" + settings));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("tokenize the text with the model's tokenizer"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "run2"));
}

TEST(ModelCommands, ModelPathsThatAreNoModelAreNamed) {
  TempDir dir;
  auto missing = run_command(dew::test::dew_single_threaded("generate '" + (dir.path() / "nope").string() + "' --prompt hi"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  auto empty = run_command(dew::test::dew_single_threaded("generate '" + dir.path().string() + "' --prompt hi"));
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.output.find("holds neither run.json"), std::string::npos) << empty.output;
  dew::test::write_text(dir.path() / "notes.txt", "x");
  auto file = run_command(dew::test::dew_single_threaded("chat '" + (dir.path() / "notes.txt").string() + "' --prompt hi"));
  EXPECT_EQ(file.status, 1);
  EXPECT_NE(file.output.find("not a .gguf file"), std::string::npos) << file.output;
  auto live = run_command(dew::test::dew_single_threaded("generate '" + tiny_gguf().string() + "' --prompt hi --live"));
  EXPECT_EQ(live.status, 1);
  EXPECT_NE(live.output.find("apply to run directories"), std::string::npos) << live.output;
}
