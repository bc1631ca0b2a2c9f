// Without trapping math GCC vectorises the row loops below (no code here reads floating-point flags).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "dew/nn/diffusion/modulated_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>

#include "dew/nn/cpu_kernel.h"
#include "dew/nn/diffusion/image_layers.h"

namespace dew::nn::diffusion {

namespace {

// One row of D: y = (x - mean) * rstd * (1 + scale) + shift.
DEW_CPU_CLONES void forward_row(const float* __restrict x, const float* __restrict shift, const float* __restrict scale,
                                float* __restrict y, std::int64_t D, float eps, float* mean_out, float* rstd_out) {
  float mean, rstd;
  row_mean_rstd(x, D, eps, mean, rstd);
  for (std::int64_t d = 0; d < D; ++d) y[d] = (x[d] - mean) * rstd * (1.0f + scale[d]) + shift[d];
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row's backward. With gs = g (1 + scale) and x_hat = (x - mean) rstd:
//   dx = rstd (gs - mean(gs) - x_hat mean(gs x_hat)),  dscale += g x_hat,  dshift += g.
DEW_CPU_CLONES void backward_row(const float* __restrict x, const float* __restrict g, const float* __restrict scale, float mean,
                                 float rstd, std::int64_t D, float* __restrict dx, float* __restrict dscale,
                                 float* __restrict dshift) {
  const std::int64_t body = D - D % kLanes;
  Lanes a_lanes = {}, c_lanes = {};
  for (std::int64_t d = 0; d < body; d += kLanes) {
    const Lanes x_hat = (DEW_LANES_LOAD(x + d) - mean) * rstd, gs = DEW_LANES_LOAD(g + d) * (1.0f + DEW_LANES_LOAD(scale + d));
    a_lanes += gs;
    c_lanes += gs * x_hat;
  }
  float a = 0, c = 0;
  for (int l = 0; l < kLanes; ++l) a += a_lanes[l], c += c_lanes[l];
  for (std::int64_t d = body; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    const float gs = g[d] * (1.0f + scale[d]);
    a += gs;
    c += gs * x_hat;
  }
  for (std::int64_t d = 0; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    dscale[d] += g[d] * x_hat;
    dshift[d] += g[d];
  }
  a /= static_cast<float>(D);
  c /= static_cast<float>(D);
  for (std::int64_t d = 0; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    dx[d] = rstd * (g[d] * (1.0f + scale[d]) - a - x_hat * c);
  }
}

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
        forward_row(xp + r * D, sh + b * D, sc + b * D, yp + r * D, D, static_cast<float>(eps), mp + r, rp + r);
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
          backward_row(xp + r * D, gp + r * D, sc + b * D, mp[r], rp[r], D, dxp + r * D, dsc + b * D, dsh + b * D);
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
