// `dew train mdlm` (runs/kinds/mdlm_kind.h): the mask token chosen and checked against the data, rows of
// exactly seq_len ids (windows and packed), exact resume with the corruption stream, `dew eval`'s ELBO and
// its perplexity bound, and `dew generate` through the Unmask sampler.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/nn/decoder_flops.h"
#include "dew/runs/kinds/mdlm_kind.h"
#include "dew/runs/run_directory.h"
#include "dew/training/checkpoint.h"
#include "run_test_support.h"

namespace fs = std::filesystem;
using dew::test::error_of;
using dew::test::open_decoder_run;
using dew::test::TempDir;

namespace {

dew::runs::MDLMRunConfig tiny_mdlm_run(const fs::path& data, std::int64_t steps) {
  const auto lm = dew::test::tiny_lm_run_config(data, steps);
  dew::runs::MDLMRunConfig c;
  static_cast<dew::runs::DecoderSections&>(c) = lm;
  c.data = lm.data;
  c.data.prefetch = 2;
  c.trainer.log_every = 2;
  c.trainer.eval_every = 4;
  c.optim.schedule = "constant";
  return c;
}

std::unique_ptr<dew::runs::DecoderRun> start(const fs::path& dir, dew::runs::MDLMRunConfig config) {
  return dew::runs::DecoderRun::start(dir, std::make_unique<dew::runs::MDLMTask>(std::move(config)));
}

}  // namespace

TEST(MDLMRunKind, TakesTheIdAfterTheDataAsMaskAndResumesExactly) {
  dew::test::SingleThreaded threads;
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path(), 3000, 400);
  auto straight = start(runs.path() / "straight", tiny_mdlm_run(data.path(), 8));
  auto result = straight->train(nullptr);
  EXPECT_EQ(result.step, 8);
  ASSERT_TRUE(result.validation.count("nelbo"));
  ASSERT_TRUE(result.validation.count("perplexity_bound"));
  EXPECT_NEAR(result.validation.at("perplexity_bound"), std::exp(result.validation.at("nelbo")), 1e-6 * result.validation.at("perplexity_bound"));

  const auto file = dew::runs::read_run_file(runs.path() / "straight");
  EXPECT_EQ(file.kind, "mdlm");
  EXPECT_EQ(file.config["model"]["vocab_size"], 65);  // the data's 64 ids and the mask
  EXPECT_EQ(file.config["model"]["mask_token_id"], 64);
  EXPECT_EQ(file.config["model"]["causal"], false);
  EXPECT_EQ(file.config["mdlm"]["mask_id"], 64);

  start(runs.path() / "stopped", tiny_mdlm_run(data.path(), 4))->train(nullptr);
  auto resumed_config = tiny_mdlm_run(data.path(), 8);
  auto resumed = start(runs.path() / "stopped", resumed_config);
  EXPECT_TRUE(resumed->resumed());
  EXPECT_EQ(resumed->train(nullptr).step, 8);
  dew::training::Checkpoint a(runs.path() / "straight" / "8"), b(runs.path() / "stopped" / "8");
  for (const auto& name : a.params().names()) {
    EXPECT_TRUE(at::equal(a.params().whole(name), b.params().whole(name))) << name;
  }

  // `dew eval` draws the same corruption as the trainer's evaluation: the same ELBO.
  auto stats = open_decoder_run(runs.path() / "straight")->evaluate({});
  EXPECT_NEAR(stats.mean("nelbo"), result.validation.at("nelbo"), 1e-6);
}

TEST(MDLMRunKind, RefusesAMaskIdTheDataUsesAndTrainsOnPackedRows) {
  dew::test::SingleThreaded threads;
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path(), 3000, 400);
  auto config = tiny_mdlm_run(data.path(), 2);
  config.mdlm.mask_id = 5;
  auto message = error_of([&] { start(runs.path() / "a", config); });
  EXPECT_NE(message.find("the mask id 5 occurs in the train split"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(runs.path() / "a"));
  config.mdlm.mask_id = -1;
  config.model.vocab_size = 64;  // no room for the mask after the data's ids
  message = error_of([&] { start(runs.path() / "a", config); });
  EXPECT_NE(message.find("outside the model's vocabulary of 64"), std::string::npos) << message;

  // Packed documents: rows of exactly seq_len ids with segment ids; the padded tail is neither masked nor counted.
  TempDir packed;
  std::vector<dew::data::TokenId> ids;
  for (int i = 0; i < 600; ++i) ids.push_back(i % 13 == 12 ? 63 : static_cast<dew::data::TokenId>((i * 7) % 60));
  dew::test::write_token_dir(packed.path(), ids, std::vector<dew::data::TokenId>(ids.begin(), ids.begin() + 100), 64, 63, true);
  auto packed_config = tiny_mdlm_run(packed.path(), 2);
  packed_config.data.pack = true;
  auto run = start(runs.path() / "packed", packed_config);
  auto batches = run->batches(dew::data::Split::train);
  auto batch = batches->next_batch(4);
  EXPECT_EQ(batch.get("text").size(1), 16);
  EXPECT_TRUE(batch.has("text_segment_ids"));
  EXPECT_EQ(run->train(nullptr).step, 2);
}

TEST(MDLMRunKind, CommandsTrainEvaluateAndGenerate) {
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path(), 3000, 400);
  const auto run = runs.path() / "run";
  auto trained = dew::test::run_command(dew::test::dew_single_threaded(
      "train mdlm --data '" + data.path().string() + "' --out '" + run.string() + "'" + dew::test::kTinyModelFlags +
      " --set trainer.steps=4"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("nelbo"), std::string::npos) << trained.output;
  auto eval = dew::test::run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_NE(eval.output.find("perplexity_bound"), std::string::npos) << eval.output;
  auto generated = dew::test::run_command(dew::test::dew_single_threaded(
      "generate '" + run.string() + "' --prompt '!#' --max-new-tokens 6 --steps 4 --n 2 --json"));
  ASSERT_EQ(generated.status, 0) << generated.output;
  EXPECT_NE(generated.output.find("\"refinements\":4"), std::string::npos) << generated.output;
  // --steps is bounded (it was accepted at 1e9: a model evaluation each), and --max-new-tokens 0 gives the
  // prompt back with no refinement, as docs/masked_diffusion.md says (it was refused).
  auto endless = dew::test::run_command(dew::test::dew_single_threaded(
      "generate '" + run.string() + "' --prompt '!#' --max-new-tokens 6 --steps 1000000000"));
  EXPECT_EQ(endless.status, 1) << endless.output;
  EXPECT_NE(endless.output.find("--steps is 1000000000; use at most 4096"), std::string::npos) << endless.output;
  auto nothing = dew::test::run_command(dew::test::dew_single_threaded(
      "generate '" + run.string() + "' --prompt '!#' --max-new-tokens 0 --json"));
  ASSERT_EQ(nothing.status, 0) << nothing.output;
  const auto none = nlohmann::json::parse(nothing.output.substr(nothing.output.find('{')));
  EXPECT_EQ(none["prompt"], "!#");
  EXPECT_EQ(none["text"], "");
  EXPECT_TRUE(none["tokens"].empty()) << nothing.output;
  EXPECT_EQ(none["refinements"], 0);
  auto plain = dew::test::run_command(dew::test::dew_single_threaded("generate '" + run.string() + "' --prompt '!#' --max-new-tokens 0"));
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(plain.output, "!#\n");
  auto refused = dew::test::run_command(dew::test::dew_single_threaded("generate '" + run.string() + "' --prompt '!#' --top-k 3"));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("--top-k is 3"), std::string::npos) << refused.output;
  auto lm = dew::test::run_command(dew::test::dew_single_threaded(
      "train lm --data '" + data.path().string() + "' --out '" + (runs.path() / "lm").string() + "' --init-from '" +
      run.string() + "' --set trainer.steps=1"));
  EXPECT_EQ(lm.status, 1);
  EXPECT_NE(lm.output.find("dew train mdlm"), std::string::npos) << lm.output;
  // Every autoregressive kind refuses a masked model, before reading its data.
  auto sft = dew::test::run_command(dew::test::dew_single_threaded(
      "train sft --data '" + (runs.path() / "chat.jsonl").string() + "' --out '" + (runs.path() / "sft").string() +
      "' --init-from '" + run.string() + "'"));
  EXPECT_EQ(sft.status, 1);
  EXPECT_NE(sft.output.find("`dew train sft` trains an autoregressive decoder"), std::string::npos) << sft.output;
}

// From an autoregressive model to a masked one and back out as LLaDA: the tiny Llama GGUF made bidirectional
// with a mask id its data never uses, trained with LoRA adapters, accumulation and bf16 compute together;
// exported (as llada, by its shape), generated from and fine-tuned again from the export.
TEST(MDLMRunKind, FromAnAutoregressiveModelWithLoraAccumulationAndBf16ThenExportAsLlada) {
  TempDir dir;
  const auto gguf = dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf";
  std::string text;
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "then", "ran", "home"};
  for (int i = 0; i < 600; ++i) text += std::string(words[(i * 7) % 10]) + ((i % 12 == 11) ? "\n" : " ");
  dew::test::write_text(dir.path() / "text.txt", text);
  auto q = [](const fs::path& p) { return "'" + p.string() + "'"; };
  auto tokenized = dew::test::run_command(dew::test::dew_single_threaded(
      "tokenize --input " + q(dir.path() / "text.txt") + " --tokenizer " + q(gguf) + " --out " + q(dir.path() / "tokens") +
      " --val-fraction 0.1"));
  ASSERT_EQ(tokenized.status, 0) << tokenized.output;
  const std::string small = " --set trainer.batch_size=4 --set data.seq_len=32 --set trainer.log_every=2 --set trainer.peak_flops=1e9";
  auto refused = dew::test::run_command(dew::test::dew_single_threaded(
      "train mdlm --data " + q(dir.path() / "tokens") + " --out " + q(dir.path() / "a") + " --init-from " + q(gguf) + small));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("mdlm.mask_id"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "a"));

  auto trained = dew::test::run_command(dew::test::dew_single_threaded(
      "train mdlm --data " + q(dir.path() / "tokens") + " --out " + q(dir.path() / "run") + " --init-from " + q(gguf) +
      small + " --set mdlm.mask_id=0 --set lora.rank=4 --set lora.alpha=8 --set trainer.grad_accum=2"
      " --set model.dtype=bfloat16 --set trainer.steps=4 --set trainer.eval_every=4"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  const auto file = dew::runs::read_run_file(dir.path() / "run");
  EXPECT_EQ(file.config["model"]["mask_token_id"], 0);
  EXPECT_EQ(file.config["model"]["causal"], false);
  EXPECT_EQ(file.config["model"]["dtype"], "bfloat16");
  EXPECT_NE(trained.output.find("val/nelbo"), std::string::npos) << trained.output;

  auto exported = dew::test::run_command(dew::test::dew_single_threaded("export " + q(dir.path() / "run") + " " + q(dir.path() / "hf")));
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto config = dew::config::parse_json_file(dir.path() / "hf" / "config.json");
  EXPECT_EQ(config["model_type"], "llada");
  EXPECT_EQ(config["mask_token_id"], 0);
  auto generated = dew::test::run_command(dew::test::dew_single_threaded(
      "generate " + q(dir.path() / "hf") + " --prompt 'the cat' --max-new-tokens 6 --steps 3 --json"));
  ASSERT_EQ(generated.status, 0) << generated.output;
  EXPECT_NE(generated.output.find("\"refinements\":3"), std::string::npos) << generated.output;
  // `dew chat` goes through the same decoding path (the checkpoint's chat template, then the Unmask sampler).
  auto chat = dew::test::run_command(dew::test::dew_single_threaded(
      "chat " + q(dir.path() / "hf") + " --prompt 'hello' --max-new-tokens 4 --steps 2"));
  ASSERT_EQ(chat.status, 0) << chat.output;
  auto chat_refused = dew::test::run_command(dew::test::dew_single_threaded(
      "chat " + q(dir.path() / "hf") + " --prompt 'hello' --top-p 0.5"));
  EXPECT_EQ(chat_refused.status, 1);
  EXPECT_NE(chat_refused.output.find("--top-p is 0.5"), std::string::npos) << chat_refused.output;
  auto again = dew::test::run_command(dew::test::dew_single_threaded(
      "train mdlm --data " + q(dir.path() / "tokens") + " --out " + q(dir.path() / "again") + " --init-from " +
      q(dir.path() / "hf") + small + " --set trainer.steps=2 --set trainer.eval_every=0"));
  ASSERT_EQ(again.status, 0) << again.output;
}

// MFU counts what the step computes: the head only for the masked positions, half of them on average under
// the log-linear schedule (times uniform on [1e-3, 1], masked fraction (1 - 1e-3) t).
TEST(MDLMRunKind, FlopsPerTokenCountTheHeadForMaskedPositionsOnly) {
  dew::runs::MDLMRunConfig c;
  c.model = dew::test::tiny_decoder_config();
  c.model.vocab_size = 1000;
  c.data.seq_len = 16;
  const dew::runs::MDLMTask task(c);
  const double full = dew::nn::decoder_flops_per_token(c.model, 16), head = 6.0 * 32 * 1000;
  const double masked = (1 - 1e-3) * (1 + 1e-3) / 2;  // mean of (1 - eps) t over t uniform on [1e-3, 1]
  EXPECT_NEAR(task.flops_per_token(), full - head * (1 - masked), 1e-6 * full);
}
