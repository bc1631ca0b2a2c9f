#pragma once
// A row of the run-kind table for a decoder kind: its typed Config (DecoderSections plus the kind's own
// sections, with a fields() list) and its Task (a DecoderTask built from a Config). Everything a row does
// beyond that is the shared decoder life cycle (decoder_run.h).
//
//   std::unique_ptr<RunKind> make_sft_kind() {
//     return std::make_unique<DecoderKind<SFTRunConfig, SFTTask>>("sft", "Supervised fine-tuning ...", "chat JSONL ...");
//   }
#include <memory>
#include <string>

#include "dew/objectives/lm_objective.h"
#include "dew/runs/decoder_run.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

template <class Config, class Task>
class DecoderKind final : public TypedRunKind<Config> {
 public:
  DecoderKind(const char* name, const char* summary, const char* data_help, bool needs_init_from = false,
              std::vector<KindFlag> flags = {})
      : TypedRunKind<Config>(name, summary, std::move(flags)), data_help_(data_help), needs_init_from_(needs_init_from) {}

  const char* data_help() const override { return data_help_; }
  bool needs_init_from() const override { return needs_init_from_; }

  std::unique_ptr<Run> start(const std::filesystem::path& run_dir, const config::Json& config) const override {
    Config typed = typed_config<Config>(config, "the config");
    if (needs_init_from_ && typed.init.from.empty() && !holds_run(run_dir)) {
      fail("`dew train ", this->name_, "` post-trains a model: pass --init-from MODEL (a run, a Hugging Face directory or a "
           ".gguf file); its tokenizer and chat template read the data");
    }
    return DecoderRun::start(run_dir, std::make_unique<Task>(std::move(typed)));
  }

  std::unique_ptr<Run> open(const std::filesystem::path& run_dir, const RunFile& file) const override {
    return DecoderRun::open(run_dir, file, std::make_unique<Task>(typed_config<Config>(file.config, run_file_path(run_dir).string())));
  }

 private:
  const char* data_help_;
  bool needs_init_from_;
};

// A DecoderTask over a typed Config (typed_task.h).
template <class Config>
class TypedDecoderTask : public TypedTask<DecoderTask, Config> {
 public:
  using TypedTask<DecoderTask, Config>::TypedTask;
  nn::CausalTransformerConfig default_model_config() const override { return Config{}.model; }
};

// A task trained on the LM's token cross entropy (lm, sft): rows of data.seq_len, the lm section's loss,
// "ce" as its validation loss.
template <class Config>
class TokenLossTask : public TypedDecoderTask<Config> {
 public:
  using TypedDecoderTask<Config>::TypedDecoderTask;
  std::int64_t seq_len() const override { return this->config_.data.seq_len; }
  std::int64_t loss_chunk_tokens() const override { return this->config_.lm.loss_chunk_tokens; }
  std::string validation_loss() const override { return "ce"; }
  std::unique_ptr<objectives::Objective> objective(nn::CausalTransformer model, const RunContext&) const override {
    return std::make_unique<objectives::LMObjective>(
        std::move(model), objectives::LMObjectiveConfig{.seq_len = this->config_.data.seq_len, .loss = this->config_.lm});
  }
};

}  // namespace dew::runs
