#include "dew/nn/activations.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cstdint>

#include "dew/nn/kernels/activations.h"

namespace dew::nn {

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per task: ~10 us of work, well above the fork cost

using Forward = void (*)(const float*, float*, std::int64_t);
using Backward = void (*)(const float*, const float*, float*, std::int64_t);

at::Tensor run_forward(Forward kernel, const at::Tensor& x) {
  auto y = at::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) { kernel(in + begin, out + begin, end - begin); });
  return y;
}

at::Tensor run_backward(Backward kernel, const at::Tensor& x, const at::Tensor& grad) {
  const auto g = grad.contiguous();
  auto dx = at::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  float* out = dx.data_ptr<float>();
  at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) { kernel(in + begin, gp + begin, out + begin, end - begin); });
  return dx;
}

struct Kernels {
  Forward forward;
  Backward backward;
};
const Kernels kGeluTanh{kernels::gelu_tanh_forward, kernels::gelu_tanh_backward};
const Kernels kSilu{kernels::silu_forward, kernels::silu_backward};

// The saved input, not the output, is what backward reads: it recomputes the sigmoid. Not twice
// differentiable (its backward is a kernel, not a graph); nothing in dew asks for double backward.
struct FusedActivation : public torch::autograd::Function<FusedActivation> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const Kernels* kernels) {
    ctx->save_for_backward({x});
    ctx->saved_data["kernels"] = reinterpret_cast<std::int64_t>(kernels);
    return run_forward(kernels->forward, x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto* kernels = reinterpret_cast<const Kernels*>(ctx->saved_data["kernels"].toInt());
    return {run_backward(kernels->backward, ctx->get_saved_variables()[0], grads[0].to(at::kFloat)), at::Tensor()};
  }
};

using GatedForward = void (*)(const float*, const float*, float*, std::int64_t);
using GatedBackward = void (*)(const float*, const float*, const float*, float*, float*, std::int64_t);

struct GatedKernels {
  GatedForward forward;
  GatedBackward backward;
};
const GatedKernels kSwiGlu{kernels::swiglu_forward, kernels::swiglu_backward};
const GatedKernels kGeGlu{kernels::geglu_forward, kernels::geglu_backward};

at::Tensor run_gated_forward(GatedForward kernel, const at::Tensor& gate, const at::Tensor& up) {
  auto y = at::empty_like(gate);
  const float *g = gate.data_ptr<float>(), *u = up.data_ptr<float>();
  float* out = y.data_ptr<float>();
  at::parallel_for(0, gate.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) { kernel(g + begin, u + begin, out + begin, end - begin); });
  return y;
}

// Saves the two inputs (the composition act(g) * u saves g, act(g) and u), and recomputes the sigmoid.
struct FusedGated : public torch::autograd::Function<FusedGated> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up, const GatedKernels* kernels) {
    ctx->save_for_backward({gate, up});
    ctx->saved_data["kernels"] = reinterpret_cast<std::int64_t>(kernels);
    return run_gated_forward(kernels->forward, gate, up);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto* kernels = reinterpret_cast<const GatedKernels*>(ctx->saved_data["kernels"].toInt());
    const auto saved = ctx->get_saved_variables();
    const auto dy = grads[0].to(at::kFloat).contiguous();
    auto dg = at::empty_like(saved[0]), du = at::empty_like(saved[1]);
    const float *g = saved[0].data_ptr<float>(), *u = saved[1].data_ptr<float>(), *d = dy.data_ptr<float>();
    float *dgp = dg.data_ptr<float>(), *dup = du.data_ptr<float>();
    at::parallel_for(0, dy.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      kernels->backward(g + begin, u + begin, d + begin, dgp + begin, dup + begin, end - begin);
    });
    return {dg, du, at::Tensor()};
  }
};

at::Tensor apply_gated(const GatedKernels& kernels, const at::Tensor& gate, const at::Tensor& up) {
  const auto g = gate.contiguous(), u = up.contiguous();
  if (!at::GradMode::is_enabled() || (!g.requires_grad() && !u.requires_grad())) return run_gated_forward(kernels.forward, g, u);
  return FusedGated::apply(g, u, &kernels);
}

bool fused_gated(const at::Tensor& gate, const at::Tensor& up) {
  return gate.device().is_cpu() && up.device().is_cpu() && gate.scalar_type() == at::kFloat && up.scalar_type() == at::kFloat &&
         gate.sizes() == up.sizes();
}

at::Tensor apply(const Kernels& kernels, const at::Tensor& x) {
  const auto input = x.contiguous();
  if (!input.requires_grad() || !at::GradMode::is_enabled()) return run_forward(kernels.forward, input);
  return FusedActivation::apply(input, &kernels);
}

bool fused(const at::Tensor& x) { return x.device().is_cpu() && x.scalar_type() == at::kFloat; }

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x) { return fused(x) ? apply(kGeluTanh, x) : at::gelu(x, "tanh"); }

at::Tensor silu(const at::Tensor& x) { return fused(x) ? apply(kSilu, x) : at::silu(x); }

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  return fused_gated(gate, up) ? apply_gated(kSwiGlu, gate, up) : dew::nn::silu(gate) * up;
}

at::Tensor geglu(const at::Tensor& gate, const at::Tensor& up) {
  return fused_gated(gate, up) ? apply_gated(kGeGlu, gate, up) : dew::nn::gelu_tanh(gate) * up;
}

}  // namespace dew::nn
