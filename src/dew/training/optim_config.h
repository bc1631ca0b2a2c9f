#pragma once
// How parameters are updated: the optimizer, its hyper-parameters, gradient clipping and the learning-rate
// schedule. The `optim.*` section of a run's config.
#include <cstdint>
#include <string>

namespace dew::training {

struct OptimConfig {
  std::string name = "adamw";   // adamw | adam | sgd
  double learning_rate = 3e-4;  // the peak rate (after warmup)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to matrices only (>= 2-D): norms, biases and other vectors are spared
  double momentum = 0.9;      // sgd only
  bool nesterov = false;      // sgd only
  double grad_clip_norm = 1.0;  // clip the global gradient norm to this; 0 = off
  std::string schedule = "cosine";  // constant | cosine | linear
  std::int64_t warmup_steps = 0;
  double final_lr_fraction = 0.1;  // cosine/linear decay ends at final_lr_fraction * learning_rate
  // The schedule's length in steps; 0 = trainer.steps. Fixed at a run's start (optim.* cannot change on
  // resume), so extending trainer.steps later continues at the final rate instead of stretching the decay.
  std::int64_t decay_steps = 0;

  template <class V>
  void fields(V& v) {
    v("name", name, "adamw, adam or sgd (with momentum)");
    v("learning_rate", learning_rate, "peak learning rate (reached after warmup_steps)");
    v("beta1", beta1, "adam/adamw first-moment decay");
    v("beta2", beta2, "adam/adamw second-moment decay");
    v("eps", eps, "adam/adamw denominator epsilon");
    v("weight_decay", weight_decay, "decoupled (adamw) or L2 (adam, sgd) decay, on matrices only");
    v("momentum", momentum, "sgd momentum; 0 = plain sgd");
    v("nesterov", nesterov, "sgd Nesterov momentum");
    v("grad_clip_norm", grad_clip_norm, "clip the global gradient norm to this; 0 = off");
    v("schedule", schedule, "constant, cosine or linear (decay after warmup over the run's steps)");
    v("warmup_steps", warmup_steps, "steps of linear warmup from learning_rate / warmup_steps");
    v("final_lr_fraction", final_lr_fraction, "the decay ends at this fraction of learning_rate");
    v("decay_steps", decay_steps, "the schedule's length in steps, warmup included; 0 = trainer.steps");
  }

  // Refuses unknown names and out-of-range values, naming the optim.* field.
  void validate() const;
  // The schedule's length for a run of `total_steps` (decay_steps, or total_steps when 0).
  std::int64_t schedule_steps(std::int64_t total_steps) const { return decay_steps > 0 ? decay_steps : total_steps; }
};

}  // namespace dew::training
