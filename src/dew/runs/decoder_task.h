#pragma once
// What one decoder kind (lm, sft, dpo, grpo, mdlm) adds to the life cycle every decoder run shares
// (decoder_run.h): its config beyond the shared sections, its data, its objective. The shared part handles
// the run directory, run.json, resuming, fine-tuning from init.from, the tokenizer, checkpoints, devices and
// memory checks, and evaluation; a task only answers the questions below.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dew/core/config.h"
#include "dew/data/batch_source.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/nn/causal_transformer.h"
#include "dew/objectives/objective.h"
#include "dew/runs/decoder_sections.h"
#include "dew/runs/model_source.h"

namespace dew::runs {

// The run a task works for: its directory, the tokenizer its data is read with (loaded on first use) and
// the model it starts from, init.from, resolved once per command (model_source.h): DecoderRun::start
// hands over the source it resolved, otherwise it is resolved on first use. Tasks load init.from (a
// reference model, a LoRA run's base) from this value, never from the path again.
//
// The tokenizer: during DecoderRun::start's data checks, a fresh fine-tuning run's init.from tokenizer or a
// resumed run's own copy; afterwards the run's copy, the one run.json names (with the chat template when the
// run has one).
class RunContext {
 public:
  RunContext(std::filesystem::path dir, std::function<data::PretrainedTokenizer()> load, std::string init_from = "")
      : dir_(std::move(dir)), load_(std::move(load)), init_from_(std::move(init_from)) {}
  const std::filesystem::path& dir() const { return dir_; }
  const data::PretrainedTokenizer& tokenizer() const {
    if (!tokenizer_) tokenizer_ = std::make_shared<data::PretrainedTokenizer>(load_());
    return *tokenizer_;
  }
  // init.from as resolved once; an error when the run has none.
  const ModelSource& init_source() const;
  // What the caller resolved or loaded already, so that nothing is read twice.
  void use_init_source(ModelSource source) { init_source_ = std::make_shared<ModelSource>(std::move(source)); }
  void use_tokenizer(data::PretrainedTokenizer tokenizer) {
    tokenizer_ = std::make_shared<data::PretrainedTokenizer>(std::move(tokenizer));
  }

 private:
  std::filesystem::path dir_;
  std::function<data::PretrainedTokenizer()> load_;
  std::string init_from_;
  // Caches of what is read on first use, shared by the context's copies.
  mutable std::shared_ptr<data::PretrainedTokenizer> tokenizer_;
  mutable std::shared_ptr<ModelSource> init_source_;
};

// One split's batches and the notes their making left (DecoderTask::batches).
struct SplitBatches {
  std::unique_ptr<data::BatchSource> rows;
  std::vector<std::string> notes;
};

class DecoderTask {
 public:
  virtual ~DecoderTask() = default;
  virtual const char* kind() const = 0;
  virtual DecoderSections& sections() = 0;
  const DecoderSections& sections() const { return const_cast<DecoderTask*>(this)->sections(); }
  // The whole config, as run.json stores it.
  virtual config::Json config_json() const = 0;
  // `stored` (a run.json config of this kind, perhaps written by an older dew) read into this kind's config
  // and written back, so that it compares field by field with config_json(). Errors name `source`.
  virtual config::Json canonical_config(const config::Json& stored, const std::string& source) const = 0;
  // The name of the evaluate() statistic that measures what the loss measures (an LM's "ce").
  virtual std::string validation_loss() const = 0;
  // What that statistic's count counts, plural ("tokens", "pairs").
  virtual std::string validation_unit() const { return "tokens"; }
  // The longest row of ids the model reads (memory estimate, FLOPs per token, model.max_seq_len check).
  virtual std::int64_t seq_len() const = 0;
  // Logits computed this many tokens at a time (0 = all); bounds the memory estimate.
  virtual std::int64_t loss_chunk_tokens() const { return 0; }
  // Whether the kind trains a masked-diffusion (bidirectional) decoder; every other kind refuses one.
  virtual bool masked_diffusion() const { return false; }
  // The kind's default model config (what a field the user did not set holds): fine-tuning refuses only
  // fields set away from it (decoder_run.cpp, adopt_model_config).
  virtual nn::CausalTransformerConfig default_model_config() const { return {}; }
  // Training FLOPs per token (for MFU), when trainer.flops_per_token is 0: the decoder's
  // (nn/decoder_flops.h) unless the objective does less (masked diffusion scores only masked positions).
  virtual double flops_per_token() const;

  // Checks the data settings and the data before anything is written; makes paths absolute; fills
  // model.vocab_size when it is 0 (a run from scratch takes its data's vocabulary). `run`'s tokenizer is the
  // one the data will be read with (a run from scratch has none yet: its data's is copied later).
  virtual void check_data(const RunContext& run) = 0;
  // The fingerprint of the tokenizer the data was tokenized with (data/tokenizers/tokenizer_fingerprint.h),
  // or "" when the data is text that the run tokenizes itself with the run's tokenizer.
  virtual std::string data_tokenizer_sha256() const = 0;
  // What the data says it was tokenized with, for errors: "'gpt2' (vocabulary 50257)".
  virtual std::string data_tokenizer_name() const = 0;
  // A fresh run without init.from: copies the data's tokenizer into `run_dir` and returns run.json's
  // tokenizer spec. Kinds whose data is text refuse (they need a model's tokenizer: --init-from).
  virtual std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const = 0;
  // A fresh run, once run_dir and its tokenizer exist and before run.json is written: prepare what the run
  // keeps from its data (SFT on JSONL tokenizes it into the run). Failing here leaves no run behind.
  virtual void prepare(const RunContext&) {}

  // The objective over `model` (whose parameters the trainer trains).
  virtual std::unique_ptr<objectives::Objective> objective(nn::CausalTransformer model, const RunContext& run) const = 0;
  // Batches of one split, with what making them did that the user should know (conversations truncated,
  // pairs dropped, ...; `dew train` prints them); rows is null when the split has nothing to evaluate (a
  // tiny or absent validation split).
  virtual SplitBatches batches(data::Split split, const RunContext& run) const = 0;
  // What prepare() did that the user should know (SFT tokenizing its JSONL into the run).
  virtual std::vector<std::string> notes() const { return {}; }
  // "data '...' (packed rows of 256 tokens)" for the first line of `dew train`.
  virtual std::string describe_data() const = 0;
};

}  // namespace dew::runs
