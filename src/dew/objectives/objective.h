#pragma once
// The seam every training task hangs on (LM, SFT, DPO, GRPO, masked diffusion, image diffusion, JEPA):
// an Objective owns its model, turns a batch into a loss, and evaluates. The Trainer owns everything else
// (optimizer, schedule, precision, EMA, accumulation, checkpoints, logging).
//
// Losses are sums with their counts: the trainer backpropagates each micro-batch's sum and divides the
// accumulated gradient by the total count, so accumulated and distributed steps equal one step
// on the concatenated batch exactly.
#include <torch/nn/module.h>

#include <map>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "dew/data/batch.h"
#include "dew/objectives/statistics.h"

namespace dew::objectives {

struct Loss {
  at::Tensor sum;    // fp32 scalar, differentiable: the sum of per-token (per-example) losses
  double count = 0;  // how many terms are in the sum (the weight the loss is averaged by)
  Statistics metrics;  // additive training metrics for this batch (ce, token_accuracy, ...)
};

class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::string name() const = 0;
  // Makes the variables: initialises the model's parameters from `seed`.
  virtual void init(std::uint64_t seed) = 0;
  // The module whose parameters are trained (and checkpointed, and EMA-averaged).
  virtual torch::nn::Module& module() = 0;
  virtual Loss loss(const data::Batch& batch, std::int64_t step) = 0;
  // Additive statistics over one evaluation batch, with the weights currently in module(); no gradients.
  virtual Statistics evaluate(const data::Batch& batch) = 0;
  // Everything needed to rebuild this objective (and its model) in run.json.
  virtual nlohmann::ordered_json config_json() const = 0;
  // The evaluate() statistic that measures what the training loss measures (plotted beside it), or "" when
  // evaluation reports no such thing.
  virtual std::string validation_loss() const { return "loss"; }
  // What Loss::count counts ("tokens", "images", "pairs"): the trainer reports "<unit>_per_second".
  virtual std::string count_unit() const { return "tokens"; }
  // Whether each counted unit costs a fixed number of FLOPs (trainer.flops_per_token), so that the trainer can
  // report MFU from the rate. Not so for DPO's pairs, whose lengths vary: no MFU is reported then.
  virtual bool fixed_flops_per_count() const { return true; }

  // Called by the trainer after each optimizer step (and the trainer's EMA), with the 0-based index of the
  // step just taken and the total: where an objective updates weights outside the optimizer (JEPA's target
  // encoder, an EMA of the context encoder). Not called for evaluation.
  virtual void after_step(std::int64_t step, std::int64_t total_steps) {
    (void)step;
    (void)total_steps;
  }

  // State beyond the module's parameters that a resumed run needs to continue exactly as an uninterrupted
  // one (GRPO's cached rollout between its optimisation passes). The trainer saves a non-empty map with
  // every checkpoint (RUN/<step>/objective.safetensors) and hands it back to load_state() on resume, on the
  // CPU, as tensors the objective may keep; a checkpoint without the file restores an empty map.
  virtual std::map<std::string, at::Tensor> state() const { return {}; }
  virtual void load_state(const std::map<std::string, at::Tensor>& state) { (void)state; }
};

}  // namespace dew::objectives
