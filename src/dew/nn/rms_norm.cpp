#include "dew/nn/rms_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dew/nn/kernels/rms_norm.h"

namespace dew::nn {

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps, double weight_offset) {
  auto x32 = x.to(at::kFloat);
  auto normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (weight_offset != 0.0) return (normed * (weight.to(at::kFloat) + weight_offset)).to(x.scalar_type());
  return weight.to(x.scalar_type()) * normed.to(x.scalar_type());
}

namespace {

// Rows are handled in blocks of this many; each block's weight gradient is summed on its own, then the
// blocks in order, so the result does not depend on how many threads took the blocks.
constexpr std::int64_t kBlockRows = 64;
constexpr std::int64_t kGrainElements = 1 << 14;  // per task: ~10 us of work, well above the fork cost

std::int64_t grain_blocks(std::int64_t d) { return std::max<std::int64_t>(1, kGrainElements / (kBlockRows * d)); }

// (w + offset) in fp32, or w in fp32 (the weight may be held in another dtype: the reference casts it too).
at::Tensor scale_of(const at::Tensor& weight, double weight_offset) {
  auto w = weight.to(at::kFloat).contiguous();
  return weight_offset != 0.0 ? w + weight_offset : w;
}

std::pair<at::Tensor, at::Tensor> forward_kernel(const at::Tensor& x, const at::Tensor& weight, double eps, double weight_offset) {
  const auto d = x.size(-1), rows = x.numel() / std::max<std::int64_t>(d, 1);
  auto scale = scale_of(weight, weight_offset);
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  auto rstd = at::empty({rows}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* sp = scale.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  const auto blocks = (rows + kBlockRows - 1) / kBlockRows;
  at::parallel_for(0, blocks, grain_blocks(d), [&](std::int64_t b0, std::int64_t b1) {
    const auto r0 = b0 * kBlockRows, r1 = std::min(rows, b1 * kBlockRows);
    kernels::rms_norm_forward_rows(xp + r0 * d, sp, static_cast<float>(eps), yp + r0 * d, rp + r0, r1 - r0, d);
  });
  return {y, rstd};
}

struct FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            double weight_offset) {
    auto [y, rstd] = forward_kernel(x, weight, eps, weight_offset);
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["weight_offset"] = weight_offset;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& rstd = saved[2];
    const auto scale = scale_of(saved[1], ctx->saved_data["weight_offset"].toDouble());
    const auto g = grads[0].to(at::kFloat).contiguous();
    const bool want_weight = ctx->needs_input_grad(1);
    const auto d = x.size(-1), rows = x.numel() / std::max<std::int64_t>(d, 1);
    const auto blocks = (rows + kBlockRows - 1) / kBlockRows;
    auto dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    at::Tensor partial = want_weight ? at::zeros({blocks, d}, x.options()) : at::Tensor();
    const float *xp = x.data_ptr<float>(), *gp = g.data_ptr<float>(), *sp = scale.data_ptr<float>(), *rp = rstd.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    float* pp = want_weight ? partial.data_ptr<float>() : nullptr;
    at::parallel_for(0, blocks, grain_blocks(d), [&](std::int64_t b0, std::int64_t b1) {
      for (auto b = b0; b < b1; ++b) {
        const auto r0 = b * kBlockRows, r1 = std::min(rows, r0 + kBlockRows);
        kernels::rms_norm_backward_rows(xp + r0 * d, gp + r0 * d, sp, rp + r0, dxp + r0 * d, pp ? pp + b * d : nullptr, r1 - r0,
                                        d);
      }
    });
    at::Tensor dweight;
    if (want_weight) {
      dweight = at::zeros({d}, x.options());
      float* dw = dweight.data_ptr<float>();
      for (std::int64_t b = 0; b < blocks; ++b)
        for (std::int64_t k = 0; k < d; ++k) dw[k] += pp[b * d + k];
    }
    return {dx, want_weight ? dweight.to(saved[1].scalar_type()) : dweight, at::Tensor(), at::Tensor()};
  }
};

bool fused(const at::Tensor& x, const at::Tensor& weight) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && weight.device().is_cpu() && at::isFloatingType(weight.scalar_type()) &&
         weight.dim() == 1 && x.dim() >= 1 && weight.size(0) == x.size(-1) && x.numel() > 0;
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, double weight_offset) {
  if (!fused(x, weight)) return rms_norm_reference(x, weight, eps, weight_offset);
  const auto input = x.contiguous();
  const bool grad = at::GradMode::is_enabled() && (input.requires_grad() || weight.requires_grad());
  if (!grad) {
    at::NoGradGuard no_grad;  // the weight + offset scale must not record a graph either
    return forward_kernel(input, weight, eps, weight_offset).first;
  }
  return FusedRmsNorm::apply(input, weight, eps, weight_offset);
}

}  // namespace dew::nn
