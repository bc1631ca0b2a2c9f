#include "dew/training/optimizer.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "dew/core/error.h"
#include "dew/nn/kernels/adam.h"
#include "dew/nn/multi_tensor.h"

namespace dew::training {
namespace {

class AdamFamily final : public Optimizer {
 public:
  AdamFamily(const OptimConfig& config, bool decoupled, std::vector<std::string> names, std::vector<at::Tensor> params)
      : Optimizer(std::move(names), std::move(params)), config_(config), decoupled_(decoupled) {
    exp_avg_ = &add_buffer("exp_avg");
    exp_avg_sq_ = &add_buffer("exp_avg_sq");
  }

  void step(double lr, double grad_scale) override {
    at::NoGradGuard no_grad;
    ++steps_;
    const double beta1 = config_.beta1, beta2 = config_.beta2;
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(steps_));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(steps_));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    std::vector<at::Tensor> params, grads, m, v;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].grad().defined()) continue;
      params.push_back(params_[i]);
      grads.push_back(params_[i].grad());
      m.push_back((*exp_avg_)[i]);
      v.push_back((*exp_avg_sq_)[i]);
    }
    if (params.empty()) return;
    if (nn::multi_tensor_applies({&params, &grads, &m, &v})) {
      std::vector<nn::kernels::AdamConstants> constants;
      for (const auto& p : params) {
        const double wd = decays(p) ? config_.weight_decay : 0.0;
        constants.push_back({static_cast<float>(grad_scale), decoupled_ ? 0.0f : static_cast<float>(wd),
                             decoupled_ ? static_cast<float>(1 - lr * wd) : 1.0f, static_cast<float>(1 - beta1),
                             static_cast<float>(beta2), static_cast<float>(1 - beta2), static_cast<float>(bias_correction2_sqrt),
                             static_cast<float>(config_.eps), static_cast<float>(-step_size)});
      }
      nn::for_each_chunk(params, [&](std::size_t i, std::int64_t begin, std::int64_t end) {
        nn::kernels::adam_update(params[i].data_ptr<float>() + begin, grads[i].data_ptr<float>() + begin,
                                 m[i].data_ptr<float>() + begin, v[i].data_ptr<float>() + begin, end - begin, constants[i]);
      });
      return;
    }
    if (grad_scale != 1.0) at::_foreach_mul_(grads, grad_scale);
    for (bool decay : {true, false}) {
      std::vector<at::Tensor> group_params, group_grads, group_m, group_v;
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (decays(params[i]) != decay) continue;
        group_params.push_back(params[i]);
        group_grads.push_back(grads[i]);
        group_m.push_back(m[i]);
        group_v.push_back(v[i]);
      }
      if (group_params.empty()) continue;
      foreach_step(group_params, group_grads, group_m, group_v, decay ? config_.weight_decay : 0.0, lr, step_size, bias_correction2_sqrt);
    }
  }

 private:
  // ATen's _foreach_ ops for one group (CUDA, bf16 parameters, anything the fused pass does not take).
  void foreach_step(std::vector<at::Tensor>& params, std::vector<at::Tensor> grads, std::vector<at::Tensor>& m,
                    std::vector<at::Tensor>& v, double wd, double lr, double step_size, double bias_correction2_sqrt) {
    if (wd != 0) {
      if (decoupled_) {
        at::_foreach_mul_(params, 1 - lr * wd);  // AdamW: p *= 1 - lr * wd
      } else {
        grads = at::_foreach_add(grads, params, wd);  // Adam: g += wd * p
      }
    }
    at::_foreach_lerp_(m, grads, 1 - config_.beta1);
    at::_foreach_mul_(v, config_.beta2);
    at::_foreach_addcmul_(v, grads, grads, 1 - config_.beta2);
    auto denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, bias_correction2_sqrt);
    at::_foreach_add_(denom, config_.eps);
    at::_foreach_addcdiv_(params, m, denom, -step_size);
  }

  OptimConfig config_;
  bool decoupled_;
  std::vector<at::Tensor>* exp_avg_;
  std::vector<at::Tensor>* exp_avg_sq_;
};

// torch.optim.SGD with momentum and dampening 0: the buffer starts as the first gradient.
class Sgd final : public Optimizer {
 public:
  Sgd(const OptimConfig& config, std::vector<std::string> names, std::vector<at::Tensor> params)
      : Optimizer(std::move(names), std::move(params)), config_(config) {
    if (config_.momentum > 0) momentum_ = &add_buffer("momentum");
  }

  void step(double lr, double grad_scale) override {
    at::NoGradGuard no_grad;
    const bool first = steps_ == 0;
    ++steps_;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      if (!p.grad().defined()) continue;
      at::Tensor d = grad_scale != 1.0 ? p.grad().mul_(grad_scale) : p.grad();
      if (config_.weight_decay != 0 && decays(p)) d = d.add(p, config_.weight_decay);
      if (momentum_) {
        auto& buffer = (*momentum_)[i];
        if (first) {
          buffer.copy_(d);
        } else {
          buffer.mul_(config_.momentum).add_(d);
        }
        d = config_.nesterov ? d.add(buffer, config_.momentum) : buffer;
      }
      p.add_(d, -lr);
    }
  }

 private:
  OptimConfig config_;
  std::vector<at::Tensor>* momentum_ = nullptr;
};

}  // namespace

Optimizer::Optimizer(std::vector<std::string> names, std::vector<at::Tensor> params)
    : names_(std::move(names)), params_(std::move(params)) {}

std::vector<at::Tensor>& Optimizer::add_buffer(const std::string& kind) {
  std::vector<at::Tensor> tensors;
  for (const auto& p : params_) tensors.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
  buffers_.emplace_back(kind, std::move(tensors));
  return buffers_.back().second;
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  for (const auto& [kind, tensors] : buffers_) {
    for (std::size_t i = 0; i < names_.size(); ++i) out[kind + "/" + names_[i]] = tensors[i];
  }
  out["step"] = at::tensor({steps_}, at::kLong);
  return out;
}

void Optimizer::load_state(const NamedTensors& state, const std::string& source) {
  auto find = [&](const std::string& name) -> const at::Tensor& {
    auto it = state.find(name);
    if (it == state.end()) fail("'", source, "' lacks optimizer tensor '", name, "'; the checkpoint is incomplete");
    return it->second;
  };
  const auto& step = find("step");
  if (step.numel() != 1 || step.scalar_type() != at::kLong) {
    fail("'", source, "' tensor 'step' must be one int64, got ", step.scalar_type(), step.sizes());
  }
  // Check everything before changing anything, so a refused state leaves this optimizer as it was.
  for (const auto& [kind, tensors] : buffers_) {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      auto name = kind + "/" + names_[i];
      const auto& t = find(name);
      if (t.sizes() != tensors[i].sizes()) {
        fail("'", source, "' tensor '", name, "' has shape ", t.sizes(), " but the parameter has ", tensors[i].sizes());
      }
      if (t.scalar_type() != tensors[i].scalar_type()) {
        fail("'", source, "' tensor '", name, "' is ", t.scalar_type(), " but the optimizer keeps ", tensors[i].scalar_type());
      }
    }
  }
  std::size_t expected = 1;
  for (const auto& entry : buffers_) expected += entry.second.size();
  if (state.size() != expected) {
    for (const auto& [name, t] : state) {
      bool known = name == "step";
      for (const auto& [kind, tensors] : buffers_) {
        for (const auto& p : names_) known = known || name == kind + "/" + p;
      }
      if (!known) fail("'", source, "' has optimizer tensor '", name, "', which this optimizer and model do not have");
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [kind, tensors] : buffers_) {
    for (std::size_t i = 0; i < names_.size(); ++i) tensors[i].copy_(state.at(kind + "/" + names_[i]));
  }
  steps_ = step.item<std::int64_t>();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config, const NamedTensors& params) {
  config.validate();
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  for (const auto& [name, p] : params) {
    names.push_back(name);
    tensors.push_back(p);
  }
  if (config.name == "adamw") return std::make_unique<AdamFamily>(config, true, names, tensors);
  if (config.name == "adam") return std::make_unique<AdamFamily>(config, false, names, tensors);
  return std::make_unique<Sgd>(config, names, tensors);
}

}  // namespace dew::training
