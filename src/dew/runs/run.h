#pragma once
// A run directory opened as the kind its run.json names (run_kind.h holds the table of kinds). What every
// command that takes a RUN needs, whatever trained it: `dew train KIND` trains it, `dew eval` evaluates it,
// `dew generate`/`dew chat`/`dew export` load its model (model_source.h).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "dew/core/config.h"
#include "dew/objectives/statistics.h"
#include "dew/runs/model_source.h"
#include "dew/runs/run_verbs.h"
#include "dew/training/trainer.h"

namespace dew::runs {

struct EvalOptions {
  bool live = false;                 // the trained parameters instead of the EMA copy
  std::optional<std::int64_t> step;  // this checkpoint instead of the newest
  std::int64_t max_batches = 0;      // 0 = the whole validation split
  std::string device;                // "" = the run's trainer.device
  // Kinds that judge what they generate (a diffusion run's sample quality):
  std::optional<std::int64_t> samples;       // how many to draw (unset = the kind's default, 0 = none)
  std::optional<std::int64_t> sample_steps;  // solver steps (unset = the run's own setting)
  std::uint64_t seed = 0;                    // their noise seed
};

class Run {
 public:
  virtual ~Run() = default;

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& kind() const { return kind_; }
  bool resumed() const { return resumed_; }  // start() found the run already in the directory

  // One line for the start of `dew train`: the data, the model, what the kind trains on.
  virtual std::string describe() const = 0;
  // Trains up to trainer.steps, resuming from the newest checkpoint; progress and logs go to `out`.
  virtual training::FitResult train(std::FILE* out) = 0;
  // The objective's validation statistics over the validation split. `loaded` receives the checkpoint read.
  virtual objectives::Statistics evaluate(const EvalOptions& options, std::filesystem::path* loaded = nullptr) = 0;
  // The statistic whose count says how much was evaluated (an LM's "ce" counts tokens).
  virtual std::string validation_loss() const = 0;
  // What that count counts, plural: "tokens", "pairs", "prompts".
  virtual std::string validation_unit() const = 0;
  virtual const training::TrainerConfig& trainer_config() const = 0;
  // The kind's whole config, as run.json stores it (typed readers such as kinds/lm_kind.h's lm_config read
  // it by the run's kind(), never by casting the run).
  virtual config::Json config_json() const = 0;
  // The trained decoder with its tokenizer, for generation, chat and export; kinds without one refuse.
  virtual LoadedModel load_decoder(const ModelLoadOptions& options) const = 0;

  // Optional verbs (run_verbs.h). These defaults refuse, naming the run's kind and the kind that answers.
  virtual SampleResult sample(const SampleRequest& request) const;  // `dew sample`: diffusion runs
  virtual ProbeResult probe(const ProbeRequest& request) const;     // `dew probe`: jepa runs
  virtual LoraAdapters lora_adapters(const ModelLoadOptions& options) const;  // `dew export --format peft`: LoRA runs

 protected:
  Run(std::filesystem::path dir, std::string kind, bool resumed)
      : dir_(std::move(dir)), kind_(std::move(kind)), resumed_(resumed) {}

 private:
  std::filesystem::path dir_;
  std::string kind_;
  bool resumed_;
};

// Opens the run in `run_dir` as its run.json's kind says; the error names an unknown kind and lists the known.
std::unique_ptr<Run> open_run(const std::filesystem::path& run_dir);
// The same for a resolved MODEL (model_source.h), from the run.json read when it was resolved; a source that
// is not a run directory is refused, naming what it is.
std::unique_ptr<Run> open_run(const ModelSource& source);

}  // namespace dew::runs
