#pragma once
// The life cycle every decoder run kind shares (lm, sft, dpo, grpo); the kind's DecoderTask supplies its
// data and objective.
//
//   auto run = DecoderRun::start("runs/austen", std::move(task));  // a fresh run, or resume the one there
//   run->train(stdout);                                             // up to trainer.steps
//
// start() checks the config against the data before anything is written: the task's data checks, the
// model, optimizer and trainer settings, the device, and that training fits in memory. With init.from the
// run takes the architecture and tokenizer of that model, and the data must have been tokenized with it.
// A fresh run writes run.json and the tokenizer (run_directory.h); a directory that already holds a run is
// resumed, and then only trainer.* may differ from run.json (e.g. more steps).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "dew/runs/decoder_task.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/run.h"

namespace dew::runs {

class DecoderRun final : public Run {
 public:
  // init.from is resolved once here (model_source.h) and that value serves the whole command: the
  // architecture and tokenizer a fresh run adopts, the data checks, a LoRA run's base, the DPO/GRPO reference.
  static std::unique_ptr<DecoderRun> start(const std::filesystem::path& run_dir, std::unique_ptr<DecoderTask> task);
  // Opens a run whose run.json `file` the task's config was read from.
  static std::unique_ptr<DecoderRun> open(const std::filesystem::path& run_dir, const RunFile& file,
                                          std::unique_ptr<DecoderTask> task);

  const DecoderTask& task() const { return *task_; }
  const DecoderSections& sections() const { return task_->sections(); }

  std::string describe() const override;
  training::FitResult train(std::FILE* out) override;
  objectives::Statistics evaluate(const EvalOptions& options, std::filesystem::path* loaded = nullptr) override;
  std::string validation_loss() const override { return task_->validation_loss(); }
  std::string validation_unit() const override { return task_->validation_unit(); }
  const training::TrainerConfig& trainer_config() const override { return sections().trainer; }
  config::Json config_json() const override { return task_->config_json(); }
  LoadedModel load_decoder(const ModelLoadOptions& options) const override;
  LoraAdapters lora_adapters(const ModelLoadOptions& options) const override;

  // The tokenizer run.json names (the run's own copy), without or with its checkpoint extras.
  std::unique_ptr<data::Tokenizer> tokenizer() const;
  data::PretrainedTokenizer pretrained_tokenizer() const;
  // The decoder with uninitialised parameters (ParameterInit::none), on the CPU.
  nn::CausalTransformer build_model() const;
  // The model with the weights of a checkpoint (the newest, or `step`), the EMA copy unless `live`, on
  // trainer.device (or `device` when given), in eval mode. Returns the step directory read in `loaded`.
  // A LoRA run's adapters are merged into the weights unless `merge_adapters` is false (peft export).
  nn::CausalTransformer load_model(bool live = false, std::optional<std::int64_t> step = std::nullopt,
                                   const std::string& device = "", std::filesystem::path* loaded = nullptr,
                                   bool merge_adapters = true) const;
  // Batches of one split, as training reads them.
  std::unique_ptr<data::BatchSource> batches(data::Split split) const { return task_->batches(split, context_).rows; }

 private:
  DecoderRun(const std::filesystem::path& dir, std::unique_ptr<DecoderTask> task, std::string tokenizer,
             std::string tokenizer_sha256, bool resumed);
  // start()'s two ways: the run already in run_dir (its run.json `stored`, read once), or a new one.
  static std::unique_ptr<DecoderRun> resume(const std::filesystem::path& run_dir, RunFile stored, std::unique_ptr<DecoderTask> task);
  static std::unique_ptr<DecoderRun> start_fresh(const std::filesystem::path& run_dir, std::unique_ptr<DecoderTask> task);
  // init.from's weights (from the source the run resolved once) in model.param_dtype, on the CPU.
  nn::CausalTransformer base_model() const;

  std::unique_ptr<DecoderTask> task_;
  std::string tokenizer_;         // RunFile::tokenizer
  std::string tokenizer_sha256_;  // RunFile::tokenizer_sha256 ("" in runs older than the field)
  RunContext context_;
  // The init.from model start() loaded to adopt its architecture, kept for train() so a fresh
  // fine-tuning run reads (and dequantizes) the checkpoint once.
  nn::CausalTransformer initial_model_{nullptr};
};

}  // namespace dew::runs
