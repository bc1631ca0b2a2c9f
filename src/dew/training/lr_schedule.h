#pragma once
// The learning rate of each step: linear warmup, then constant, cosine or linear decay to
// final_lr_fraction * learning_rate at the run's last step.
#include <cstdint>

#include "dew/training/optim_config.h"

namespace dew::training {

// The rate for update number `step` (0-based) of a run of `total_steps` updates:
//   warmup (step < warmup_steps):  learning_rate * (step + 1) / warmup_steps  (never 0: every step moves)
//   then, with t = (step - warmup_steps) / max(1, total_steps - warmup_steps - 1) in [0, 1]:
//     constant: learning_rate
//     cosine:   learning_rate * (f + (1 - f) * (1 + cos(pi * t)) / 2)
//     linear:   learning_rate * (f + (1 - f) * (1 - t))
//   so the first step after warmup runs at the peak and the last at f * learning_rate (f = final_lr_fraction).
double learning_rate_at(const OptimConfig& config, std::int64_t step, std::int64_t total_steps);

}  // namespace dew::training
