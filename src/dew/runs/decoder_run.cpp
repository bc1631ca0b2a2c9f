#include "dew/runs/decoder_run.h"

#include "dew/nn/parameters.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/core/free_memory.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_lora_targets.h"
#include "dew/nn/decoder_flops.h"
#include "dew/nn/device.h"
#include "dew/nn/dtype.h"
#include "dew/nn/frozen_weights.h"
#include "dew/nn/lora.h"
#include "dew/runs/memory_estimate.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/run_life_cycle.h"
#include "dew/runs/tokenizer_source.h"
#include "dew/training/checkpoint.h"
#include "dew/training/evaluate.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {

// Everything shared that can be checked before a byte is written: the task's data (which may fill
// model.vocab_size), the model against the rows it will read, the optimizer and trainer settings, a usable
// trainer.device, and a model that fits in that device's memory.
void resolve(DecoderTask& task, const RunContext& checks) {
  auto& s = task.sections();
  if (!task.masked_diffusion() && (!s.model.causal || s.model.mask_token_id >= 0)) {
    fail("`dew train ", task.kind(), "` trains an autoregressive decoder, but model.causal is false or model.mask_token_id is set",
         s.init.from.empty() ? "" : str(" (init.from '", s.init.from, "' is a masked-diffusion model)"),
         "; train masked-diffusion models with `dew train mdlm`");
  }
  task.check_data(checks);
  s.model.validate();
  s.lora.validate();  // also at rank 0: a negative rank would otherwise mean "no LoRA" and be recorded as asked
  if (s.lora.enabled()) {
    if (s.init.from.empty()) {
      fail("lora.rank = ", s.lora.rank, " trains adapters on a trained model, but init.from is empty; pass --init-from MODEL "
           "or set lora.rank=0 to train every weight");
    }
  }
  const std::int64_t seq_len = task.seq_len();
  if (seq_len > s.model.max_seq_len) {
    fail("data.seq_len (", seq_len, ") is larger than model.max_seq_len (", s.model.max_seq_len,
         "); raise model.max_seq_len or lower data.seq_len");
  }
  s.optim.validate();
  s.trainer.validate();
  const c10::Device device = nn::resolve_device(s.trainer.device);  // cuda without a GPU: refused here
  check_training_memory(s.model, s.trainer, seq_len, task.loss_chunk_tokens(), device);
  if (device.is_cuda()) check_model_memory(s.model, c10::Device(c10::kCPU), "");  // built on the CPU first
}

std::unique_ptr<data::Tokenizer> load_run_tokenizer(const fs::path& run_dir, const std::string& spec) {
  return open_run_tokenizer(run_dir, spec).tokenizer;
}

// The fingerprint of the tokenizer a run was trained with: run.json's (`recorded`), or (runs written before
// the field) computed from the run's copy, which run.json's `spec` names.
std::string run_tokenizer_sha256(const fs::path& run_dir, const std::string& spec, const std::string& recorded) {
  if (!recorded.empty()) return recorded;
  return data::tokenizer_sha256(*load_run_tokenizer(run_dir, spec));
}

// Evaluation and resuming read the data again, which may have been tokenized anew since the run began:
// ids of another vocabulary would be read as this model's and give a wrong loss with exit 0. `spec` and
// `recorded` are run.json's tokenizer and tokenizer_sha256, as the run was opened with them.
void check_data_tokenizer(const fs::path& run_dir, const std::string& spec, const std::string& recorded, const DecoderTask& task) {
  const std::string data_sha = task.data_tokenizer_sha256();
  if (data_sha.empty()) return;  // text the run tokenizes itself, with its own tokenizer
  const std::string run_sha = run_tokenizer_sha256(run_dir, spec, recorded);
  if (data_sha == run_sha) return;
  const std::string run_copy = spec == "byte" ? std::string("byte") : (run_dir / spec).string();
  fail("the ", task.describe_data(), " was tokenized with another tokenizer (", task.data_tokenizer_name(), ", sha256 ",
       data_sha.substr(0, 12), ") than run '", run_dir.string(), "' was trained with ('", run_copy, "', sha256 ", run_sha.substr(0, 12),
       "); its ids would be read as other tokens. Tokenize it again with the run's tokenizer (dew tokenize --tokenizer '",
       run_copy, "' ...) or point data.path at the data the run was trained on");
}

// A fresh fine-tuning run takes the architecture from the model it starts from; only the compute and
// storage dtypes stay the run's choice. A model field the user set (it differs from the default) to a
// value other than the init model's would be silently ignored, so it is refused. A field set to its
// default value cannot be told from an unset one; it is adopted like the rest.
void adopt_model_config(DecoderSections& s, const LoadedModel& init, const nn::CausalTransformerConfig& unset) {
  nn::CausalTransformerConfig model = init.model->config();
  const config::Json asked = config::to_json(s.model), defaults = config::to_json(unset), adopted = config::to_json(model);
  for (const auto& [field, value] : asked.items()) {
    if (field == "dtype" || field == "param_dtype" || field == "residual_dtype") continue;
    if (value == defaults[field] || value == adopted[field]) continue;
    fail("model.", field, " = ", value.dump(), " was asked for, but init.from '", s.init.from, "' has ",
         adopted[field].dump(), " and a fine-tuning run takes the whole architecture from the model it starts from "
         "(only model.dtype, model.param_dtype and model.residual_dtype are the run's); drop the setting (nothing was written)");
  }
  model.dtype = s.model.dtype;
  model.param_dtype = s.model.param_dtype;
  model.residual_dtype = s.model.residual_dtype;
  s.model = model;
  s.init.model_type = init.model_type;
}

// The data must have been tokenized with the model's own tokenizer: the same fingerprint (every id's bytes
// and a probe text's ids, data/tokenizers/tokenizer_fingerprint.h). Returns the model's, for run.json.
std::string check_same_tokenizer(const data::PretrainedTokenizer& model_tokenizer, const DecoderTask& task) {
  const std::string model_sha = data::tokenizer_sha256(*model_tokenizer.tokenizer);
  const std::string data_sha = task.data_tokenizer_sha256();
  if (!data_sha.empty() && data_sha != model_sha) {
    const std::int64_t model_vocab = model_tokenizer.tokenizer->vocab_size();
    fail("the ", task.describe_data(), " was tokenized with ", task.data_tokenizer_name(), " but init.from '",
         task.sections().init.from, "' uses another tokenizer (vocabulary ", model_vocab,
         "); tokenize the text with the model's tokenizer: dew tokenize --tokenizer <the model> ...");
  }
  return model_sha;
}

// init.from's weights under the run's model config. The architecture is the init model's (adopt_model_config);
// what is not a parameter -- the compute and storage dtypes, and for a masked-diffusion run the attention rule
// and mask token (Dream's weights began as Qwen 2.5's) -- is the run's, so the model is rebuilt when they differ.
// The rebuilt model takes over the loaded tensors (converted only where the storage dtype differs) rather than
// copying them, so a model is never held twice; `loaded` must not be used afterwards.
nn::CausalTransformer under_run_config(nn::CausalTransformer loaded, const nn::CausalTransformerConfig& config) {
  if (config::to_json(loaded->config()) == config::to_json(config)) return loaded;
  nn::CausalTransformer model(config, nn::ParameterInit::none);
  at::NoGradGuard no_grad;
  auto target = nn::parameter_map(*model);
  for (const auto& [name, p] : nn::parameter_map(*loaded)) {
    auto& t = target.at(name);
    if (t.sizes() != p.sizes()) fail("parameter '", name, "' has shape ", p.sizes(), " in the loaded model but ", t.sizes(), " in the run's");
    t.set_data(p.scalar_type() == t.scalar_type() ? p.detach() : p.to(t.scalar_type()));
  }
  return model;
}

// lora.modules may name init.from's family's modules (GPT-2's c_attn) as well as dew's (nn/lora.h).
nn::LoraTargetNames lora_target_names(const DecoderSections& s, const nn::CausalTransformer& model) {
  return s.init.model_type.empty() ? nn::LoraTargetNames{} : interop::hf_lora_target_names(s.init.model_type, model);
}

}  // namespace

double DecoderTask::flops_per_token() const { return nn::decoder_flops_per_token(sections().model, seq_len()); }

const ModelSource& RunContext::init_source() const {
  if (!init_source_) {
    if (init_from_.empty()) fail("run '", dir_.string(), "' has no init.from: it did not start from a trained model");
    init_source_ = std::make_shared<ModelSource>(resolve_model_source(init_from_));
  }
  return *init_source_;
}

DecoderRun::DecoderRun(const fs::path& dir, std::unique_ptr<DecoderTask> task, std::string tokenizer,
                       std::string tokenizer_sha256, bool resumed)
    : Run(dir, task->kind(), resumed),
      task_(std::move(task)),
      tokenizer_(std::move(tokenizer)),
      tokenizer_sha256_(std::move(tokenizer_sha256)),
      context_(dir, [dir, spec = tokenizer_] { return open_run_tokenizer(dir, spec); }, sections().init.from) {}

std::unique_ptr<DecoderRun> DecoderRun::start(const fs::path& run_dir, std::unique_ptr<DecoderTask> task) {
  auto& s = task->sections();
  if (!s.init.from.empty()) s.init.from = fs::absolute(s.init.from).lexically_normal().string();
  if (holds_run(run_dir)) return resume(run_dir, read_run_file(run_dir), std::move(task));
  return start_fresh(run_dir, std::move(task));
}

std::unique_ptr<DecoderRun> DecoderRun::resume(const fs::path& run_dir, RunFile stored, std::unique_ptr<DecoderTask> task) {
  // The data checks read with the run's own copy of its tokenizer (loaded only if a check needs it).
  const RunContext checks(run_dir, [run_dir, spec = stored.tokenizer] { return open_run_tokenizer(run_dir, spec); },
                          task->sections().init.from);
  resolve(*task, checks);
  refuse_other_kind(run_dir, stored, task->kind());
  check_data_tokenizer(run_dir, stored.tokenizer, stored.tokenizer_sha256, *task);
  record_resumed_config(run_dir, stored, task->canonical_config(stored.config, run_file_path(run_dir).string()), task->config_json());
  return std::unique_ptr<DecoderRun>(
      new DecoderRun(run_dir, std::move(task), stored.tokenizer, stored.tokenizer_sha256, /*resumed=*/true));
}

std::unique_ptr<DecoderRun> DecoderRun::start_fresh(const fs::path& run_dir, std::unique_ptr<DecoderTask> task) {
  auto& s = task->sections();
  // The data checks read with init.from's tokenizer; a run from scratch has none until it copies its data's.
  RunContext checks(run_dir, []() -> data::PretrainedTokenizer { fail("a run from scratch has no tokenizer before it copies its data's"); },
                    s.init.from);
  nn::CausalTransformer init_model{nullptr};
  if (!s.init.from.empty()) {
    checks.use_init_source(resolve_model_source(s.init.from));  // the one resolution every later step uses
    LoadedModel init = load_model_source(checks.init_source(), {.device = "cpu"});
    adopt_model_config(s, init, task->default_model_config());
    init_model = init.model;
    checks.use_tokenizer(std::move(init.tokenizer));
  }
  resolve(*task, checks);
  // lora.modules names init.from's modules (dew's or its family's): checked against it before anything is written.
  if (init_model && s.lora.enabled()) nn::check_lora_modules(init_model, s.lora, lora_target_names(s, init_model));
  std::string tokenizer = "tokenizer", tokenizer_sha256;  // what run.json records
  if (init_model) tokenizer_sha256 = check_same_tokenizer(checks.tokenizer(), *task);
  check_fresh_run_dir(run_dir);
  fs::create_directories(run_dir);
  if (init_model) {
    data::save_pretrained_tokenizer(checks.tokenizer(), run_dir / tokenizer);  // with its chat template
  } else {
    tokenizer = task->copy_data_tokenizer(run_dir);
    tokenizer_sha256 = data::tokenizer_sha256(*load_run_tokenizer(run_dir, tokenizer));
  }
  std::unique_ptr<DecoderRun> run(new DecoderRun(run_dir, std::move(task), tokenizer, tokenizer_sha256, /*resumed=*/false));
  if (init_model) run->context_.use_init_source(checks.init_source());
  run->task_->prepare(run->context_);
  RunFile file{run->task_->kind(), tokenizer, run->task_->config_json(), tokenizer_sha256};
  write_run_file(run_dir, file);  // last: a directory with run.json is a complete run to resume
  run->initial_model_ = init_model;
  return run;
}

std::unique_ptr<DecoderRun> DecoderRun::open(const fs::path& run_dir, const RunFile& file, std::unique_ptr<DecoderTask> task) {
  const auto& model = task->sections().model;
  if (model.vocab_size <= 0) {
    fail("'", run_file_path(run_dir).string(), "': config.model.vocab_size is ", model.vocab_size,
         "; a run file holds the resolved vocabulary size");
  }
  model.validate();
  return std::unique_ptr<DecoderRun>(new DecoderRun(run_dir, std::move(task), file.tokenizer, file.tokenizer_sha256, /*resumed=*/true));
}

std::string DecoderRun::describe() const {
  const auto& m = sections().model;
  return str(task_->describe_data(), ", model ", m.num_layers, " layers x ", m.emb_features, " features, vocab ",
             m.vocab_size, sections().init.from.empty() ? std::string() : str(", from '", sections().init.from, "'"));
}

std::unique_ptr<data::Tokenizer> DecoderRun::tokenizer() const { return load_run_tokenizer(dir(), tokenizer_); }

data::PretrainedTokenizer DecoderRun::pretrained_tokenizer() const { return open_run_tokenizer(dir(), tokenizer_); }

nn::CausalTransformer DecoderRun::build_model() const {
  return nn::CausalTransformer(sections().model, nn::ParameterInit::none);
}

training::FitResult DecoderRun::train(std::FILE* out) {
  const auto& s = sections();
  // A fine-tuning run's first segment starts from init.from's weights; later segments from checkpoints.
  // A LoRA run's checkpoints hold only its adapters, so every segment starts from init.from's weights.
  const bool from_pretrained = !s.init.from.empty() && !training::latest_checkpoint(dir());
  nn::CausalTransformer model{nullptr};
  if (from_pretrained || s.lora.enabled()) {
    // start() loaded it once already for a fresh run
    model = initial_model_ ? under_run_config(initial_model_, s.model) : base_model();
    model->to(nn::parse_dtype(s.model.param_dtype));
  } else {
    model = build_model();
  }
  initial_model_ = nullptr;  // the trainer owns it from here
  std::int64_t frozen_bytes_freed = 0;
  if (s.lora.enabled()) {
    nn::add_lora(model, s.lora, s.trainer.seed, lora_target_names(s, model));
    frozen_bytes_freed = nn::store_frozen_weights_in_compute_dtype(model);  // exact: see nn/frozen_weights.h
    if (frozen_bytes_freed > 0) release_free_memory();  // the float32 copies' pages, not kept for the whole run
  }
  auto objective = task_->objective(model, context_);
  training::TrainerConfig trainer_config = s.trainer;
  if (trainer_config.flops_per_token == 0) trainer_config.flops_per_token = task_->flops_per_token();
  SplitBatches train_split = task_->batches(data::Split::train, context_);
  SplitBatches val_split = task_->batches(data::Split::val, context_);
  auto& train_rows = train_split.rows;
  auto& val_rows = val_split.rows;
  if (out) {
    std::vector<std::string> notes = task_->notes();
    notes.insert(notes.end(), train_split.notes.begin(), train_split.notes.end());
    notes.insert(notes.end(), val_split.notes.begin(), val_split.notes.end());
    for (const auto& note : notes) std::fprintf(out, "note: %s\n", note.c_str());
    if (!val_rows) std::fprintf(out, "note: no validation split (or it is shorter than one row); no validation\n");
    if (frozen_bytes_freed > 0) {
      std::fprintf(out, "note: the frozen base weights are kept in %s, the compute dtype (%.0f MiB less)\n",
                   s.model.dtype.c_str(), static_cast<double>(frozen_bytes_freed) / (1 << 20));
    }
  }
  training::Trainer trainer(*objective, s.optim, trainer_config, dir());
  trainer.set_output(out);
  if (from_pretrained) trainer.use_current_parameters();
  return trainer.fit(*train_rows, val_rows.get());
}

nn::CausalTransformer DecoderRun::base_model() const {
  nn::CausalTransformer model = under_run_config(load_model_source(context_.init_source(), {.device = "cpu"}).model, sections().model);
  model->to(nn::parse_dtype(sections().model.param_dtype));
  return model;
}

nn::CausalTransformer DecoderRun::load_model(bool live, std::optional<std::int64_t> step, const std::string& device,
                                             fs::path* loaded, bool merge_adapters) const {
  const auto& s = sections();
  const c10::Device target = device.empty() ? nn::resolve_device(s.trainer.device) : nn::resolve_device(device, "--device");
  const std::string source = run_file_path(dir()).string();
  check_model_memory(s.model, c10::Device(c10::kCPU), source);  // built on the CPU, then moved
  if (target.is_cuda()) check_model_memory(s.model, target, source);
  // A LoRA run's checkpoints hold its adapters: the base weights come from init.from.
  nn::CausalTransformer model = s.lora.enabled() ? base_model() : build_model();
  if (s.lora.enabled()) nn::add_lora(model, s.lora, s.trainer.seed, lora_target_names(s, model));
  fs::path used = training::load_checkpoint_weights(*model, checkpoint_to_load(dir(), step), /*use_ema=*/!live);
  if (loaded) *loaded = used;
  if (s.lora.enabled() && merge_adapters) nn::merge_lora(model);  // one matrix per projection again: generation's speed
  model->to(target);
  model->eval();
  return model;
}

objectives::Statistics DecoderRun::evaluate(const EvalOptions& options, fs::path* loaded) {
  check_data_tokenizer(dir(), tokenizer_, tokenizer_sha256_, *task_);
  auto val = task_->batches(data::Split::val, context_).rows;
  if (!val) {
    fail("run '", dir().string(), "' has no validation data to evaluate: the ", task_->describe_data(),
         " has no validation split or it is shorter than one row; give the data a larger validation fraction");
  }
  // A LoRA run is evaluated with its adapters apart, as it trained: DPO's and GRPO's reference is then the
  // base under them (nn::AdaptersOff), not a second copy.
  auto model = load_model(options.live, options.step, options.device, loaded, /*merge_adapters=*/false);
  const auto where = model->parameters().front().device();
  auto objective = task_->objective(model, context_);
  return training::evaluate_objective(*objective, *val, sections().trainer.batch_size, options.max_batches, where);
}


LoadedModel DecoderRun::load_decoder(const ModelLoadOptions& options) const {
  LoadedModel out;
  fs::path checkpoint;
  out.model = load_model(options.live, options.step, options.device, &checkpoint);
  out.tokenizer = pretrained_tokenizer();
  out.kind = ModelSourceKind::run;
  const auto& s = sections();
  // A run keeps the family it started from, except a masked-diffusion run made from an autoregressive model,
  // which that family cannot express (it exports as llada or dream, by its shape).
  const bool family_fits = s.model.causal || s.init.model_type == "llada" || s.init.model_type == "dream" ||
                           s.init.model_type == "Dream";
  out.model_type = s.init.model_type.empty() || !family_fits ? interop::hf_model_type_for(s.model) : s.init.model_type;
  const bool ema = !options.live && s.trainer.ema_decay > 0;
  out.description = str(kind(), " run '", dir().string(), "' checkpoint '", checkpoint.string(), "' (", ema ? "EMA" : "live",
                        " weights)");
  return out;
}

LoraAdapters DecoderRun::lora_adapters(const ModelLoadOptions& options) const {
  const auto& s = sections();
  if (!s.lora.enabled()) {
    fail("--format peft writes a LoRA run's adapters, but run '", dir().string(), "' trained every weight (lora.rank = 0); "
         "export it with --format hf or gguf");
  }
  LoraAdapters out;
  out.model = load_model(options.live, options.step, "cpu", &out.checkpoint, /*merge_adapters=*/false);
  out.lora = s.lora;
  out.base = s.init.from;
  out.model_type = s.init.model_type;
  return out;
}

}  // namespace dew::runs
