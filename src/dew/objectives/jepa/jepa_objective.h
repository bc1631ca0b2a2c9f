#pragma once
// I-JEPA as an Objective (Assran et al. 2023): a context encoder sees the context patches of an image, a
// predictor predicts the target encoder's features at the target patches (multiblock_mask.h), and the loss
// is smooth-L1 (or L2) between prediction and the target features, layer-normed over features as I-JEPA
// does, averaged over the predicted patches. The target encoder gets no gradient: after each optimizer step
// (Objective::after_step) it moves toward the context encoder,
//   target = m target + (1 - m) context,  m = momentum_start + (momentum_end - momentum_start) min(1, step / S),
// S = jepa.momentum_steps, or trainer.steps when 0.
// It is not in module() (the optimizer and the trainer's EMA do not see it); state() hands it to checkpoints
// so a resumed run continues with it. Masks come from a generator seeded by (trainer seed, step, micro-batch),
// so a resumed run draws the same masks.
//
// Metrics: "loss", "target_std" (the target features' standard deviation across the batch, averaged over
// features: near 0 means collapse) and "effective_rank" (exp of the entropy of the normalised singular values
// of the batch's mean-pooled target features: how many directions they use).
#include <cstdint>
#include <map>
#include <string>

#include "dew/nn/vision/vision_transformer.h"
#include "dew/objectives/jepa/multiblock_mask.h"
#include "dew/objectives/micro_batch_index.h"
#include "dew/objectives/objective.h"

namespace dew::objectives::jepa {

struct JepaObjectiveConfig {
  MultiBlockMaskConfig masks;
  std::string loss = "smooth_l1";  // smooth_l1 | l2
  double momentum_start = 0.996, momentum_end = 1.0;
  // Steps the ramp takes (the spec's momentum_steps); 0 = trainer.steps. Fix it to extend a run later
  // without changing the ramp (as optim.decay_steps does for the learning rate).
  std::int64_t momentum_steps = 0;

  template <class V>
  void fields(V& v) {
    v("num_targets", masks.num_targets, "target blocks per image (I-JEPA's npred)");
    v("target_scale_min", masks.target_scale.first, "smallest share of the patch grid a target block covers");
    v("target_scale_max", masks.target_scale.second, "largest share of the patch grid a target block covers");
    v("aspect_min", masks.aspect.first, "smallest height/width of a target block");
    v("aspect_max", masks.aspect.second, "largest height/width of a target block");
    v("context_scale_min", masks.context_scale.first, "smallest share of the grid the context block covers (before the targets are removed)");
    v("context_scale_max", masks.context_scale.second, "largest share of the grid the context block covers");
    v("min_keep", masks.min_keep, "a context block keeps more than this many patches");
    v("allow_overlap", masks.allow_overlap, "let the context cover target blocks");
    v("loss", loss, "smooth_l1 or l2 between predicted and target features");
    v("momentum_start", momentum_start, "target encoder EMA momentum at step 0");
    v("momentum_end", momentum_end, "target encoder EMA momentum at the end of the ramp");
    v("momentum_steps", momentum_steps, "steps of the momentum ramp; 0 = trainer.steps");
  }
  void validate() const;  // names jepa.<field> and the value
};

// The trained networks: what module() returns, checkpointed under "encoder." and "predictor.".
class JepaNetworksImpl : public torch::nn::Module {
 public:
  explicit JepaNetworksImpl(const nn::vision::VisionTransformerConfig& config);
  const nn::vision::VisionTransformerConfig& config() const { return encoder->config(); }
  nn::vision::VisionTransformer encoder{nullptr};
  nn::vision::JepaPredictor predictor{nullptr};
};
TORCH_MODULE(JepaNetworks);

class JepaObjective final : public Objective {
 public:
  JepaObjective(nn::vision::VisionTransformerConfig model, JepaObjectiveConfig config, std::uint64_t seed);
  // Trains the given networks (a run's model, built before the objective).
  JepaObjective(JepaNetworks networks, JepaObjectiveConfig config, std::uint64_t seed);

  std::string name() const override { return "jepa"; }
  std::string count_unit() const override { return "images"; }
  void init(std::uint64_t seed) override;
  torch::nn::Module& module() override { return *networks_; }
  // batch: "images" float [B, C, S, S]. The loss sums each image's mean over its predicted patches (count B).
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  Statistics evaluate(const data::Batch& batch) override;  // the same on one fixed mask stream
  nlohmann::ordered_json config_json() const override;
  void after_step(std::int64_t step, std::int64_t total_steps) override;
  std::map<std::string, at::Tensor> state() const override;  // "target.<parameter>"
  void load_state(const std::map<std::string, at::Tensor>& state) override;

  double momentum_at(std::int64_t step, std::int64_t total_steps) const;
  JepaNetworks& networks() { return networks_; }
  nn::vision::VisionTransformer& target_encoder() { return target_; }

 private:
  Loss compute(const data::Batch& batch, std::uint64_t mask_seed, bool metrics);

  nn::vision::VisionTransformerConfig model_config_;
  JepaObjectiveConfig config_;
  JepaNetworks networks_;
  nn::vision::VisionTransformer target_;
  std::uint64_t seed_;
  MicroBatchIndex micro_;
};

}  // namespace dew::objectives::jepa
