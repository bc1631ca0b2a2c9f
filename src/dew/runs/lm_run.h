#pragma once
// A decoder language-model run: `dew train lm`, `dew eval` and `dew generate` all go through here.
//
//   auto run = LMRun::start("runs/austen", config);   // a fresh run, or resume the one there
//   run.train();                                        // up to config.trainer.steps
//   auto stats = LMRun::open("runs/austen").evaluate();  // validation ce and perplexity, EMA weights
//
// start() checks the config against the data before anything is written: data.path names a token
// directory, model.vocab_size (0 = the data's) covers the data's vocabulary, data.seq_len fits
// model.max_seq_len, packing has documents to pack, and the model, optimizer and trainer settings are
// valid. A fresh run writes run.json and a copy of the tokenizer (run_directory.h); a directory that
// already holds a run is resumed, and then only trainer.* may differ from run.json (e.g. more steps).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "dew/data/batch_source.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/nn/causal_transformer.h"
#include "dew/objectives/statistics.h"
#include "dew/runs/lm_run_config.h"
#include "dew/training/trainer.h"

namespace dew::runs {

class LMRun {
 public:
  // Starts a run in `run_dir` with `config`, or resumes the run there (see above). data.path is stored
  // as an absolute path.
  static LMRun start(const std::filesystem::path& run_dir, LMRunConfig config);
  // Opens the run in `run_dir` as run.json describes it (for evaluation and generation).
  static LMRun open(const std::filesystem::path& run_dir);
  // run.json's config when `run_dir` holds an lm run (what --set overrides apply to when resuming).
  static std::optional<LMRunConfig> stored_config(const std::filesystem::path& run_dir);

  const std::filesystem::path& dir() const { return dir_; }
  const LMRunConfig& config() const { return config_; }
  bool resumed() const { return resumed_; }  // start() found a run in the directory

  std::unique_ptr<data::Tokenizer> tokenizer() const;
  // The decoder with uninitialised parameters (ParameterInit::none: a checkpoint or objective.init fills
  // them), on the CPU.
  nn::CausalTransformer build_model() const;
  // Rows from one split (shuffled per epoch for train, in order for val), behind a prefetcher when
  // data.prefetch > 0. nullptr when the split is shorter than one row (a tiny validation split).
  std::unique_ptr<data::BatchSource> batches(data::Split split) const;

  // Trains up to trainer.steps, resuming from the newest checkpoint; progress and logs go to `out`.
  training::FitResult train(std::FILE* out = stdout) const;

  // The model with the weights of a checkpoint (the newest, or `step`), the EMA copy unless `live`, on
  // trainer.device (or `device` when given), in eval mode. Returns the step directory read in `loaded`.
  nn::CausalTransformer load_model(bool live = false, std::optional<std::int64_t> step = std::nullopt,
                                   const std::string& device = "", std::filesystem::path* loaded = nullptr) const;

  // Validation statistics (ce, perplexity, token_accuracy) over the whole validation split, or the first
  // `max_batches` batches of trainer.batch_size rows.
  objectives::Statistics evaluate(bool live = false, std::optional<std::int64_t> step = std::nullopt,
                                  std::int64_t max_batches = 0, const std::string& device = "",
                                  std::filesystem::path* loaded = nullptr) const;

 private:
  LMRun(std::filesystem::path dir, LMRunConfig config, std::string tokenizer, bool resumed)
      : dir_(std::move(dir)), config_(std::move(config)), tokenizer_(std::move(tokenizer)), resumed_(resumed) {}

  std::filesystem::path dir_;
  LMRunConfig config_;
  std::string tokenizer_;  // RunFile::tokenizer
  bool resumed_ = false;
  // The init.from model start() loaded to adopt its architecture, kept for train() so a fresh
  // fine-tuning run reads (and dequantizes) the checkpoint once.
  nn::CausalTransformer initial_model_{nullptr};
};

}  // namespace dew::runs
