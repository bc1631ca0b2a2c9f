#include "dew/runs/lm_run.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/data/packed_tokens.h"
#include "dew/data/prefetcher.h"
#include "dew/data/token_files.h"
#include "dew/data/token_windows.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"
#include "dew/objectives/lm_objective.h"
#include "dew/nn/dtype.h"
#include "dew/nn/decoder_flops.h"
#include "dew/nn/device.h"
#include "dew/runs/memory_estimate.h"
#include "dew/runs/model_source.h"
#include "dew/runs/run_directory.h"
#include "dew/training/checkpoint.h"
#include "dew/training/evaluate.h"
#include "dew/training/trainer.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {
constexpr const char* kKind = "lm";

// Everything that can be checked before a byte is written; fills model.vocab_size from the data.
// Includes what used to fail only once training started (and then left run.json behind): train.bin and
// val.bin of the size meta.json gives with every id inside the vocabulary, a usable trainer.device, and a
// model that fits in that device's memory.
void resolve_against_data(LMRunConfig& config) {
  if (!config.init.from.empty()) config.init.from = fs::absolute(config.init.from).lexically_normal().string();
  auto& d = config.data;
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

  auto& m = config.model;
  if (m.vocab_size == 0) m.vocab_size = meta.vocab_size;
  if (m.vocab_size < meta.vocab_size) {
    fail("model.vocab_size is ", m.vocab_size, " but the data in '", d.path, "' uses a vocabulary of ", meta.vocab_size,
         " (meta.json vocab_size); set model.vocab_size to 0 (take the data's) or at least ", meta.vocab_size);
  }
  m.validate();
  if (d.seq_len <= 0) fail("data.seq_len must be positive, got ", d.seq_len);
  if (d.seq_len > m.max_seq_len) {
    fail("data.seq_len (", d.seq_len, ") is larger than model.max_seq_len (", m.max_seq_len,
         "); raise model.max_seq_len or lower data.seq_len");
  }
  if (d.stride < 0) fail("data.stride must be >= 0 (0 = seq_len), got ", d.stride);
  if (d.prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", d.prefetch);
  if (d.pack && d.stride != 0) fail("data.stride applies to windows only; leave it 0 with data.pack = true");
  if (d.pack && !meta.packed) {
    fail("data.pack = true but '", (fs::path(d.path) / "meta.json").string(),
         "' says packed: false (no EOS marks the documents); tokenize with `dew tokenize --pack` or set data.pack=false");
  }
  const auto& l = config.lm;
  if (l.loss_chunk_tokens < 0) fail("lm.loss_chunk_tokens must be >= 0 (0 = all at once), got ", l.loss_chunk_tokens);
  config.optim.validate();
  config.trainer.validate();
  const c10::Device device = nn::resolve_device(config.trainer.device);  // cuda without a GPU: refused here
  check_training_memory(config, device);
  if (device.is_cuda()) check_model_memory(config.model, c10::Device(c10::kCPU), "");  // built on the CPU first
}

// The run's tokenizer: "byte", or its copy under the run directory (which must still be there).
std::unique_ptr<data::Tokenizer> load_run_tokenizer(const fs::path& run_dir, const std::string& spec) {
  if (spec == "byte") return data::load_tokenizer("byte");
  const fs::path copy = run_dir / spec;
  std::error_code ec;
  if (!fs::exists(copy, ec)) {
    fail("the run's copy of its tokenizer, '", copy.string(), "', is missing (", run_file_path(run_dir).string(),
         " names it); restore the run's tokenizer/ directory, for example from the token directory it was trained on");
  }
  return data::load_tokenizer(copy.string());
}

// The fingerprint of the tokenizer a run was trained with: run.json's, or (runs written before the field)
// computed from the run's copy.
std::string run_tokenizer_sha256(const fs::path& run_dir, const RunFile& file) {
  if (!file.tokenizer_sha256.empty()) return file.tokenizer_sha256;
  return data::tokenizer_sha256(*load_run_tokenizer(run_dir, file.tokenizer));
}

// Evaluation and resuming read data.path again, which may have been tokenized anew since the run began:
// ids of another vocabulary would be read as this model's and give a wrong loss with exit 0.
void check_data_tokenizer(const fs::path& run_dir, const RunFile& file, const std::string& data_path) {
  const data::TokenMeta meta = data::read_token_meta(data_path);
  const std::string data_sha = data::token_tokenizer_sha256(data_path, meta);
  const std::string run_sha = run_tokenizer_sha256(run_dir, file);
  if (data_sha == run_sha) return;
  const std::string run_copy = file.tokenizer == "byte" ? std::string("byte") : (run_dir / file.tokenizer).string();
  fail("the data in '", data_path, "' was tokenized with another tokenizer ('", meta.tokenizer_source, "', vocabulary ",
       meta.vocab_size, ", sha256 ", data_sha.substr(0, 12), ") than run '", run_dir.string(), "' was trained with ('",
       run_copy, "', sha256 ", run_sha.substr(0, 12), "); its ids would be read as other tokens. Tokenize the corpus "
       "again with the run's tokenizer (dew tokenize --tokenizer '", run_copy, "' ...) or set data.path to the data "
       "the run was trained on");
}

// The value at a dotted path ("model.num_layers") as JSON text, or "(absent)".
std::string value_at(const config::Json& root, const std::string& dotted) {
  const config::Json* at = &root;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    auto end = dotted.find('.', start);
    auto key = dotted.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!at->is_object() || !at->contains(key)) return "(absent)";
    at = &(*at)[key];
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return at->dump();
}

// A fresh fine-tuning run takes the architecture from the model it starts from; only the compute and
// storage dtypes stay the run's choice. A model field the user set (it differs from the default) to a
// value other than the init model's would be silently ignored, so it is refused. A field set to its
// default value cannot be told from an unset one; it is adopted like the rest.
void adopt_model_config(LMRunConfig& config, const LoadedModel& init) {
  nn::CausalTransformerConfig model = init.model->config();
  const nn::CausalTransformerConfig unset;
  const config::Json asked = config::to_json(config.model), defaults = config::to_json(unset), adopted = config::to_json(model);
  for (const auto& [field, value] : asked.items()) {
    if (field == "dtype" || field == "param_dtype") continue;
    if (value == defaults[field] || value == adopted[field]) continue;
    fail("model.", field, " = ", value.dump(), " was asked for, but init.from '", config.init.from, "' has ",
         adopted[field].dump(), " and a fine-tuning run takes the whole architecture from the model it starts from "
         "(only model.dtype and model.param_dtype are the run's); drop the setting (nothing was written)");
  }
  model.dtype = config.model.dtype;
  model.param_dtype = config.model.param_dtype;
  config.model = model;
  config.init.model_type = init.model_type;
}

// The data must have been tokenized with the model's own tokenizer: the same fingerprint (every id's bytes
// and a probe text's ids, data/tokenizers/tokenizer_fingerprint.h). Returns it, for run.json.
std::string check_same_tokenizer(const LoadedModel& init, const LMRunConfig& config) {
  const data::TokenMeta meta = data::read_token_meta(config.data.path);
  const std::string model_sha = data::tokenizer_sha256(*init.tokenizer.tokenizer);
  if (data::token_tokenizer_sha256(config.data.path, meta) != model_sha) {
    const std::int64_t model_vocab = init.tokenizer.tokenizer->vocab_size();
    fail("the data in '", config.data.path, "' was tokenized with '", meta.tokenizer_source, "' (vocabulary ",
         meta.vocab_size, ") but init.from '", config.init.from, "' uses another tokenizer (vocabulary ", model_vocab,
         (meta.vocab_size == model_vocab ? ", different ids" : ""),
         "); tokenize the text with the model's tokenizer: dew tokenize --tokenizer <the model> ...");
  }
  return model_sha;
}

LMRunConfig config_from(const RunFile& run, const fs::path& run_dir) {
  if (run.kind != kKind) {
    fail("'", run_file_path(run_dir).string(), "' is a \"", run.kind, "\" run, not a language-model (\"lm\") run");
  }
  LMRunConfig config;
  config::from_json(run.config, config, run_file_path(run_dir).string());
  return config;
}

// Copies the data's tokenizer into the run so that generation and export decode with the vocabulary the
// model learned, even if the token directory is later moved or deleted. Returns the RunFile spec.
std::string copy_tokenizer(const LMRunConfig& config, const fs::path& run_dir) {
  const fs::path data_dir = config.data.path;
  const data::TokenMeta meta = data::read_token_meta(data_dir);
  if (meta.tokenizer == "byte") return "byte";
  auto tokenizer = data::load_token_tokenizer(data_dir, meta);
  fs::create_directories(run_dir / "tokenizer");
  return (fs::path("tokenizer") / tokenizer->save(run_dir / "tokenizer")).string();
}
}  // namespace

std::optional<LMRunConfig> LMRun::stored_config(const fs::path& run_dir) {
  if (!holds_run(run_dir)) return std::nullopt;
  return config_from(read_run_file(run_dir), run_dir);
}

LMRun LMRun::start(const fs::path& run_dir, LMRunConfig config) {
  std::optional<LoadedModel> init;
  if (!config.init.from.empty() && !holds_run(run_dir)) {
    init = load_model_source(config.init.from, {.device = "cpu"});
    adopt_model_config(config, *init);
  }
  resolve_against_data(config);
  std::string init_tokenizer_sha256;  // the fingerprint run.json records for a fine-tuning run
  if (init) init_tokenizer_sha256 = check_same_tokenizer(*init, config);
  if (holds_run(run_dir)) {
    RunFile stored = read_run_file(run_dir);
    check_data_tokenizer(run_dir, stored, config.data.path);
    LMRunConfig before = config_from(stored, run_dir);
    // Everything but trainer.* rebuilds the model, data order and optimizer the checkpoints were made with.
    config::Json a = config::to_json(before), b = config::to_json(config);
    a.erase("trainer");
    b.erase("trainer");
    if (auto field = first_difference(a, b)) {
      fail("'", run_dir.string(), "' already holds a run with ", *field, " = ", value_at(a, *field), "; this command asks for ",
           value_at(b, *field), ". A resumed run can change only trainer.* (e.g. --set trainer.steps=N); "
           "start a new run in another --out directory to change the rest (nothing was written)");
    }
    stored.config = config::to_json(config);
    write_run_file(run_dir, stored);
    return LMRun(run_dir, std::move(config), stored.tokenizer, /*resumed=*/true);
  }
  check_fresh_run_dir(run_dir);
  fs::create_directories(run_dir);
  std::string tokenizer;
  if (init) {
    data::save_pretrained_tokenizer(init->tokenizer, run_dir / "tokenizer");  // with its chat template
    tokenizer = "tokenizer";
  } else {
    tokenizer = copy_tokenizer(config, run_dir);
  }
  RunFile file{kKind, tokenizer, config::to_json(config),
               init ? init_tokenizer_sha256
                    : data::token_tokenizer_sha256(config.data.path, data::read_token_meta(config.data.path))};
  write_run_file(run_dir, file);  // last: a directory with run.json is a complete run to resume
  LMRun run(run_dir, std::move(config), file.tokenizer, /*resumed=*/false);
  if (init) run.initial_model_ = init->model;
  return run;
}

LMRun LMRun::open(const fs::path& run_dir) {
  RunFile file = read_run_file(run_dir);
  LMRunConfig config = config_from(file, run_dir);
  if (config.model.vocab_size <= 0) {
    fail("'", run_file_path(run_dir).string(), "': config.model.vocab_size is ", config.model.vocab_size,
         "; a run file holds the resolved vocabulary size");
  }
  config.model.validate();
  return LMRun(run_dir, std::move(config), file.tokenizer, /*resumed=*/true);
}

std::unique_ptr<data::Tokenizer> LMRun::tokenizer() const { return load_run_tokenizer(dir_, tokenizer_); }

nn::CausalTransformer LMRun::build_model() const { return nn::CausalTransformer(config_.model, nn::ParameterInit::none); }

std::unique_ptr<data::BatchSource> LMRun::batches(data::Split split) const {
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

training::FitResult LMRun::train(std::FILE* out) const {
  // A fine-tuning run's first segment starts from init.from's weights; later segments from checkpoints.
  const bool from_pretrained = !config_.init.from.empty() && !training::latest_checkpoint(dir_);
  nn::CausalTransformer model = !from_pretrained ? build_model()
                                : initial_model_ ? initial_model_
                                                 : load_model_source(config_.init.from, {.device = "cpu"}).model;
  if (from_pretrained) model->to(nn::parse_dtype(config_.model.param_dtype));
  objectives::LMObjective objective(model, config_.objective_config());
  training::TrainerConfig trainer_config = config_.trainer;
  if (trainer_config.flops_per_token == 0) {
    trainer_config.flops_per_token = nn::decoder_flops_per_token(config_.model, config_.data.seq_len);
  }
  auto train_rows = batches(data::Split::train);
  auto val_rows = batches(data::Split::val);
  if (!val_rows && out) std::fprintf(out, "note: the validation split is shorter than one row; no validation\n");
  training::Trainer trainer(objective, config_.optim, trainer_config, dir_);
  trainer.set_output(out);
  if (from_pretrained) trainer.use_current_parameters();
  return trainer.fit(*train_rows, val_rows.get());
}

nn::CausalTransformer LMRun::load_model(bool live, std::optional<std::int64_t> step, const std::string& device,
                                        fs::path* loaded) const {
  const c10::Device target = device.empty() ? nn::resolve_device(config_.trainer.device) : nn::resolve_device(device, "--device");
  const std::string source = run_file_path(dir_).string();
  check_model_memory(config_.model, c10::Device(c10::kCPU), source);  // built on the CPU, then moved
  if (target.is_cuda()) check_model_memory(config_.model, target, source);
  nn::CausalTransformer model = build_model();
  fs::path checkpoint = dir_;
  if (step) {
    checkpoint = dir_ / std::to_string(*step);
    if (!fs::is_directory(checkpoint)) {
      auto steps = training::checkpoint_steps(dir_);
      std::string have;
      for (auto s : steps) have += (have.empty() ? "" : ", ") + std::to_string(s);
      fail("run '", dir_.string(), "' has no checkpoint of step ", *step, "; it has: ", have.empty() ? "none" : have);
    }
  }
  fs::path used = training::load_checkpoint_weights(*model, checkpoint, /*use_ema=*/!live);
  if (loaded) *loaded = used;
  model->to(target);
  model->eval();
  return model;
}

objectives::Statistics LMRun::evaluate(bool live, std::optional<std::int64_t> step, std::int64_t max_batches,
                                       const std::string& device, fs::path* loaded) const {
  check_data_tokenizer(dir_, read_run_file(dir_), config_.data.path);
  auto val = batches(data::Split::val);
  if (!val) {
    fail("the validation split of '", config_.data.path, "' is shorter than one row of data.seq_len + 1 = ",
         config_.data.seq_len + 1, " tokens; tokenize with a larger --val-fraction");
  }
  auto model = load_model(live, step, device, loaded);
  const auto where = model->parameters().front().device();
  objectives::LMObjective objective(model, config_.objective_config());
  return training::evaluate_objective(objective, *val, config_.trainer.batch_size, max_batches, where);
}

}  // namespace dew::runs
