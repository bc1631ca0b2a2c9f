#include "dew/runs/kinds/lm_kind.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/data/packed_tokens.h"
#include "dew/data/prefetcher.h"
#include "dew/data/token_files.h"
#include "dew/data/token_windows.h"
#include "dew/runs/run_directory.h"

namespace fs = std::filesystem;

namespace dew::runs {

// data.path names a token directory whose train.bin and val.bin have the size meta.json gives with every id
// inside the vocabulary; model.vocab_size (0 = the data's) covers it; packing has documents to pack.
void LMTask::check_data() {
  auto& d = config_.data;
  if (d.path.empty()) fail("data.path is not set: pass --data DIR, a token directory written by `dew tokenize`");
  std::error_code ec;
  if (!fs::is_directory(d.path, ec)) {
    fail("data.path '", d.path, "' is not a directory; pass --data DIR, a token directory written by `dew tokenize`");
  }
  d.path = fs::absolute(d.path).lexically_normal().string();
  const data::TokenMeta meta = data::read_token_meta(d.path);
  {
    const data::TokenFiles files(d.path);  // sizes against meta.json
    files.split(data::Split::train);       // each split's ids against vocab_size
    files.split(data::Split::val);
  }
  auto& m = config_.model;
  if (m.vocab_size == 0) m.vocab_size = meta.vocab_size;
  if (m.vocab_size < meta.vocab_size) {
    fail("model.vocab_size is ", m.vocab_size, " but the data in '", d.path, "' uses a vocabulary of ", meta.vocab_size,
         " (meta.json vocab_size); set model.vocab_size to 0 (take the data's) or at least ", meta.vocab_size);
  }
  if (d.seq_len <= 0) fail("data.seq_len must be positive, got ", d.seq_len);
  if (d.stride < 0) fail("data.stride must be >= 0 (0 = seq_len), got ", d.stride);
  if (d.prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", d.prefetch);
  if (d.pack && d.stride != 0) fail("data.stride applies to windows only; leave it 0 with data.pack = true");
  if (d.pack && !meta.packed) {
    fail("data.pack = true but '", (fs::path(d.path) / "meta.json").string(),
         "' says packed: false (no EOS marks the documents); tokenize with `dew tokenize --pack` or set data.pack=false");
  }
  if (config_.lm.loss_chunk_tokens < 0) {
    fail("lm.loss_chunk_tokens must be >= 0 (0 = all at once), got ", config_.lm.loss_chunk_tokens);
  }
}

std::string LMTask::data_tokenizer_sha256() const {
  return data::token_tokenizer_sha256(config_.data.path, data::read_token_meta(config_.data.path));
}

std::string LMTask::data_tokenizer_name() const {
  const data::TokenMeta meta = data::read_token_meta(config_.data.path);
  return str("'", meta.tokenizer_source, "' (vocabulary ", meta.vocab_size, ")");
}

// Copies the data's tokenizer into the run so that generation and export decode with the vocabulary the
// model learned, even if the token directory is later moved or deleted.
std::string LMTask::copy_data_tokenizer(const fs::path& run_dir) const {
  const fs::path data_dir = config_.data.path;
  const data::TokenMeta meta = data::read_token_meta(data_dir);
  if (meta.tokenizer == "byte") return "byte";
  auto tokenizer = data::load_token_tokenizer(data_dir, meta);
  fs::create_directories(run_dir / "tokenizer");
  return (fs::path("tokenizer") / tokenizer->save(run_dir / "tokenizer")).string();
}

std::unique_ptr<objectives::Objective> LMTask::objective(nn::CausalTransformer model, const RunContext&) const {
  return std::make_unique<objectives::LMObjective>(std::move(model), config_.objective_config());
}

std::unique_ptr<data::BatchSource> LMTask::batches(data::Split split, const RunContext&) const {
  const auto& d = config_.data;
  data::TokenLoaderOptions options{.split = split, .seed = config_.trainer.seed};
  const data::TokenMeta meta = data::read_token_meta(d.path);
  std::unique_ptr<data::BatchSource> source;
  if (d.pack) {
    if (meta.tokens(split) == 0 && split == data::Split::val) return nullptr;
    source = std::make_unique<data::PackedTokens>(d.path, d.seq_len, options);
  } else {
    const std::int64_t stride = d.stride > 0 ? d.stride : d.seq_len;
    if (split == data::Split::val && data::TokenWindows::count_windows(meta.val_tokens, d.seq_len, stride) == 0) {
      return nullptr;
    }
    source = std::make_unique<data::TokenWindows>(d.path, d.seq_len, stride, options);
  }
  if (split == data::Split::train && d.prefetch > 0) {
    const std::int64_t rows = config_.trainer.batch_size / config_.trainer.grad_accum;
    source = std::make_unique<data::Prefetcher>(std::move(source), rows, static_cast<std::size_t>(d.prefetch));
  }
  return source;
}

std::string LMTask::describe_data() const {
  const auto& d = config_.data;
  return str("data in '", d.path, "' (", d.pack ? "packed" : "window", " rows of ", d.seq_len, " tokens)");
}

std::unique_ptr<RunKind> make_lm_kind() {
  return std::make_unique<DecoderKind<LMRunConfig, LMTask>>(
      "lm", "Train a decoder language model (next-token prediction) on a token directory",
      "token directory written by `dew tokenize` (sets data.path)");
}

std::unique_ptr<DecoderRun> start_lm_run(const fs::path& run_dir, LMRunConfig config) {
  return DecoderRun::start(run_dir, std::make_unique<LMTask>(std::move(config)));
}

const LMRunConfig& lm_config(const Run& run) {
  const auto* decoder = dynamic_cast<const DecoderRun*>(&run);
  const auto* task = decoder ? dynamic_cast<const LMTask*>(&decoder->task()) : nullptr;
  if (!task) fail("'", run.dir().string(), "' is a \"", run.kind(), "\" run, not a language-model (\"lm\") run");
  return task->config();
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
