#pragma once
// Next-token prediction on rows of seq_len + 1 ids: the model reads the first seq_len and is scored on
// the next seq_len. Targets are weighted out where they are padding (segment 0), where they cross a
// document boundary in a packed row (segment changes), and, when loss_role is set, where the target's
// role is not the trained one (text_roles; what SFT uses to train only on assistant tokens).
#include "dew/nn/causal_transformer.h"
#include "dew/objectives/objective.h"

namespace dew::objectives {

// How targets are scored (the `lm.*` section of a run's config).
struct LMLossConfig {
  std::int64_t loss_role = -1;          // -1 = every role
  bool token_accuracy = true;
  std::int64_t loss_chunk_tokens = 1024;  // 0 = whole batch at once; N = logits N tokens at a time

  template <class V>
  void fields(V& v) {
    v("loss_role", loss_role, "train only on targets whose text_roles equals this; -1 = all");
    v("token_accuracy", token_accuracy, "also report the fraction of targets predicted exactly");
    v("loss_chunk_tokens", loss_chunk_tokens, "compute logits this many tokens at a time (bounds memory); 0 = all");
  }
};

struct LMObjectiveConfig {
  std::int64_t seq_len = 256;  // a run sets it from data.seq_len
  LMLossConfig loss;

  template <class V>
  void fields(V& v) {
    v("seq_len", seq_len, "tokens the model reads per row (rows hold seq_len + 1 ids)");
    v("loss", loss);
  }
};

class LMObjective final : public Objective {
 public:
  LMObjective(nn::CausalTransformer model, LMObjectiveConfig config);

  std::string name() const override { return "lm"; }
  std::string validation_loss() const override { return "ce"; }  // the loss is the mean cross entropy
  void init(std::uint64_t seed) override { model_->init_parameters(seed); }
  torch::nn::Module& module() override { return *model_; }
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;

  nn::CausalTransformer& model() { return model_; }
  const LMObjectiveConfig& config() const { return config_; }

 private:
  Loss compute(const data::Batch& batch);
  nn::CausalTransformer model_;
  LMObjectiveConfig config_;
};

}  // namespace dew::objectives
