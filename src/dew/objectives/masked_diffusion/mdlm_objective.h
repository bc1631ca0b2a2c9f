#pragma once
// Masked diffusion language modelling (MDLM: Sahoo et al. 2024, "Simple and Effective Masked Diffusion
// Language Models"). A row of exactly seq_len ids is corrupted by replacing each real token with the mask id
// with probability 1 - alpha(t), one time t per row; the bidirectional decoder (causal = false) reads the
// corrupted row and predicts the original tokens. The loss is the continuous-time negative ELBO: the cross
// entropy at the masked positions, under a distribution that gives the mask token no mass (MDLM's SUBS
// parameterisation), weighted by -alpha'(t) / (1 - alpha(t)), summed, and averaged over every real token
// of the batch (padding and packed rows' tails count for nothing). exp of that average is an upper bound on
// the model's perplexity, reported as perplexity_bound.
//
// Randomness: each micro-batch draws its times and masks from a CPU generator seeded by
// stream_seed(trainer seed, "mdlmmask", step, micro-batch), so a resumed run corrupts exactly as the
// uninterrupted one did; evaluation uses one fixed stream, so a validation number is a function of the
// weights alone.
#include <cstdint>
#include <string>

#include "dew/nn/causal_transformer.h"
#include "dew/processes/masking_schedule.h"
#include "dew/objectives/micro_batch_index.h"
#include "dew/objectives/objective.h"

namespace dew::objectives::masked_diffusion {

// The processes this objective trains against live below objectives and inference (processes/).
using processes::MaskingSchedule;

// The `mdlm.*` section of a run's config.
struct MDLMLossConfig {
  std::int64_t mask_id = -1;  // -1: the model's mask_token_id, or (a model trained from scratch) the data's vocab_size
  std::string schedule = "loglinear";
  double schedule_eps = 1e-3;          // loglinear: alpha(1) = eps, so no row is ever wholly masked
  std::string time_sampling = "antithetic";
  double time_eps = 1e-3;              // least training time: bounds the weight 1 / t at 1000
  std::int64_t loss_chunk_tokens = 1024;
  bool token_accuracy = true;

  template <class V>
  void fields(V& v) {
    v("mask_id", mask_id, "id of the mask token; -1 = the model's (from scratch: the data's vocab_size, one past its last id)");
    v("schedule", schedule, "masking schedule: loglinear (MDLM's) or cosine");
    v("schedule_eps", schedule_eps, "loglinear: alpha(t) = 1 - (1 - eps) t");
    v("time_sampling", time_sampling, "antithetic (one time per stratum of [time_eps, 1), MDLM's) or uniform");
    v("time_eps", time_eps, "least training time; the ELBO weight 1/t stays below 1/time_eps");
    v("loss_chunk_tokens", loss_chunk_tokens, "compute logits this many masked tokens at a time (bounds memory); 0 = all");
    v("token_accuracy", token_accuracy, "also report the fraction of masked tokens predicted exactly");
  }
  // Refuses values outside their ranges, naming the mdlm.* field.
  void validate() const;
  MaskingSchedule masking_schedule() const;
  // The expected share of a row masked in training: 1 - alpha(t) averaged over the training times (uniform on
  // [time_eps, 1], fine midpoint rule): ~0.5 for loglinear, ~0.64 for cosine. Only these positions go
  // through the output head, which is what a FLOP count needs.
  double expected_masked_fraction() const;
};

struct MDLMObjectiveConfig {
  std::int64_t seq_len = 128;  // a run sets it from data.seq_len
  MDLMLossConfig loss;

  template <class V>
  void fields(V& v) {
    v("seq_len", seq_len, "tokens the model reads per row (rows hold exactly seq_len ids)");
    v("loss", loss);
  }
};

// One corruption of a batch: t [B] float32 per row, is_masked [B, S] bool (only real tokens are masked).
struct Corruption {
  at::Tensor t, is_masked;
};

// Draws a corruption of `rows` x `seq_len` ids where `real` [B, S] bool is true, from a CPU generator seeded
// with `seed`.
Corruption draw_corruption(const at::Tensor& real, const MDLMLossConfig& config, std::uint64_t seed);

class MaskedDiffusionObjective final : public Objective {
 public:
  // The model must be bidirectional (model.causal = false) with model.mask_token_id set; refused otherwise.
  MaskedDiffusionObjective(nn::CausalTransformer model, MDLMObjectiveConfig config, std::uint64_t seed);

  std::string name() const override { return "mdlm"; }
  std::string validation_loss() const override { return "nelbo"; }
  void init(std::uint64_t seed) override { model_->init_parameters(seed); }
  torch::nn::Module& module() override { return *model_; }
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;

  // The loss of `batch` under a given corruption (what loss() computes after drawing one); for tests.
  Loss loss_under(const data::Batch& batch, const Corruption& corruption);
  // The rows of `batch` that hold text: segment ids != 0 where the batch has them.
  static at::Tensor real_tokens(const data::Batch& batch);

  nn::CausalTransformer& model() { return model_; }
  const MDLMObjectiveConfig& config() const { return config_; }

 private:
  nn::CausalTransformer model_;
  MDLMObjectiveConfig config_;
  MaskingSchedule schedule_;
  std::uint64_t seed_;
  MicroBatchIndex micro_;
};

// Training FLOPs per token of the decoder under this objective (for MFU): nn::decoder_flops_per_token less the
// output head for the positions left unmasked, at config.expected_masked_fraction().
double mdlm_flops_per_token(const nn::CausalTransformerConfig& model, std::int64_t seq_len, const MDLMLossConfig& config);

// The seed of micro-batch `micro` of step `step`'s corruption stream.
std::uint64_t corruption_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro);

}  // namespace dew::objectives::masked_diffusion
