#include "dew/runs/kinds/grpo_kind.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/data/chat/chat_render.h"
#include "dew/data/prefetcher.h"
#include "dew/data/prompt_rows.h"
#include "dew/data/repeated_batches.h"
#include "dew/nn/dtype.h"
#include "dew/nn/lora.h"
#include "dew/objectives/rewards/reward_spec.h"
#include "dew/runs/data_file.h"
#include "dew/runs/engine_rollouts.h"
#include "dew/runs/loader_shard.h"
#include "dew/runs/model_source.h"

namespace fs = std::filesystem;

namespace dew::runs {

const std::vector<data::PromptRecord>& GrpoTask::records() const {
  if (!records_) records_ = data::read_prompt_jsonl(config_.data.path);
  return *records_;
}

std::int64_t GrpoTask::seq_len() const {
  if (longest_prompt_ < 0) return config_.model.max_seq_len;  // an opened run: bounded by the model
  return longest_prompt_ + config_.grpo.max_new_tokens;
}

void GrpoTask::check_data(const RunContext& run) {
  auto& d = config_.data;
  require_data_file(d.path, "PROMPTS.jsonl", ", one {\"prompt\": ...} object per line");
  if (d.prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", d.prefetch);
  config_.grpo.validate();
  if (config_.trainer.parallel == "fsdp") {
    // Each process samples its own rollouts, of lengths of their own, through the model: with sharded weights
    // every token would be a collective that the other processes may not make.
    fail("trainer.parallel = fsdp cannot train GRPO (each process generates its own rollouts through the sharded "
         "model); use trainer.parallel = ddp");
  }
  records_.reset();
  const auto& prompts = records();
  const auto total = static_cast<std::int64_t>(prompts.size());
  const std::int64_t train_prompts = total - data::prompt_val_count(total, d.val_fraction);
  const auto& s = config_;
  // Each micro-batch takes distinct prompts from one epoch of the training split (RecordSchedule).
  const std::int64_t rows = s.trainer.grad_accum >= 1 ? s.trainer.batch_size / s.trainer.grad_accum : s.trainer.batch_size;
  if (rows > train_prompts) {
    fail("trainer.batch_size = ", s.trainer.batch_size, " prompts per step", s.trainer.grad_accum > 1 ? " (per micro-batch: " + std::to_string(rows) + ")" : "",
         " is more than the ", train_prompts, " training prompts in '", d.path, "'; lower trainer.batch_size or add prompts");
  }
  if (s.init.from.empty()) {
    fail("`dew train grpo` samples from a trained model: pass --init-from MODEL (its tokenizer encodes the prompts)");
  }
  // The prompts as the model will read them, with the model's tokenizer and chat template: init.from's, from
  // the source DecoderRun::start resolved (the run keeps a copy, which encodes them again when training starts).
  const data::PretrainedTokenizer& tokenizer = run.tokenizer();
  const std::int64_t room = s.model.max_seq_len;
  longest_prompt_ = 0;
  for (const auto& record : prompts) {
    const std::vector<data::TokenId> ids = data::encode_prompt(tokenizer, record.prompt);
    const auto n = static_cast<std::int64_t>(ids.size());
    if (n == 0) fail(d.path, ":", record.line, ": field 'prompt' encodes to no tokens; give the model something to continue");
    if (n + s.grpo.max_new_tokens > room) {
      fail(d.path, ":", record.line, ": field 'prompt' is ", n, " tokens, which with grpo.max_new_tokens = ",
           s.grpo.max_new_tokens, " exceeds model.max_seq_len = ", room, "; shorten the prompt or lower grpo.max_new_tokens",
           n < room ? str(" to at most ", room - n) : std::string());
    }
    longest_prompt_ = std::max(longest_prompt_, n);
  }
}

std::string GrpoTask::copy_data_tokenizer(const fs::path&) const {
  fail("`dew train grpo` reads text prompts and needs a model to sample from: pass --init-from MODEL (its tokenizer "
       "encodes the prompts)");
}

std::unique_ptr<objectives::Objective> GrpoTask::objective(nn::CausalTransformer model, const RunContext& run) const {
  const auto& s = config_;
  const data::PretrainedTokenizer& tokenizer = run.tokenizer();
  objectives::GrpoSetup setup;
  setup.policy = std::move(model);
  setup.rollout = engine_rollouts();
  setup.tokenizer = tokenizer.tokenizer.get();
  for (auto id : tokenizer.stop_ids) setup.stop_ids.push_back(id);
  for (const auto& record : records()) {
    setup.prompts.push_back({data::encode_prompt(tokenizer, record.prompt), record.prompt, record.ground_truth,
                             record.data_source, record.extra_info});
  }
  setup.rewards = objectives::rewards::make_rewards(s.grpo.reward_specs(), s.grpo.reward_cmd, s.grpo.reward_timeout);
  setup.config = s.grpo;
  setup.seed = s.trainer.seed;
  if (s.grpo.beta > 0 && s.lora.enabled() && s.grpo.reference.empty() && nn::has_lora(*setup.policy)) {
    setup.reference_is_base = true;  // the adapters start at zero: their base is the initial model
  } else if (s.grpo.beta > 0) {
    // The frozen reference: grpo.reference, else the model the run started from (init.from, as the run
    // resolved it), in the run's parameter dtype like the policy. Loaded at the first rollout, so evaluation
    // never loads it.
    const std::string source = s.grpo.reference.empty() ? s.init.from : s.grpo.reference;
    std::optional<ModelSource> init;
    if (s.grpo.reference.empty() && !s.init.from.empty()) init = run.init_source();
    const std::string dtype = s.model.param_dtype;
    const nn::CausalTransformerConfig policy_config = s.model;
    setup.load_reference = [source, init, dtype, policy_config] {
      if (source.empty()) fail("grpo.beta > 0 needs a reference model: set grpo.reference=MODEL (or init.from)");
      nn::CausalTransformer reference = load_model_source(init ? *init : resolve_model_source(source), {.device = "cpu"}).model;
      const auto& rc = reference->config();
      if (rc.vocab_size != policy_config.vocab_size) {
        fail("grpo.reference '", source, "' has a vocabulary of ", rc.vocab_size, " but the policy's is ",
             policy_config.vocab_size, "; the KL penalty compares the same tokens: use a model with the policy's tokenizer");
      }
      reference->to(nn::parse_dtype(dtype));
      return reference;
    };
  }
  return std::make_unique<objectives::GrpoObjective>(std::move(setup));
}

SplitBatches GrpoTask::batches(data::Split split, const RunContext&) const {
  const auto& s = config_;
  const auto n = static_cast<std::int64_t>(records().size());
  const std::int64_t val = data::prompt_val_count(n, s.data.val_fraction);
  if (split == data::Split::val && val == 0) return {};
  std::unique_ptr<data::BatchSource> source =
      std::make_unique<data::PromptRows>(n, val, loader_options(split, s.trainer.seed));
  if (split == data::Split::val) return {std::move(source), {}};
  const std::int64_t rows = s.trainer.process_rows();
  if (s.data.prefetch > 0) source = std::make_unique<data::Prefetcher>(std::move(source), rows, static_cast<std::size_t>(s.data.prefetch));
  return {std::make_unique<data::RepeatedBatches>(std::move(source), s.grpo.epochs, s.trainer.grad_accum), {}};
}

std::string GrpoTask::describe_data() const {
  const auto& s = config_;
  return str("prompts in '", s.data.path, "' (", records().size(), " prompts, ", s.grpo.group_size, " completions each)");
}

std::unique_ptr<RunKind> make_grpo_kind() {
  return std::make_unique<DecoderKind<GrpoRunConfig, GrpoTask>>(
      "grpo", "Group Relative Policy Optimization of a trained model against rewards, on prompt JSONL",
      "prompt JSONL: {\"prompt\": text or messages, \"ground_truth\": ...} per line (sets data.path)",
      /*needs_init_from=*/true,
      std::vector<KindFlag>{{"--reward", "grpo.reward", str("built-in rewards, comma-separated: ", objectives::rewards::known_reward_specs())},
                            {"--reward-cmd", "grpo.reward_cmd",
                             "a shell command that scores each rollout batch: one JSON object per line on stdin, one number per line out"}});
}

}  // namespace dew::runs
