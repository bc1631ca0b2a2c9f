#include "dew/nn/diffusion/gated_residual.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <vector>

#include "dew/nn/kernels/gated_residual.h"

namespace dew::nn::diffusion {

namespace {

struct GatedResidual : public torch::autograd::Function<GatedResidual> {
  // x, branch [B, N, D] contiguous; gate [B, D] contiguous; all float32 on the CPU.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gate, const at::Tensor& branch) {
    const std::int64_t B = x.size(0), N = x.size(1), D = x.size(2);
    auto out = at::empty_like(x);
    const float *xp = x.data_ptr<float>(), *gp = gate.data_ptr<float>(), *yp = branch.data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, B, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b)
        kernels::gated_residual_forward_image(xp + b * N * D, gp + b * D, yp + b * N * D, op + b * N * D, N, D);
    });
    ctx->save_for_backward({gate, branch});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &gate = saved[0], &branch = saved[1];
    const auto g = grads[0].to(at::kFloat).contiguous();
    const std::int64_t B = branch.size(0), N = branch.size(1), D = branch.size(2);
    auto dbranch = at::empty_like(branch), dgate = at::empty_like(gate);
    const float *gp = g.data_ptr<float>(), *gatep = gate.data_ptr<float>(), *yp = branch.data_ptr<float>();
    float *dyp = dbranch.data_ptr<float>(), *dgp = dgate.data_ptr<float>();
    at::parallel_for(0, B, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        kernels::gated_residual_backward_image(gp + b * N * D, gatep + b * D, yp + b * N * D, dyp + b * N * D, dgp + b * D, N, D);
      }
    });
    return {g, dgate, dbranch};
  }
};

bool fused(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& branch) {
  for (const auto* t : {&x, &gate, &branch}) {
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat) return false;
  }
  return x.dim() == 3 && branch.sizes() == x.sizes() && gate.dim() == 2 && gate.size(0) == x.size(0) && gate.size(1) == x.size(2);
}

}  // namespace

at::Tensor gated_residual(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& branch) {
  if (!fused(x, gate, branch)) return at::addcmul(x, gate.unsqueeze(1), branch);
  // The chunks of DiT's modulation are strided views: the [B, D] copy is small.
  return GatedResidual::apply(x.contiguous(), gate.contiguous(), branch.contiguous());
}

}  // namespace dew::nn::diffusion
