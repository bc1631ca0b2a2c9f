#include "dew/training/ema.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/nn/multi_tensor.h"

namespace dew::training {

Ema::Ema(double decay, const std::map<std::string, at::Tensor>& params, bool warmup) : decay_(decay), warmup_(warmup), params_(params) {
  if (!(decay >= 0 && decay < 1)) fail("trainer.ema_decay must be in [0, 1) (0 = off), got ", decay);
  reset();
}

void Ema::reset() {
  average_.clear();
  if (!enabled()) return;
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params_) average_[name] = p.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
}

double Ema::decay_at(std::int64_t updates_before) const {
  if (!warmup_) return decay_;
  const double n = static_cast<double>(std::max<std::int64_t>(updates_before, 0));
  return std::min(decay_, (1 + n) / (10 + n));
}

void Ema::update(std::int64_t updates_before) {
  if (!enabled()) return;
  const double decay = decay_at(updates_before);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> averages, sources;
  for (auto& [name, average] : average_) {
    const auto& p = params_.at(name);
    averages.push_back(average);
    sources.push_back(p.scalar_type() == at::kFloat ? p : p.to(at::kFloat));
  }
  nn::lerp_each(averages, sources, 1 - decay);  // one pass over all of them (nn/multi_tensor.h)
}

void Ema::load_state(const std::map<std::string, at::Tensor>& state, const std::string& source) {
  if (!enabled()) fail("'", source, "' holds an EMA copy but this run has trainer.ema_decay = 0");
  for (const auto& [name, average] : average_) {
    auto it = state.find(name);
    if (it == state.end()) fail("'", source, "' lacks EMA tensor '", name, "'; the checkpoint is incomplete");
    if (it->second.sizes() != average.sizes()) {
      fail("'", source, "' EMA tensor '", name, "' has shape ", it->second.sizes(), " but the parameter has ", average.sizes());
    }
  }
  for (const auto& [name, t] : state) {
    if (!average_.count(name)) fail("'", source, "' has EMA tensor '", name, "', which the model does not have");
  }
  at::NoGradGuard no_grad;
  for (auto& [name, average] : average_) average.copy_(state.at(name));
}

void Ema::swap_in() {
  if (!enabled()) return;
  if (!live_.empty()) fail("EMA weights are already swapped in");
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    live_[name] = p.detach().clone();
    p.copy_(average_.at(name));
  }
}

void Ema::swap_out() {
  if (!enabled() || live_.empty()) return;
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params_) p.copy_(live_.at(name));
  live_.clear();
}

}  // namespace dew::training
