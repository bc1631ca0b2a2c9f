// `dew generate` and `dew chat` on a checkpoint whose generation_config.json recommends sampling, and on a
// Hub-style name found in a local Hugging Face cache, through the binary. The checkpoint is the tiny llama
// GGUF fixture (tests/fixtures/smollm2/tiny, with transformers' greedy continuation) exported once to a
// Hugging Face directory; each test copies it and writes its own generation_config.json.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "hub_cache_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

nlohmann::json tiny_reference() {
  return nlohmann::json::parse(dew::test::read_text(dew::test::fixtures() / "smollm2" / "tiny" / "llama.json"));
}
std::vector<int> greedy_reference() { return tiny_reference()["continuation"].get<std::vector<int>>(); }

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class SamplingDefaultsCommands : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    exported_ = std::make_unique<TempDir>();
    auto result = run_command(dew::test::dew_single_threaded(
        "export '" + (dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf").string() + "' '" + hf().string() + "'"));
    ASSERT_EQ(result.status, 0) << result.output;
  }
  static void TearDownTestSuite() { exported_.reset(); }
  static fs::path hf() { return exported_->path() / "hf"; }

  // A copy of the exported checkpoint with `generation_config` as its generation_config.json.
  fs::path checkpoint_with(const std::string& generation_config) {
    const fs::path dir = scratch_.path() / ("m" + std::to_string(copies_++));
    fs::copy(hf(), dir);
    dew::test::write_text(dir / "generation_config.json", generation_config);
    return dir;
  }

  // `dew generate MODEL` on the reference prompt, --json, EOS kept unless no_eos.
  dew::test::CommandResult generate(const std::string& model, const std::string& flags, const std::string& env = "") {
    return run_command(env + dew::test::dew_single_threaded("generate " + quoted(model) + " --prompt " +
                                                            quoted(tiny_reference()["text"]) + " --json " + flags));
  }
  std::vector<int> tokens(const dew::test::CommandResult& result) {
    EXPECT_EQ(result.status, 0) << result.output;
    if (result.status != 0) return {};
    return nlohmann::json::parse(result.output)["tokens"].get<std::vector<int>>();
  }

  TempDir scratch_;
  int copies_ = 0;
  static std::unique_ptr<TempDir> exported_;
};
std::unique_ptr<TempDir> SamplingDefaultsCommands::exported_;

}  // namespace

TEST_F(SamplingDefaultsCommands, PrintSamplingShowsEachSettingAndWhereItCameFrom) {
  const fs::path dir = checkpoint_with(R"({"do_sample": true, "temperature": 0.7, "top_k": 20, "eos_token_id": [2, 7],
                                           "max_length": 48})");
  const std::string file = (dir / "generation_config.json").string();
  auto printed = run_command(dew::test::dew_single_threaded("generate " + quoted(dir.string()) + " --print-sampling --top-p 0.9"));
  ASSERT_EQ(printed.status, 0) << printed.output;
  EXPECT_EQ(printed.output, "sampling for hf '" + dir.string() + "':\n"
                            "  temperature         0.7          " + file + "\n"
                            "  top_k               20           " + file + "\n"
                            "  top_p               0.9          flag --top-p\n"
                            "  min_p               0            built-in default\n"
                            "  repetition_penalty  1            built-in default\n"
                            "  max_new_tokens      64           built-in default\n"
                            "  max_length          48           " + file + " (bounds prompt + continuation)\n"
                            "  eos_ids             2 7          the tokenizer's end-of-text token and " + file + " eos_token_id\n"
                            "  seed                0            built-in default\n");

  auto greedy = run_command(dew::test::dew_single_threaded("chat " + quoted(dir.string()) + " --print-sampling --greedy"));
  ASSERT_EQ(greedy.status, 0) << greedy.output;
  EXPECT_NE(greedy.output.find("  temperature         0            flag --greedy\n"), std::string::npos) << greedy.output;
  EXPECT_NE(greedy.output.find("  max_new_tokens      256          built-in default\n"), std::string::npos) << greedy.output;

  auto conflict = run_command(dew::test::dew_single_threaded("generate " + quoted(dir.string()) +
                                                             " --print-sampling --greedy --temperature 0.5"));
  EXPECT_EQ(conflict.status, 1);
  EXPECT_NE(conflict.output.find("--greedy and --temperature 0.5 disagree"), std::string::npos) << conflict.output;
}

TEST_F(SamplingDefaultsCommands, CheckpointDefaultsApplyFlagsOverrideThemAndGreedyForcesGreedy) {
  const auto expected = greedy_reference();
  const std::string n = " --max-new-tokens " + std::to_string(expected.size()) + " --no-eos";
  const fs::path sampling = checkpoint_with(R"({"do_sample": true, "temperature": 3.0, "top_k": 40, "top_p": 0.95})");

  // The file's settings are what the same flags on the plain export give.
  const auto from_file = tokens(generate(sampling.string(), n));
  const auto from_flags = tokens(generate(hf().string(), n + " --temperature 3 --top-k 40 --top-p 0.95"));
  EXPECT_EQ(from_file, from_flags);
  EXPECT_NE(from_file, expected) << "temperature 3 drew the greedy tokens; the defaults were not applied";
  // The plain export's generation_config.json (token ids only) keeps generate greedy.
  EXPECT_EQ(tokens(generate(hf().string(), n)), expected);
  // A flag wins over the file; --greedy forces greedy.
  EXPECT_EQ(tokens(generate(sampling.string(), n + " --temperature 0")), expected);
  EXPECT_EQ(tokens(generate(sampling.string(), n + " --greedy")), expected);
  // do_sample false is greedy whatever the temperature.
  EXPECT_EQ(tokens(generate(checkpoint_with(R"({"do_sample": false, "temperature": 3.0})").string(), n)), expected);
}

TEST_F(SamplingDefaultsCommands, AnEosListStopsGenerationAndMaxNewTokensIsTheBudget) {
  const auto expected = greedy_reference();
  ASSERT_GE(expected.size(), 3u);
  // The first greedy token listed as an end-of-turn id: generation stops right after it.
  const fs::path dir = checkpoint_with(R"({"eos_token_id": [2, )" + std::to_string(expected[0]) + R"(], "max_new_tokens": 3})");
  auto stopped = generate(dir.string(), "");
  const auto got = tokens(stopped);
  EXPECT_EQ(got, (std::vector<int>{expected[0]}));
  EXPECT_TRUE(nlohmann::json::parse(stopped.output)["stopped_at_eos"].get<bool>());
  // Without it, max_new_tokens 3 from the file is the budget.
  auto budget = generate(checkpoint_with(R"({"max_new_tokens": 3})").string(), "--no-eos");
  EXPECT_EQ(tokens(budget), (std::vector<int>{expected[0], expected[1], expected[2]}));
}

TEST_F(SamplingDefaultsCommands, AMalformedGenerationConfigIsRefusedNamingFileFieldAndValue) {
  const fs::path dir = checkpoint_with(R"({"do_sample": true, "temperature": "hot"})");
  auto refused = generate(dir.string(), "");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find((dir / "generation_config.json").string() + ": field 'temperature' is \"hot\" and must be a number"),
            std::string::npos)
      << refused.output;
}

TEST_F(SamplingDefaultsCommands, GenerateOnAHubNameFromALocalCache) {
  TempDir cache;
  const std::string commit = "89abcdef0123456789abcdef0123456789abcdef";
  dew::test::add_hub_snapshot(cache.path(), "tiny-org/tiny-llama", hf(), commit, {"main"});
  const std::string env = "HF_HUB_CACHE=" + quoted(cache.path().string()) + " HF_HOME=/nonexistent ";
  const auto expected = greedy_reference();
  const std::string n = " --max-new-tokens " + std::to_string(expected.size()) + " --no-eos";
  EXPECT_EQ(tokens(generate("tiny-org/tiny-llama", n, env)), expected);
  EXPECT_EQ(tokens(generate("tiny-org/tiny-llama@89abcdef", n, env)), expected);

  auto missing = generate("tiny-org/other-model", n, env);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("looked up offline in the local Hub cache " + cache.path().string()), std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("dew downloads nothing"), std::string::npos) << missing.output;
}
