// The post-training run kinds end to end, on the tiny Llama GGUF fixture (its tokenizer has a ChatML
// template): `dew train sft` on chat JSONL (with and without LoRA), `dew train dpo` on preference pairs,
// and what users do with the runs afterwards (eval, generate, chat, export hf / peft). Resume is checked
// bit for bit through the run layer.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "dew/formats/safetensors.h"
#include "dew/runs/kinds/dpo_kind.h"
#include "dew/runs/kinds/sft_kind.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/training/checkpoint.h"
#include "run_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::error_of;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

// Short arithmetic conversations: a user question and a one-line assistant answer.
void write_chat(const fs::path& file, int conversations) {
  std::ofstream out(file);
  for (int i = 0; i < conversations; ++i) {
    const int a = i % 7, b = (i * 3) % 5;
    out << R"({"messages": [{"role": "user", "content": "What is )" << a << " plus " << b
        << R"(?"}, {"role": "assistant", "content": "It is )" << a + b << R"(."}]})" << "\n";
  }
}

void write_pairs(const fs::path& file, int pairs) {
  std::ofstream out(file);
  for (int i = 0; i < pairs; ++i) {
    const int a = i % 6, b = (i * 5) % 4;
    out << R"({"prompt": [{"role": "user", "content": "Add )" << a << " and " << b << R"("}], )"
        << R"("chosen": [{"role": "assistant", "content": ")" << a + b << R"("}], )"
        << R"("rejected": [{"role": "assistant", "content": "I do not know"}]})" << "\n";
  }
}

template <class Config>
void tiny_settings(Config& c, const fs::path& data, std::int64_t steps) {
  c.init.from = tiny_gguf().string();
  c.data.path = data.string();
  c.data.seq_len = 48;
  c.trainer.steps = steps;
  c.trainer.batch_size = 4;
  c.trainer.log_every = 1;
  c.trainer.eval_every = 0;
  c.trainer.checkpoint_every = 4;
  c.trainer.keep_checkpoints = 0;
  c.trainer.peak_flops = 1e9;
  c.trainer.device = "cpu";
  c.optim.schedule = "constant";
}

std::vector<dew::telemetry::ScalarRecord> scalars(const fs::path& run) {
  return dew::telemetry::read_scalars(run / "tracking" / "scalars.jsonl");
}

void expect_same_params(const fs::path& a, const fs::path& b) {
  dew::training::Checkpoint ca(a), cb(b);
  ASSERT_EQ(ca.params().names(), cb.params().names());
  for (const auto& name : ca.params().names()) EXPECT_TRUE(at::equal(ca.params().whole(name), cb.params().whole(name))) << name;
}

}  // namespace

// SFT trains on assistant tokens only: the scored targets are the answers' tokens (and their end of turn),
// the loss falls, and the run chats, generates, evaluates and exports like any run.
TEST(PostTrainingRuns, SftOnChatJsonlLearnsTheAnswersAndServesLikeAnyRun) {
  TempDir dir;
  write_chat(dir.path() / "chat.jsonl", 60);
  const auto run = dir.path() / "sft";
  const std::string settings = " --set data.seq_len=48 --set trainer.batch_size=4 --set trainer.steps=24 --set trainer.log_every=4"
                               " --set trainer.eval_every=12 --set trainer.peak_flops=1e9 --set trainer.device=cpu"
                               " --set optim.learning_rate=3e-3 --set data.val_fraction=0.1";
  auto trained = run_command(dew::test::dew_single_threaded("train sft --data '" + (dir.path() / "chat.jsonl").string() + "' --out '" +
                                                            run.string() + "' --init-from '" + tiny_gguf().string() + "'" + settings));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("new run"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find("tokenized 60 conversations"), std::string::npos) << trained.output;
  EXPECT_TRUE(fs::exists(run / "data" / "train.roles"));
  EXPECT_EQ(nlohmann::json::parse(dew::test::read_text(run / "run.json"))["kind"], "sft");

  auto records = scalars(run);
  ASSERT_GE(records.size(), 2u);
  const double first = records.front().scalars.at("loss"), last = records.back().scalars.at("loss");
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;  // the answers are learnable: "It is N."
  // Tokens per step are the assistant targets only: 4 conversations of "It is N." + end of turn are far
  // fewer than their whole rows.
  EXPECT_LT(records.front().scalars.at("tokens_per_second") * records.front().scalars.at("step_seconds"), 4 * 20.0);

  auto eval = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto stats = nlohmann::json::parse(eval.output);
  EXPECT_GT(stats["tokens"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(stats["ce"].get<double>()));
  auto chat = run_command(dew::test::dew_single_threaded("chat '" + run.string() + "' --prompt 'What is 3 plus 1?' --max-new-tokens 6"));
  EXPECT_EQ(chat.status, 0) << chat.output;
  EXPECT_NE(chat.output.find("It is"), std::string::npos) << chat.output;  // it answers as trained
  auto exported = run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "hf").string() + "'"));
  EXPECT_EQ(exported.status, 0) << exported.output;
  auto peft = run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "peft").string() + "' --format peft"));
  EXPECT_EQ(peft.status, 1);
  EXPECT_NE(peft.output.find("lora.rank = 0"), std::string::npos) << peft.output;
}

// With LoRA only the adapters train and are checkpointed; generation and `export --format hf` apply them
// (merged), `--format peft` writes them alone.
TEST(PostTrainingRuns, SftWithLoraCheckpointsOnlyAdaptersAndExportsThem) {
  TempDir dir;
  write_chat(dir.path() / "chat.jsonl", 40);
  const auto run = dir.path() / "lora";
  const std::string settings = " --set data.seq_len=48 --set trainer.batch_size=4 --set trainer.steps=8 --set trainer.log_every=4"
                               " --set trainer.peak_flops=1e9 --set trainer.device=cpu --set optim.learning_rate=1e-2"
                               " --set lora.rank=4 --set lora.alpha=8 --set lora.modules=q_proj,v_proj,down_proj";
  auto trained = run_command(dew::test::dew_single_threaded("train sft --data '" + (dir.path() / "chat.jsonl").string() + "' --out '" +
                                                            run.string() + "' --init-from '" + tiny_gguf().string() + "'" + settings));
  ASSERT_EQ(trained.status, 0) << trained.output;
  dew::training::Checkpoint checkpoint(run / "8");
  const auto names = checkpoint.params().names();
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) EXPECT_NE(name.find(".lora_"), std::string::npos) << name;
  EXPECT_EQ(names.size(), 2u * 3u * 2u);  // A and B, three modules, two layers

  // The merged export generates what the run generates.
  ASSERT_EQ(run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "hf").string() + "'")).status, 0);
  const std::string generate = " --prompt 'What is 2 plus 2?' --max-new-tokens 8 --json";
  auto from_run = run_command(dew::test::dew_single_threaded("generate '" + run.string() + "'" + generate));
  auto from_export = run_command(dew::test::dew_single_threaded("generate '" + (dir.path() / "hf").string() + "'" + generate));
  ASSERT_EQ(from_run.status, 0) << from_run.output;
  ASSERT_EQ(from_export.status, 0) << from_export.output;
  EXPECT_EQ(nlohmann::json::parse(from_run.output)["tokens"], nlohmann::json::parse(from_export.output)["tokens"]);

  auto peft = run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "peft").string() + "' --format peft"));
  ASSERT_EQ(peft.status, 0) << peft.output;
  auto config = nlohmann::json::parse(dew::test::read_text(dir.path() / "peft" / "adapter_config.json"));
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["base_model_name_or_path"], fs::absolute(tiny_gguf()).lexically_normal().string());
  dew::formats::SafetensorsFile adapter(dir.path() / "peft" / "adapter_model.safetensors");
  const auto& exported_weights = checkpoint.has_ema() ? checkpoint.ema() : checkpoint.params();  // EMA unless --live
  EXPECT_TRUE(at::equal(adapter.view("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"),
                        exported_weights.whole("model.layers.0.self_attn.q_proj.lora_B.weight")));
}

// Stopping and resuming gives the parameters of an uninterrupted run, for SFT with LoRA and for DPO.
TEST(PostTrainingRuns, SftWithLoraAndDpoResumeBitExact) {
  dew::test::SingleThreaded threads;
  TempDir dir;
  write_chat(dir.path() / "chat.jsonl", 30);
  write_pairs(dir.path() / "pairs.jsonl", 30);
  dew::runs::SFTRunConfig sft;
  tiny_settings(sft, dir.path() / "chat.jsonl", 8);
  sft.lora.rank = 4;
  sft.lora.dropout = 0.1;  // the dropout stream must resume too
  sft.optim.learning_rate = 1e-2;
  dew::runs::DpoRunConfig dpo;
  tiny_settings(dpo, dir.path() / "pairs.jsonl", 8);
  dpo.optim.learning_rate = 1e-3;

  auto check = [&](auto config, auto start) {
    const fs::path straight = dir.path() / "straight", stopped = dir.path() / "stopped";
    fs::remove_all(straight);
    fs::remove_all(stopped);
    start(straight, config)->train(nullptr);
    auto half = config;
    half.trainer.steps = 4;
    start(stopped, half)->train(nullptr);
    // As `dew train` resumes: run.json's config (the architecture adopted from init.from), more steps.
    auto resumed = config;
    dew::config::from_json(dew::runs::read_run_file(stopped).config, resumed, "run.json");
    resumed.trainer.steps = 8;
    start(stopped, resumed)->train(nullptr);
    expect_same_params(straight / "8", stopped / "8");
  };
  check(sft, [](const fs::path& d, const dew::runs::SFTRunConfig& c) {
    return dew::runs::DecoderRun::start(d, std::make_unique<dew::runs::SFTTask>(c));
  });
  check(dpo, [](const fs::path& d, const dew::runs::DpoRunConfig& c) {
    return dew::runs::DecoderRun::start(d, std::make_unique<dew::runs::DpoTask>(c));
  });
}

// DPO from the reference itself: the first step's loss is exactly log 2 (policy == reference), and
// training on consistent preferences separates the rewards.
TEST(PostTrainingRuns, DpoStartsAtLogTwoAndLearnsThePreference) {
  TempDir dir;
  write_pairs(dir.path() / "pairs.jsonl", 40);
  const auto run = dir.path() / "dpo";
  const std::string settings = " --set data.seq_len=48 --set trainer.batch_size=4 --set trainer.steps=16 --set trainer.log_every=1"
                               " --set trainer.eval_every=8 --set trainer.peak_flops=1e9 --set trainer.device=cpu"
                               " --set optim.learning_rate=1e-3 --set dpo.beta=0.1";
  auto trained = run_command(dew::test::dew_single_threaded("train dpo --data '" + (dir.path() / "pairs.jsonl").string() + "' --out '" +
                                                            run.string() + "' --init-from '" + tiny_gguf().string() + "'" + settings));
  ASSERT_EQ(trained.status, 0) << trained.output;
  auto records = scalars(run);
  ASSERT_EQ(records.size(), 16u);
  // Before the first update policy and reference are one model: every log-ratio is 0, the loss log 2 (the
  // two forwards run the same rows through the same weights, so they agree to the last bit).
  EXPECT_NEAR(records.front().scalars.at("loss"), std::log(2.0), 1e-6);
  EXPECT_NEAR(records.front().scalars.at("rewards/margins"), 0.0, 1e-6);
  EXPECT_GT(records.back().scalars.at("rewards/margins"), 0.5);
  EXPECT_GT(records.back().scalars.at("rewards/accuracies"), 0.9);
  EXPECT_LT(records.back().scalars.at("loss"), 0.5);
  // The rate counts what the loss averages over: pairs (4 a step), with no MFU (a pair has no fixed cost).
  EXPECT_NEAR(records.front().scalars.at("pairs_per_second") * records.front().scalars.at("step_seconds"), 4.0, 1e-6);
  EXPECT_FALSE(records.front().scalars.count("tokens_per_second"));
  EXPECT_FALSE(records.front().scalars.count("mfu"));
  auto eval = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_EQ(nlohmann::json::parse(eval.output)["pairs"], 4);  // val_fraction 0.1 of 40

  // Without --init-from there is nothing to post-train, and nothing is written.
  auto refused = run_command(dew::test::dew_single_threaded("train dpo --data '" + (dir.path() / "pairs.jsonl").string() +
                                                            "' --out '" + (dir.path() / "none").string() + "'"));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("--init-from"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "none"));
}

// A bad line is refused by file, line and field before the run directory exists.
TEST(PostTrainingRuns, BadJsonlLinesAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  dew::test::write_text(dir.path() / "chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
                                                    "{\"messages\": [{\"role\": \"bot\", \"content\": \"hi\"}]}\n");
  auto refused = run_command(dew::test::dew_single_threaded("train sft --data '" + (dir.path() / "chat.jsonl").string() + "' --out '" +
                                                            (dir.path() / "run").string() + "' --init-from '" + tiny_gguf().string() + "'"));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("chat.jsonl:2"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("messages[0].role"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "run"));
  dew::test::write_text(dir.path() / "pairs.jsonl", "{\"prompt\": \"a\", \"chosen\": \"b\"}\n");
  refused = run_command(dew::test::dew_single_threaded("train dpo --data '" + (dir.path() / "pairs.jsonl").string() + "' --out '" +
                                                       (dir.path() / "run").string() + "' --init-from '" + tiny_gguf().string() + "'"));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.output.find("pairs.jsonl:1"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("rejected"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "run"));
}

// A chat file in which no conversation has an assistant message passed the checks and failed at step 1 ("the
// batch has no loss terms"), after the run was written; it is refused when the data is read, naming the file.
TEST(PostTrainingRuns, ChatWithoutAssistantMessagesIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  dew::test::write_text(dir.path() / "chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
                                                    "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
                                                    "{\"role\": \"user\", \"content\": \"hello\"}]}\n");
  dew::runs::SFTRunConfig sft;
  tiny_settings(sft, dir.path() / "chat.jsonl", 2);
  sft.data.val_fraction = 0;
  auto message = error_of([&] { dew::runs::DecoderRun::start(dir.path() / "run", std::make_unique<dew::runs::SFTTask>(sft)); });
  EXPECT_NE(message.find("chat.jsonl': none of its 2 conversations has a message with role \"assistant\""), std::string::npos)
      << message;
  EXPECT_NE(message.find("lm.loss_role=-1"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir.path() / "run"));
  // Answers only in the conversations held out for validation leave training nothing either.
  write_chat(dir.path() / "answered.jsonl", 1);
  std::ofstream(dir.path() / "answered.jsonl", std::ios::app) << dew::test::read_text(dir.path() / "chat.jsonl");
  tiny_settings(sft, dir.path() / "answered.jsonl", 2);
  sft.data.val_fraction = 0.34;  // the first of three conversations
  message = error_of([&] { dew::runs::DecoderRun::start(dir.path() / "run", std::make_unique<dew::runs::SFTTask>(sft)); });
  EXPECT_NE(message.find("none of its 2 training conversations (after the first 1, held out"), std::string::npos) << message;
  // Training on every token needs no assistant message.
  tiny_settings(sft, dir.path() / "chat.jsonl", 1);
  sft.data.val_fraction = 0;
  sft.lm.loss_role = -1;
  sft.trainer.batch_size = 1;  // the two short conversations pack into one row
  EXPECT_EQ(error_of([&] { dew::runs::DecoderRun::start(dir.path() / "every", std::make_unique<dew::runs::SFTTask>(sft))->train(nullptr); }),
            "(no error)");
}

// A negative lora.rank ran a full fine-tune and was recorded in run.json; every lora field is checked at
// config validation, LoRA or not, by field and value.
TEST(PostTrainingRuns, InvalidLoraFieldsAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  write_chat(dir.path() / "chat.jsonl", 8);
  auto refused = [&](auto edit) {
    dew::runs::SFTRunConfig sft;
    tiny_settings(sft, dir.path() / "chat.jsonl", 1);
    edit(sft.lora);
    auto message = error_of([&] { dew::runs::DecoderRun::start(dir.path() / "run", std::make_unique<dew::runs::SFTTask>(sft)); });
    EXPECT_FALSE(fs::exists(dir.path() / "run"));
    return message;
  };
  auto message = refused([](dew::nn::LoraConfig& l) { l.rank = -1; });
  EXPECT_NE(message.find("lora.rank is -1"), std::string::npos) << message;
  message = refused([](dew::nn::LoraConfig& l) { l.alpha = -2; });
  EXPECT_NE(message.find("lora.alpha must be positive and finite, got -2"), std::string::npos) << message;
  message = refused([](dew::nn::LoraConfig& l) { l.dropout = 1.5; });
  EXPECT_NE(message.find("lora.dropout must be in [0, 1), got 1.5"), std::string::npos) << message;
  message = refused([](dew::nn::LoraConfig& l) {
    l.rank = 4;
    l.dropout = -0.1;
  });
  EXPECT_NE(message.find("lora.dropout must be in [0, 1), got -0.1"), std::string::npos) << message;
  // Through the binary, as the probe ran it.
  auto cli = run_command(dew::test::dew_single_threaded("train sft --data '" + (dir.path() / "chat.jsonl").string() + "' --out '" +
                                                        (dir.path() / "run").string() + "' --init-from '" + tiny_gguf().string() +
                                                        "' --set lora.rank=-1"));
  EXPECT_EQ(cli.status, 1) << cli.output;
  EXPECT_NE(cli.output.find("lora.rank is -1"), std::string::npos) << cli.output;
  EXPECT_FALSE(fs::exists(dir.path() / "run"));
}

// DPO with LoRA takes its reference from the policy's own base (adapters off) instead of a second copy of
// the model: at step 1 the adapters are zero, so the loss is exactly log 2 again, and training still
// separates the rewards.
TEST(PostTrainingRuns, DpoWithLoraUsesItsBaseAsTheReference) {
  TempDir dir;
  write_pairs(dir.path() / "pairs.jsonl", 40);
  dew::runs::DpoRunConfig dpo;
  tiny_settings(dpo, dir.path() / "pairs.jsonl", 12);
  dpo.lora.rank = 8;
  dpo.lora.alpha = 16;
  dpo.optim.learning_rate = 1e-2;
  dew::runs::DecoderRun::start(dir.path() / "run", std::make_unique<dew::runs::DpoTask>(dpo))->train(nullptr);
  auto records = scalars(dir.path() / "run");
  ASSERT_EQ(records.size(), 12u);
  EXPECT_NEAR(records.front().scalars.at("loss"), std::log(2.0), 1e-6);
  EXPECT_NEAR(records.front().scalars.at("rewards/margins"), 0.0, 1e-6);
  EXPECT_GT(records.back().scalars.at("rewards/margins"), 0.5);
  // Evaluation keeps the adapters apart too, so its reference is the base again.
  auto stats = dew::test::open_decoder_run(dir.path() / "run")->evaluate({});
  EXPECT_EQ(stats.values().at("loss").count, 4);
  EXPECT_GT(stats.mean("rewards/margins"), 0.0);
}

// GRPO with LoRA: the KL reference is the policy's base (adapters off), so the first step's KL is exactly
// 0; only adapters are checkpointed and the run exports them for peft.
TEST(PostTrainingRuns, GrpoWithLoraTrainsAdaptersAgainstItsBase) {
  TempDir dir;
  {
    std::ofstream out(dir.path() / "prompts.jsonl");
    for (int i = 0; i < 12; ++i) out << R"({"prompt": [{"role": "user", "content": "Count to )" << i % 5 + 2 << R"("}], "ground_truth": ")" << i % 5 + 2 << "\"}\n";
  }
  const auto run = dir.path() / "grpo";
  const std::string settings = " --set grpo.max_new_tokens=6 --set grpo.group_size=3 --set grpo.temperature=1"
                               " --set trainer.batch_size=2 --set trainer.steps=3 --set trainer.log_every=1 --set trainer.peak_flops=1e9"
                               " --set trainer.device=cpu --set optim.learning_rate=1e-2 --set lora.rank=4 --set grpo.beta=0.1";
  auto trained = run_command(dew::test::dew_single_threaded("train grpo --data '" + (dir.path() / "prompts.jsonl").string() + "' --out '" +
                                                            run.string() + "' --init-from '" + tiny_gguf().string() +
                                                            "' --reward 'regex:[0-9]'" + settings));
  ASSERT_EQ(trained.status, 0) << trained.output;
  auto records = scalars(run);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records.front().scalars.at("kl"), 0.0);  // policy == base before the first update, bit for bit
  EXPECT_TRUE(std::isfinite(records.back().scalars.at("kl")));
  // Each step samples (grpo.epochs 1) and says where that time went: phases inside the step's own time.
  for (const auto& record : records) {
    const auto& s = record.scalars;
    EXPECT_GT(s.at("time/rollout_seconds"), 0.0);
    EXPECT_GE(s.at("time/reward_seconds"), 0.0);
    EXPECT_GT(s.at("time/reference_seconds"), 0.0);  // beta 0.1: the base's log-probabilities
    EXPECT_LE(s.at("time/rollout_seconds") + s.at("time/reward_seconds") + s.at("time/reference_seconds"), s.at("step_seconds"));
  }
  dew::training::Checkpoint checkpoint(run / "3");
  for (const auto& name : checkpoint.params().names()) EXPECT_NE(name.find(".lora_"), std::string::npos) << name;
  auto eval = run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --json"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_GT(nlohmann::json::parse(eval.output)["prompts"].get<double>(), 0);
  auto peft = run_command(dew::test::dew_single_threaded("export '" + run.string() + "' '" + (dir.path() / "peft").string() + "' --format peft"));
  EXPECT_EQ(peft.status, 0) << peft.output;
  EXPECT_TRUE(fs::exists(dir.path() / "peft" / "adapter_model.safetensors"));
}
