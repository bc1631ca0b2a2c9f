#pragma once
// An exponential moving average of the trained parameters, kept in fp32:
//   ema = d * ema + (1 - d) * param   after every optimizer step,
// with d = decay, or with warmup d = min(decay, (1 + n) / (10 + n)) at the update that follows n earlier ones
// (the ramp of diffusers' EMAModel and Keras): a constant 0.999 would keep ~e^-1 of the random initial
// weights after 1000 steps, so a short run's average would still be mostly noise.
// Evaluation and generation read the average: swap_in() puts it into the module's parameters (keeping the
// live values aside) and swap_out() puts the live values back. Decay 0 means off (no copy is kept).
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

namespace dew::training {

class Ema {
 public:
  // Starts the average at the current values of `params` (name -> parameter).
  Ema(double decay, const std::map<std::string, at::Tensor>& params, bool warmup = false);

  bool enabled() const { return decay_ > 0; }
  double decay() const { return decay_; }
  // `updates_before`: how many updates the average has had (the trainer's step index), for the warmup.
  void update(std::int64_t updates_before);
  double decay_at(std::int64_t updates_before) const;

  // The average as named fp32 tensors (the parameter names), for checkpoints.
  const std::map<std::string, at::Tensor>& state() const { return average_; }
  // Copies a saved average in; refuses a missing or mis-shaped tensor by name (source names the file).
  void load_state(const std::map<std::string, at::Tensor>& state, const std::string& source);
  // Restarts the average at the parameters' current values.
  void reset();

  void swap_in();
  void swap_out();

 private:
  double decay_;
  bool warmup_;
  std::map<std::string, at::Tensor> params_, average_, live_;
};

// Puts the EMA weights into the parameters for a scope (no-op when the EMA is off or null).
class EmaScope {
 public:
  explicit EmaScope(Ema* ema) : ema_(ema && ema->enabled() ? ema : nullptr) {
    if (ema_) ema_->swap_in();
  }
  ~EmaScope() {
    if (ema_) ema_->swap_out();
  }
  EmaScope(const EmaScope&) = delete;
  EmaScope& operator=(const EmaScope&) = delete;

 private:
  Ema* ema_;
};

}  // namespace dew::training
