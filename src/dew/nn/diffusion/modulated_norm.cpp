#include "dew/nn/diffusion/modulated_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>

#include "dew/nn/diffusion/image_layers.h"
#include "dew/nn/kernels/modulated_norm.h"

namespace dew::nn::diffusion {

namespace {

struct ModulatedLayerNorm : public torch::autograd::Function<ModulatedLayerNorm> {
  // x [B, N, D], shift and scale [B, D], all float32, contiguous, on the CPU.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& shift,
                            const at::Tensor& scale, double eps) {
    const auto B = x.size(0), N = x.size(1), D = x.size(2);
    auto y = at::empty_like(x);
    auto mean = at::empty({B, N}, x.options()), rstd = at::empty({B, N}, x.options());
    const float *xp = x.data_ptr<float>(), *sh = shift.data_ptr<float>(), *sc = scale.data_ptr<float>();
    float *yp = y.data_ptr<float>(), *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    at::parallel_for(0, B * N, 64, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const std::int64_t b = r / N;
        kernels::modulated_norm_forward_row(xp + r * D, sh + b * D, sc + b * D, yp + r * D, D, static_cast<float>(eps), mp + r,
                                            rp + r);
      }
    });
    ctx->save_for_backward({x, scale, mean, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &scale = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto g = grads[0].to(at::kFloat).contiguous();
    const auto B = x.size(0), N = x.size(1), D = x.size(2);
    auto dx = at::empty_like(x);
    auto dscale = at::zeros({B, D}, x.options()), dshift = at::zeros({B, D}, x.options());
    const float *xp = x.data_ptr<float>(), *gp = g.data_ptr<float>(), *sc = scale.data_ptr<float>();
    const float *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    float *dxp = dx.data_ptr<float>(), *dsc = dscale.data_ptr<float>(), *dsh = dshift.data_ptr<float>();
    // Over images: each task owns its images' dscale and dshift rows, so the sums need no atomics.
    at::parallel_for(0, B, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        for (std::int64_t n = 0; n < N; ++n) {
          const std::int64_t r = b * N + n;
          kernels::modulated_norm_backward_row(xp + r * D, gp + r * D, sc + b * D, mp[r], rp[r], D, dxp + r * D, dsc + b * D,
                                               dsh + b * D);
        }
      }
    });
    return {dx, dshift, dscale, at::Tensor()};
  }
};

}  // namespace

at::Tensor modulated_layer_norm(const at::Tensor& x, const at::Tensor& shift, const at::Tensor& scale, double eps) {
  const bool fused = x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 && shift.scalar_type() == at::kFloat &&
                     scale.scalar_type() == at::kFloat && shift.sizes() == scale.sizes() && shift.dim() == 2 &&
                     shift.size(0) == x.size(0) && shift.size(1) == x.size(2);
  if (!fused) return modulate(plain_layer_norm(x, eps), shift, scale);
  return ModulatedLayerNorm::apply(x.contiguous(), shift.contiguous(), scale.contiguous(), eps);
}

}  // namespace dew::nn::diffusion
