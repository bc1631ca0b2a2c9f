// runs::ModelSource: MODEL is resolved once per command -- detected, its directory probed and a run's
// run.json read -- and every later step (the weights, the tokenizer, the run as its kind, a fine-tuning
// run's data checks, base and reference model) takes that value. Each test would fail if a step went back
// to the path: the first replaces run.json with garbage after resolving, the second counts the reads of
// init.from's run.json through a whole GRPO start and training step.
#include <gtest/gtest.h>

#include <fstream>

#include "dew/runs/kinds/grpo_kind.h"
#include "dew/runs/kinds/sft_kind.h"
#include "dew/runs/model_source.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/run_file_reads.h"
#include "dew/runs/tokenizer_source.h"
#include "dew/telemetry/local_tracker.h"
#include "run_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::error_of;
using dew::test::TempDir;

namespace {

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

template <class Config>
void tiny_settings(Config& c, const fs::path& init, const fs::path& data, std::int64_t steps) {
  c.init.from = init.string();
  c.data.path = data.string();
  c.trainer.steps = steps;
  c.trainer.batch_size = 2;
  c.trainer.log_every = 1;
  c.trainer.eval_every = 0;
  c.trainer.checkpoint_every = steps;
  c.trainer.peak_flops = 1e9;
  c.trainer.device = "cpu";
  c.optim.schedule = "constant";
}

// A one-step SFT run from the tiny GGUF: a run directory with a checkpoint and the GGUF's chat template.
fs::path sft_run(const fs::path& dir) {
  {
    std::ofstream out(dir / "chat.jsonl");
    for (int i = 0; i < 8; ++i) {
      out << R"({"messages": [{"role": "user", "content": "What is )" << i << R"( plus one?"}, )"
          << R"({"role": "assistant", "content": "It is )" << i + 1 << R"(."}]})" << "\n";
    }
  }
  dew::runs::SFTRunConfig sft;
  tiny_settings(sft, tiny_gguf(), dir / "chat.jsonl", 1);
  sft.data.seq_len = 48;
  const fs::path run = dir / "sft";
  dew::runs::DecoderRun::start(run, std::make_unique<dew::runs::SFTTask>(sft))->train(nullptr);
  return run;
}

}  // namespace

TEST(ModelSource, LaterStepsUseTheRunJsonReadWhenResolved) {
  TempDir dir;
  const fs::path run = sft_run(dir.path());
  const dew::runs::ModelSource source = dew::runs::resolve_model_source(run);
  ASSERT_EQ(source.kind, dew::runs::ModelSourceKind::run);
  const auto before = dew::runs::open_tokenizer(source).tokenizer->encode("What is 2 plus one?");

  dew::test::write_text(run / "run.json", "{\"format\": \"not a run\"}");
  // Reading the path again would now fail: the value is all that later steps may use.
  EXPECT_NE(error_of([&] { dew::runs::resolve_model_source(run); }).find("\"format\""), std::string::npos);

  EXPECT_EQ(dew::runs::open_run(source)->kind(), "sft");
  EXPECT_EQ(dew::runs::open_tokenizer(source).tokenizer->encode("What is 2 plus one?"), before);
  const dew::runs::LoadedModel loaded = dew::runs::load_model_source(source);
  EXPECT_EQ(loaded.kind, dew::runs::ModelSourceKind::run);
  EXPECT_EQ(loaded.model->config().vocab_size, loaded.tokenizer.tokenizer->vocab_size());
  EXPECT_TRUE(loaded.tokenizer.chat_template.has_value());  // the GGUF's, kept by the run
}

// A fresh GRPO run from a run directory: its data checks encode the prompts with init.from's tokenizer,
// the first step loads init.from again as the KL reference. All of it from one read of init.from's run.json
// (before sources were resolved once: three, by the resolution, the prompt check and the reference).
TEST(ModelSource, AFineTuningRunReadsItsInitRunJsonOnce) {
  TempDir dir;
  const fs::path init = sft_run(dir.path());
  {
    std::ofstream out(dir.path() / "prompts.jsonl");
    for (int i = 0; i < 4; ++i) out << R"({"prompt": [{"role": "user", "content": "Count to )" << i + 2 << R"("}], "ground_truth": ")" << i + 2 << "\"}\n";
  }
  dew::runs::GrpoRunConfig grpo;
  tiny_settings(grpo, init, dir.path() / "prompts.jsonl", 1);
  grpo.data.val_fraction = 0;
  grpo.grpo.reward = "regex:[0-9]";
  grpo.grpo.max_new_tokens = 4;
  grpo.grpo.group_size = 2;
  grpo.grpo.beta = 0.1;  // the reference is init.from, loaded at the first rollout
  const std::int64_t reads = dew::runs::run_file_reads();
  auto run = dew::runs::DecoderRun::start(dir.path() / "grpo", std::make_unique<dew::runs::GrpoTask>(grpo));
  EXPECT_EQ(run->train(nullptr).step, 1);
  EXPECT_EQ(dew::runs::run_file_reads() - reads, 1);
  const auto records = dew::telemetry::read_scalars(dir.path() / "grpo" / "tracking" / "scalars.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records.front().scalars.at("kl"), 0.0);  // the reference is init.from's weights, as the policy's
}
