#pragma once
// `dew train grpo --data PROMPTS.jsonl --init-from MODEL --out RUN (--reward NAME | --reward-cmd CMD)`:
// Group Relative Policy Optimization on a prompt JSONL file (data/chat/chat_records.h: {"prompt": ...,
// "ground_truth": ...}), starting from a trained model. A row of the run-kind table (run_kind.h).
//
// Each step rolls out grpo.group_size completions of trainer.batch_size prompts (objectives/grpo_objective.h)
// and optimises them over grpo.epochs steps. The prompts are text: the run tokenizes them with the model's
// tokenizer (its chat template for message lists), so there is no data tokenizer to compare.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/data/chat/chat_records.h"
#include "dew/objectives/grpo_objective.h"
#include "dew/runs/decoder_kind.h"
#include "dew/runs/decoder_sections.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

struct GrpoDataConfig {
  std::string path;           // a prompt JSONL file
  double val_fraction = -1;   // head of the file held out for validation; < 0 = 0.1 from ten prompts on, else 0
  std::int64_t prefetch = 0;  // batches prepared ahead on a background thread; 0 = none (a batch is a few indices)

  template <class V>
  void fields(V& v) {
    v("path", path, "prompt JSONL: {\"prompt\": text or messages, \"ground_truth\": ...} per line (--data sets it)");
    v("val_fraction", val_fraction,
      "fraction of the prompts (the file's head) held out for validation; negative = 0.1 from 10 prompts on, else none");
    v("prefetch", prefetch, "batches prepared ahead on a background thread; 0 = none");
  }
};

struct GrpoRunConfig : DecoderSections {
  GrpoDataConfig data;
  objectives::GrpoObjectiveConfig grpo;

  GrpoRunConfig() { apply_kind_defaults(*this, "grpo"); }  // configs/kinds/grpo.json


  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("data", data);
      v("grpo", grpo);
    });
  }
  void validate_settings() const {
    DecoderSections::validate_settings();
    grpo.validate();
  }
};

class GrpoTask final : public TypedDecoderTask<GrpoRunConfig> {
 public:
  using TypedDecoderTask::TypedDecoderTask;
  const char* kind() const override { return "grpo"; }
  // The longest prompt plus grpo.max_new_tokens (known once check_data has read the prompts).
  std::int64_t seq_len() const override;
  std::int64_t loss_chunk_tokens() const override { return config_.grpo.loss_chunk_tokens; }
  std::string validation_loss() const override { return "reward"; }
  std::string validation_unit() const override { return "prompts"; }
  // Reads every line (errors name the line and the field), checks the rewards and the grpo settings, and
  // encodes every prompt with init.from's tokenizer: a prompt that leaves no room for grpo.max_new_tokens
  // within model.max_seq_len is refused by its line.
  void check_data(const RunContext& run) override;
  std::string data_tokenizer_sha256() const override { return ""; }
  std::string data_tokenizer_name() const override { return "text"; }
  std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const override;
  std::unique_ptr<objectives::Objective> objective(nn::CausalTransformer model, const RunContext& run) const override;
  // Training: PromptRows served grpo.epochs steps in a row (RepeatedBatches, a block = trainer.grad_accum
  // micro-batches); validation: the head of the file, in order (nullptr when it is empty).
  SplitBatches batches(data::Split split, const RunContext& run) const override;
  std::string describe_data() const override;

 private:
  const std::vector<data::PromptRecord>& records() const;
  mutable std::optional<std::vector<data::PromptRecord>> records_;
  std::int64_t longest_prompt_ = -1;
};

std::unique_ptr<RunKind> make_grpo_kind();

}  // namespace dew::runs
