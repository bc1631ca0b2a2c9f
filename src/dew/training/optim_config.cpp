#include "dew/training/optim_config.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::training {

void OptimConfig::validate() const {
  if (name != "adamw" && name != "adam" && name != "sgd") {
    fail("optim.name is '", name, "'; use adamw, adam or sgd");
  }
  if (!(learning_rate >= 0) || !std::isfinite(learning_rate)) fail("optim.learning_rate must be >= 0, got ", learning_rate);
  if (!(beta1 >= 0 && beta1 < 1)) fail("optim.beta1 must be in [0, 1), got ", beta1);
  if (!(beta2 >= 0 && beta2 < 1)) fail("optim.beta2 must be in [0, 1), got ", beta2);
  if (!(eps > 0)) fail("optim.eps must be > 0, got ", eps);
  if (!(weight_decay >= 0)) fail("optim.weight_decay must be >= 0, got ", weight_decay);
  if (!(momentum >= 0 && momentum < 1)) fail("optim.momentum must be in [0, 1), got ", momentum);
  if (nesterov && momentum == 0) fail("optim.nesterov needs optim.momentum > 0");
  if (!(grad_clip_norm >= 0)) fail("optim.grad_clip_norm must be >= 0 (0 = off), got ", grad_clip_norm);
  if (schedule != "constant" && schedule != "cosine" && schedule != "linear") {
    fail("optim.schedule is '", schedule, "'; use constant, cosine or linear");
  }
  if (warmup_steps < 0) fail("optim.warmup_steps must be >= 0, got ", warmup_steps);
  if (decay_steps < 0) fail("optim.decay_steps must be >= 0 (0 = trainer.steps), got ", decay_steps);
  if (!(final_lr_fraction >= 0 && final_lr_fraction <= 1)) {
    fail("optim.final_lr_fraction must be in [0, 1], got ", final_lr_fraction);
  }
}

}  // namespace dew::training
