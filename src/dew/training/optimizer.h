#pragma once
// Optimizers over a module's named parameters: AdamW (decoupled decay), Adam (L2 decay) and SGD with
// momentum, with the arithmetic of torch.optim's single-tensor/foreach paths, so 10 steps match PyTorch
// to float rounding. Adam's update of float32 CPU parameters is one fused parallel pass over all of them
// (nn/multi_tensor.h); other devices and dtypes take ATen's _foreach_ ops. Weight decay applies to matrices only (>= 2-D); norms, biases and other vectors are
// spared.
//
// State is a flat map of named tensors, "exp_avg/<param>", "exp_avg_sq/<param>", "momentum/<param>" and
// "step", saved as one safetensors file in a checkpoint; load_state refuses a missing or mis-shaped
// tensor by name.
#include <ATen/ATen.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dew/training/optim_config.h"

namespace dew::training {

using NamedTensors = std::map<std::string, at::Tensor>;

// Whether weight decay applies to a parameter: matrices and higher-rank tensors only.
inline bool decays(const at::Tensor& parameter) { return parameter.dim() >= 2; }

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient, at learning rate `lr`, reading each gradient as
  // grad * grad_scale (the trainer folds its division by the step's count and the clipping coefficient in
  // here: one pass over the gradients instead of three). Gradients may be scaled in place.
  virtual void step(double lr, double grad_scale = 1.0) = 0;
  // Updates taken so far (restored from a checkpoint by load_state).
  std::int64_t steps() const { return steps_; }

  NamedTensors state() const;
  // Copies `state` (as written by state()) into this optimizer. `source` names where it came from (a
  // file) for errors: a missing tensor, a shape or a dtype that disagrees is refused by name.
  void load_state(const NamedTensors& state, const std::string& source);

 protected:
  Optimizer(std::vector<std::string> names, std::vector<at::Tensor> params);
  // Registers a per-parameter buffer (zeros like the parameter) under "<kind>/<param>".
  std::vector<at::Tensor>& add_buffer(const std::string& kind);

  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  std::int64_t steps_ = 0;

 private:
  // A deque: add_buffer hands out references that later add_buffer calls must not invalidate.
  std::deque<std::pair<std::string, std::vector<at::Tensor>>> buffers_;
};

// The optimizer `config.name` names, over `params` (name -> parameter tensor, on any device).
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config, const NamedTensors& params);

}  // namespace dew::training
