#include "dew/runs/kinds/lm_kind.h"

#include "dew/core/error.h"
#include "dew/runs/run_directory.h"

namespace fs = std::filesystem;

namespace dew::runs {

// The data (token_data.h) and a model.vocab_size (0 = the data's) that covers it.
void LMTask::check_data(const RunContext&) {
  const data::TokenMeta meta = check_token_data(config_.data);
  auto& m = config_.model;
  if (m.vocab_size == 0) m.vocab_size = meta.vocab_size;
  if (m.vocab_size < meta.vocab_size) {
    fail("model.vocab_size is ", m.vocab_size, " but the data in '", config_.data.path, "' uses a vocabulary of ", meta.vocab_size,
         " (meta.json vocab_size); set model.vocab_size to 0 (take the data's) or at least ", meta.vocab_size);
  }
  if (config_.lm.loss_chunk_tokens < 0) {
    fail("lm.loss_chunk_tokens must be >= 0 (0 = all at once), got ", config_.lm.loss_chunk_tokens);
  }
}

std::string LMTask::data_tokenizer_sha256() const { return token_data_tokenizer_sha256(config_.data); }

std::string LMTask::data_tokenizer_name() const { return token_data_tokenizer_name(config_.data); }

std::string LMTask::copy_data_tokenizer(const fs::path& run_dir) const {
  return copy_token_data_tokenizer(config_.data, run_dir);
}

SplitBatches LMTask::batches(data::Split split, const RunContext&) const {
  return {token_batches(config_.data, RowShift::next_token, split, config_.trainer), {}};
}

std::string LMTask::describe_data() const { return describe_token_data(config_.data); }

std::unique_ptr<RunKind> make_lm_kind() {
  return std::make_unique<DecoderKind<LMRunConfig, LMTask>>(
      "lm", "Train a decoder language model (next-token prediction) on a token directory",
      "token directory written by `dew tokenize` (sets data.path)");
}

std::unique_ptr<DecoderRun> start_lm_run(const fs::path& run_dir, LMRunConfig config) {
  return DecoderRun::start(run_dir, std::make_unique<LMTask>(std::move(config)));
}

LMRunConfig lm_config(const Run& run) {
  if (run.kind() != "lm") fail("'", run.dir().string(), "' is a \"", run.kind(), "\" run, not a language-model (\"lm\") run");
  return typed_config<LMRunConfig>(run.config_json(), run_file_path(run.dir()).string());
}

std::optional<LMRunConfig> stored_lm_config(const fs::path& run_dir) {
  if (!holds_run(run_dir)) return std::nullopt;
  const RunFile file = read_run_file(run_dir);
  if (file.kind != "lm") {
    fail("'", run_file_path(run_dir).string(), "' is a \"", file.kind, "\" run, not a language-model (\"lm\") run");
  }
  LMRunConfig config;
  config::from_json(file.config, config, run_file_path(run_dir).string());
  return config;
}

}  // namespace dew::runs
