#include "dew/training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dew::training {

double learning_rate_at(const OptimConfig& config, std::int64_t step, std::int64_t total_steps) {
  const double peak = config.learning_rate;
  if (step < config.warmup_steps) {
    return peak * static_cast<double>(step + 1) / static_cast<double>(config.warmup_steps);
  }
  if (config.schedule == "constant") return peak;
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - config.warmup_steps - 1));
  const double t = std::clamp(static_cast<double>(step - config.warmup_steps) / span, 0.0, 1.0);
  const double f = config.final_lr_fraction;
  const double shape = config.schedule == "cosine" ? (1 + std::cos(std::numbers::pi * t)) / 2 : 1 - t;
  return peak * (f + (1 - f) * shape);
}

}  // namespace dew::training
