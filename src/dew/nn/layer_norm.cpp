#include "dew/nn/layer_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdint>

#include "dew/nn/kernels/layer_norm.h"

namespace dew::nn {

namespace {

struct AffineLayerNorm : public torch::autograd::Function<AffineLayerNorm> {
  // x [..., D], weight and bias [D], all float32, contiguous, on the CPU.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps) {
    const std::int64_t D = x.size(-1), rows = x.numel() / D;
    auto y = at::empty_like(x);
    auto mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
    const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>(), *bp = bias.data_ptr<float>();
    float *yp = y.data_ptr<float>(), *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    at::parallel_for(0, rows, 64, [&](std::int64_t begin, std::int64_t end) {
      kernels::layer_norm_forward_rows(xp, wp, bp, yp, begin, end, D, static_cast<float>(eps), mp, rp);
    });
    ctx->save_for_backward({x, weight, mean, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto g = grads[0].to(at::kFloat).contiguous();
    const std::int64_t D = x.size(-1), rows = x.numel() / D;
    auto dx = at::empty_like(x);
    // The rows in as many fixed parts as threads, each summing its own dweight and dbias: no atomics, and
    // the same sums for the same thread count.
    const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>(at::get_num_threads(), rows));
    auto partial = at::zeros({parts, 2, D}, x.options());  // [part][dweight, dbias][D]
    const float *xp = x.data_ptr<float>(), *gp = g.data_ptr<float>(), *wp = weight.data_ptr<float>();
    const float *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    float *dxp = dx.data_ptr<float>(), *pp = partial.data_ptr<float>();
    at::parallel_for(0, parts, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t part = begin; part < end; ++part) {
        const std::int64_t first = rows * part / parts, last = rows * (part + 1) / parts;
        kernels::layer_norm_backward_rows(xp, gp, wp, mp, rp, first, last, D, dxp, pp + part * 2 * D, pp + part * 2 * D + D);
      }
    });
    const auto sums = partial.sum(0);  // [2, D]
    return {dx, sums[0], sums[1], at::Tensor()};
  }
};

}  // namespace

at::Tensor affine_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const bool fused = x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && x.numel() > 0 &&
                     x.is_contiguous() && weight.defined() && bias.defined() && weight.scalar_type() == at::kFloat &&
                     bias.scalar_type() == at::kFloat && weight.dim() == 1 && bias.dim() == 1 &&
                     weight.size(0) == x.size(-1) && bias.size(0) == x.size(-1) && weight.is_contiguous() &&
                     bias.is_contiguous() && weight.device().is_cpu() && bias.device().is_cpu();
  if (!fused) return at::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  return AffineLayerNorm::apply(x, weight, bias, eps);
}

}  // namespace dew::nn
