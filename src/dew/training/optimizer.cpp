#include "dew/training/optimizer.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::training {
namespace {

// Parameters split into those that decay and those that do not, each with its buffers.
struct Group {
  std::vector<at::Tensor> params, grads;
  std::vector<std::vector<at::Tensor>*> buffer_lists;
};

class AdamFamily final : public Optimizer {
 public:
  AdamFamily(const OptimConfig& config, bool decoupled, std::vector<std::string> names, std::vector<at::Tensor> params)
      : Optimizer(std::move(names), std::move(params)), config_(config), decoupled_(decoupled) {
    exp_avg_ = &add_buffer("exp_avg");
    exp_avg_sq_ = &add_buffer("exp_avg_sq");
  }

  void step(double lr) override {
    at::NoGradGuard no_grad;
    ++steps_;
    const double beta1 = config_.beta1, beta2 = config_.beta2;
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(steps_));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(steps_));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    for (bool decay : {true, false}) {
      std::vector<at::Tensor> params, grads, m, v;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        const auto& grad = params_[i].grad();
        if (!grad.defined() || decays(params_[i]) != decay) continue;
        params.push_back(params_[i]);
        grads.push_back(grad);
        m.push_back((*exp_avg_)[i]);
        v.push_back((*exp_avg_sq_)[i]);
      }
      if (params.empty()) continue;
      const double wd = decay ? config_.weight_decay : 0.0;
      if (wd != 0) {
        if (decoupled_) {
          at::_foreach_mul_(params, 1 - lr * wd);  // AdamW: p *= 1 - lr * wd
        } else {
          grads = at::_foreach_add(grads, params, wd);  // Adam: g += wd * p
        }
      }
      at::_foreach_lerp_(m, grads, 1 - beta1);
      at::_foreach_mul_(v, beta2);
      at::_foreach_addcmul_(v, grads, grads, 1 - beta2);
      auto denom = at::_foreach_sqrt(v);
      at::_foreach_div_(denom, bias_correction2_sqrt);
      at::_foreach_add_(denom, config_.eps);
      at::_foreach_addcdiv_(params, m, denom, -step_size);
    }
  }

 private:
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

  void step(double lr) override {
    at::NoGradGuard no_grad;
    const bool first = steps_ == 0;
    ++steps_;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      if (!p.grad().defined()) continue;
      at::Tensor d = p.grad();
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
